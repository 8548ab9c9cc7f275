"""Past max_events, memory stays flat and every draw is still counted."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_a_million_draws_from_one_site_add_little_memory_and_are_all_counted():
    code = textwrap.dedent(
        """
        import random
        from rngtrace import rng_trace
        def status(field):
            for line in open("/proc/self/status"):
                if line.startswith(field):
                    return int(line.split()[1])
        for _ in range(10000): random.random()
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        before = status("VmRSS:")
        with rng_trace(print=False, max_events=100_000) as t:
            for _ in range(1_000_000):
                random.random()
        peak = status("VmHWM:")
        (stat,) = t.statistics()
        print(peak - before, stat.calls, stat.values, len(t.events), t.dropped)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    kib, calls, values, kept, dropped = map(int, out.stdout.split())
    assert (calls, values, kept, dropped) == (1_000_000, 1_000_000, 100_000, 900_000)
    assert kib < 32 * 1024, f"{kib / 1024:.1f} MiB added"


def test_counted_statistics_match_a_known_program_exactly():
    from rngtrace import rng_trace

    with rng_trace(print=False, max_events=10) as trace:
        for i in range(30):
            random.random()
            if i % 3 == 0:
                random.choices("ab", k=4)
    by_api = {s.api: (s.calls, s.values) for s in trace.statistics()}
    assert by_api == {"random.random": (30, 30), "random.choices": (10, 40)}
    assert trace.dropped == 40 - 10
