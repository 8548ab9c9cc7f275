"""The README's story: a library's first init() draws once and shifts the seeded stream."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import numpy as np

from rngtrace import rng_trace

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples")


def test_the_log_names_the_line_in_init_that_shifted_the_stream(tmp_path, monkeypatch):
    (tmp_path / "devlib.py").write_text(
        textwrap.dedent(
            """\
            import numpy as np
            _ready = False

            def init():
                global _ready
                if not _ready:
                    _ready = np.random.uniform() >= 0
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    import devlib

    log = io.StringIO()
    with rng_trace(file=log) as trace:
        np.random.seed(666)
        devlib.init()
        x = np.random.rand(1)
    np.random.seed(666)
    assert x[0] != np.random.rand(1)[0], "init() shifted the seeded stream"

    seed, shift, ours = trace.events
    assert (seed.kind, seed.detail) == ("seed", "666")
    assert (shift.api, shift.stack[0].function, shift.stack[0].lineno) == ("numpy.random.uniform", "init", 7)
    assert shift.stack[0].filename == str(tmp_path / "devlib.py")
    assert ours.api == "numpy.random.rand"
    assert "devlib.py:7" in log.getvalue()


def test_the_example_story_prints_its_log_to_stderr_and_leaves_stdout_alone():
    out = subprocess.run([sys.executable, "story.py"], cwd=EXAMPLES, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("x = 0.844187")
    assert "acc/devinit.py:10" in out.stderr
    assert "numpy.random.uniform" in out.stderr
