"""A lone trace whose streams include a library not imported yet repeats its install in one step too."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_a_lone_trace_watching_for_an_unimported_library_is_repeated_by_the_plan_and_still_installs_it():
    code = textwrap.dedent(
        """
        import random, sys
        from rngtrace import rng_trace
        from rngtrace._hub import HUB
        assert "numpy" not in sys.modules and "torch" not in sys.modules
        for _ in range(3):
            with rng_trace(print=False) as trace:
                random.random()
            assert [e.api for e in trace.events if e.kind == "draw"] == ["random.random"]
        print(sorted(name for name, _module in HUB.plan.watches))
        with rng_trace(print=False) as trace:
            import numpy.random
            numpy.random.rand()
        print([e.api for e in trace.events if e.kind == "draw"])
        print(HUB.hooked())
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    watches, draws, hooked = out.stdout.strip().splitlines()
    assert watches in ("['numpy', 'torch']", "['numpy']"), out.stderr
    assert draws == "['numpy.random.rand']"
    assert hooked == "{}"
