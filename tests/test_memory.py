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


def _log_sites(trace) -> list[tuple]:
    """The log's call-site table: draws grouped by (stream, api, calling line, user's line), as the text log does."""
    from rngtrace.render.base import site_key

    groups: dict[tuple, list[int]] = {}
    for stat in trace.statistics("traceback"):
        slot = groups.setdefault(site_key(stat, "/"), [0, 0])
        slot[0] += stat.calls
        slot[1] += stat.values
    return sorted((*key, *counts) for key, counts in groups.items())


def test_past_max_events_the_call_site_table_names_every_distinct_stack_with_its_count():
    from rngtrace import rng_trace

    _funcs, work = _pairs_program(12)  # 144 draws from 144 distinct stacks, drawn in code not the user's

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
    assert _site_table(capped, "lineno") == _site_table(whole, "lineno")
    assert _log_sites(capped) == _log_sites(whole)
    # Past max_events a stack is kept through the user's first line (``work``): each of the 144 still
    # its own, each the start of the whole trace's stack, with its count.
    capped_rows, whole_rows = _site_table(capped, "traceback"), _site_table(whole, "traceback")
    assert len(capped_rows) == len(whole_rows) == 144
    for (s, a, stack, calls, values), (s2, a2, stack2, calls2, values2) in zip(capped_rows, whole_rows):
        assert (s, a, calls, values) == (s2, a2, calls2, values2) and stack == stack2[: len(stack)]
    # (3.11+ names a frame by its qualified name, ``..<locals>.work``; 3.10 by ``work`` alone.)
    assert sum(stack[-1][2].rpartition(".")[2] == "work" for _s, _a, stack, _c, _v in capped_rows) == 124


def _user_pairs_program(path, functions: int, inner: int):
    """The benchmark's program in a file of the user's: f_i calls f_j, which draws, for f_j in the first ``inner``."""
    source = "\n".join(f"def f{i}(g=None):\n    return random.random() if g is None else g()" for i in range(functions))
    source += f"\ndef work():\n    for outer in FUNCS:\n        for callee in FUNCS[:{inner}]:\n"
    source += "            outer(callee)\n"
    source += "def lib_draws():\n    random.choices('ab', k=3)\n    random.sample(range(10), 2)\n"
    namespace: dict = {"random": random}
    exec(compile(source, str(path), "exec"), namespace)
    namespace["FUNCS"] = [namespace[f"f{i}"] for i in range(functions)]
    return namespace


def test_past_max_events_only_each_call_sites_form_is_counted_and_the_log_is_unchanged(tmp_path):
    from rngtrace import rng_trace

    program = _user_pairs_program(tmp_path / "pairs.py", 40, 5)  # 200 distinct stacks through 5 drawing lines

    def traced(max_events: int):
        with rng_trace(print=False, max_events=max_events) as trace:
            for _ in range(2):
                program["work"]()
                program["lib_draws"]()
        return trace

    whole, capped = traced(100_000), traced(30)
    assert capped.dropped == len(whole) - 30
    # Each drawing line is one call-site form past max_events, whatever called it: 5 + 2 rows, not 200 + 2.
    assert len(capped.overflow) == 7
    assert _site_table(capped, "lineno") == _site_table(whole, "lineno")
    assert _log_sites(capped) == _log_sites(whole)


def test_past_max_events_the_log_and_findings_are_those_whole_stacks_gave(tmp_path, monkeypatch):
    from rngtrace import rng_trace
    from rngtrace._stack import StackTable
    from rngtrace.render import render

    program = _user_pairs_program(tmp_path / "pairs.py", 30, 4)

    def traced():
        with rng_trace(print=False, max_events=25) as trace:
            program["lib_draws"]()
            random.seed()  # from OS entropy, among the kept events: a finding
            program["lib_draws"]()
            for _ in range(2):
                program["work"]()
                program["lib_draws"]()
        return trace

    forms = traced()
    # The same trace with every counted event's whole stack interned, as before call-site forms.
    monkeypatch.setattr(StackTable, "capture_site", lambda self, frame, depth, raw_limit=0: self.capture(frame, depth))
    stacks = traced()
    assert len(stacks.overflow) > len(forms.overflow)
    assert [(f.kind, f.stream, f.message, f.events) for f in forms.findings] == [
        (f.kind, f.stream, f.message, f.events) for f in stacks.findings
    ]
    assert forms.findings  # the global stream drawn from, seeded: something to compare
    assert render(forms) == render(stacks)


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


