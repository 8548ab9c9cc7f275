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


def _pairs_program(functions: int) -> tuple[list, object]:
    """Functions called in pairs: outer f_i calls inner f_j, which draws, so each pair is its own stack."""
    source = "\n".join(f"def f{i}(g=None):\n    return random.random() if g is None else g()" for i in range(functions))
    namespace: dict = {"random": random}
    exec(compile(source, "<pairs>", "exec"), namespace)
    funcs = [namespace[f"f{i}"] for i in range(functions)]

    def work() -> None:
        for outer in funcs:
            for callee in funcs:
                outer(callee)

    return funcs, work


def _site_table(trace, key_type: str) -> list[tuple]:
    return sorted(
        (s.stream, s.api, tuple((f.filename, f.lineno, f.function) for f in s.stack), s.calls, s.values)
        for s in trace.statistics(key_type)
    )


def test_past_max_events_the_call_site_table_names_every_distinct_stack_with_its_count():
    from rngtrace import rng_trace

    _funcs, work = _pairs_program(12)  # 144 draws from 144 distinct stacks

    def traced(max_events: int):
        with rng_trace(print=False, max_events=max_events) as trace:
            work()  # one line for both traces: their stacks are the same
        return trace

    whole, capped = traced(10_000), traced(20)
    assert (len(whole.events), whole.dropped) == (144, 0)
    assert (len(capped.events), capped.dropped) == (20, 124)
    # The kept events are the first max_events, in order, from the same sites as the whole trace's.
    first = [(e.api, tuple((f.function, f.lineno) for f in e.stack)) for e in whole.events[:20]]
    assert [(e.api, tuple((f.function, f.lineno) for f in e.stack)) for e in capped.events] == first
    for key_type in ("traceback", "lineno"):
        assert _site_table(capped, key_type) == _site_table(whole, key_type)
    assert len(capped.statistics("traceback")) == 144


def test_statistics_equal_the_event_by_event_grouping_in_order():
    from rngtrace import rng_trace

    _funcs, work = _pairs_program(6)
    with rng_trace(print=False) as trace:
        work()
        random.choices("ab", k=3)
    for key_type in ("lineno", "traceback"):
        groups: dict[tuple, list] = {}
        for event in trace.draws:
            site = event.stack if key_type == "traceback" else event.stack[:1]
            slot = groups.setdefault((event.stream, event.api, site), [0, 0])
            slot[0] += 1
            slot[1] += event.count or 0
        expected = [(s, a, site, c, v) for (s, a, site), (c, v) in groups.items()]
        expected.sort(key=lambda row: (-row[3], -row[4], row[0], row[1]))
        got = [(s.stream, s.api, s.stack, s.calls, s.values) for s in trace.statistics(key_type)]
        assert got == expected


def test_a_saved_log_with_repeated_rows_and_overflow_round_trips_byte_identical(tmp_path, capsys):
    from rngtrace import Trace, cli, rng_trace

    _funcs, work = _pairs_program(5)
    with rng_trace(print=False, max_events=40) as trace:
        for _ in range(3):
            work()  # the first 40 rows kept, with repeats; the rest counted per stack
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    trace.save(first)
    loaded = Trace.load(first)
    assert loaded.raw[0] is loaded.raw[25]  # a repeated row is held once
    loaded.save(second)
    assert second.read_bytes() == first.read_bytes()
    shown = []
    for path in (first, second):
        assert cli.main(["show", str(path)]) == 0
        shown.append(capsys.readouterr().out)
    assert shown[0] == shown[1] and "random.random" in shown[0]