def test_past_max_events_the_values_drawn_are_bit_identical_and_counted_with_their_sizes(tmp_path):
    import numpy as np

    from rngtrace import rng_trace

    funcs = _user_pairs_program(tmp_path / "pairs.py", 20, 5)["FUNCS"]

    def body() -> tuple[list, bytes]:
        values = [outer(callee) for outer in funcs for callee in funcs[:5]]  # 100 distinct stacks
        arrays = [np.random.rand(4) for _ in range(50)]
        return values, np.concatenate(arrays).tobytes()

    random.seed(5)
    np.random.seed(5)
    plain = body()
    random.seed(5)
    np.random.seed(5)
    with rng_trace(print=False, max_events=10) as trace:
        traced = body()
    assert traced == plain
    assert trace.dropped == 140
    assert len(trace.overflow) == 6  # the 5 drawing lines' forms and numpy's line, not a row per stack
    assert sorted((s.stream, s.calls, s.values) for s in trace.statistics("lineno")) == [
        ("numpy", 50, 200),
        *[("random", 20, 20)] * 5,
    ]


_DISTINCT_STACKS = """
import json, os, random, sys
sys.path.insert(0, sys.argv[1])
from rngtrace import rng_trace
from rngtrace.render.base import site_key
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])
with open(os.path.join(sys.argv[1], "pairs.py"), "w") as f:
    f.write("import random\\n")
    f.write("".join(f"def f{i}(g=None):\\n    return random.random() if g is None else g()\\n" for i in range(2000)))
    f.write("FUNCS = [globals()[f'f{i}'] for i in range(2000)]\\n")
    f.write("def work():\\n    for outer in FUNCS:\\n        for callee in FUNCS[:20]:\\n            outer(callee)\\n")
import pairs
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
before = status("VmRSS:")
with rng_trace(print=False, max_events=1000) as t:
    pairs.work()  # 40,000 draws, each from its own stack, through 20 drawing lines
kib = status("VmHWM:") - before
sites = sorted([*site_key(s, "/"), s.calls] for s in t.statistics("traceback"))
print(json.dumps([kib, len(t.overflow), t.dropped, sites, [f.kind for f in t.findings]]))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/status")
def test_draws_from_many_distinct_stacks_past_max_events_keep_one_form_per_line_in_c_and_in_python(tmp_path):
    import json
    import os

    results = []
    for pure in ("0", "1"):
        env = {**os.environ, "RNGTRACE_PURE": pure}
        argv = [sys.executable, "-c", _DISTINCT_STACKS, str(tmp_path)]
        out = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env)
        assert out.returncode == 0, out.stderr
        results.append(json.loads(out.stdout))
    for kib, overflow, dropped, _sites, _kinds in results:
        assert (overflow, dropped) == (20, 39_000)  # a form per drawing line, not one per stack
        assert kib < 16 * 1024, f"{kib / 1024:.1f} MiB added"
    assert results[0][3:] == results[1][3:]  # the same call-site table and findings, accelerated or not


def test_nested_traces_each_keep_call_site_forms_only_past_their_own_max_events(tmp_path):
    from rngtrace import rng_trace

    funcs = _user_pairs_program(tmp_path / "pairs.py", 20, 5)["FUNCS"]
    with rng_trace(print=False, max_events=100_000) as outer:
        with rng_trace(print=False, max_events=10) as inner:
            for f in funcs:
                for callee in funcs[:5]:
                    f(callee)  # 100 draws from 100 distinct stacks through 5 drawing lines
    assert (len(outer.events), outer.dropped) == (100, 0)
    assert (len(inner.events), inner.dropped) == (10, 90)
    assert len(inner.overflow) == 5  # a row per drawing line while the outer trace keeps every stack
    assert _log_sites(inner) == _log_sites(outer)
