"""A long log's findings read no more of its rows than their answers need (``rngtrace run`` over a test suite)."""

from __future__ import annotations

from literal_traces import build, draw, seed

from rngtrace._duplicates import duplicates
from rngtrace._start_findings import unseeded

HERE = ("train.py", 3, "main")


class _RowsReadUpTo(list):
    """A log's rows that fail the test when read past the first ``limit``."""

    def __init__(self, rows: list, limit: int) -> None:
        super().__init__(rows)
        self.limit = limit

    def __iter__(self):
        for i, row in enumerate(super().__iter__()):
            assert i < self.limit, f"row {i} read, past the {self.limit} the answer needs"
            yield row


def test_one_process_shared_no_state_with_another_without_its_rows_being_read():
    trace = build(
        seed("random.seed", "0", HERE),
        *[draw("random.random", 1, HERE)] * 50,
        origins=(("random", "d1", "seed", 1), ("random", "d2", "seed", 1)),
    )
    trace.raw = _RowsReadUpTo(trace.raw, 0)
    assert duplicates(trace) == []


def test_two_processes_that_started_from_different_states_are_told_apart_without_reading_rows():
    trace = build(*[draw("random.random", 1, HERE)] * 50, origins=(("random", "d1", "fork", 0),))
    trace.origins.append((2, "random", "d2", "fork", 0))  # a child forked: its random reseeded
    trace.raw = _RowsReadUpTo(trace.raw, 0)
    assert duplicates(trace) == []


def test_where_each_process_started_is_read_from_its_first_rows_only():
    trace = build(*[draw("random.random", 1, HERE)] * 50, from_start=True)
    events = trace.events
    trace.raw = _RowsReadUpTo(trace.raw, 1)  # the traced process starts at its first row
    found = unseeded(trace, events)
    assert [f.kind for f in found] == ["unseeded"]


def test_counts_and_statistics_of_rows_repeated_many_times_count_each_row():
    loop = draw("numpy.random.rand", 3, HERE)
    other = draw("random.random", None, ("train.py", 4, "main"))
    trace = build(seed("random.seed", "0", HERE), *[loop] * 40, other, *[loop] * 10, other)
    assert trace.counts() == {("random", "seed"): 1, ("numpy", "draw"): 50, ("random", "draw"): 2}
    stats = trace.statistics()
    assert [(s.api, s.calls, s.values) for s in stats] == [("numpy.random.rand", 50, 150), ("random.random", 2, 0)]


class _CountedReads(list):
    """A log's rows that count how many times they are walked."""

    walks = 0

    def __iter__(self):
        self.walks += 1
        return super().__iter__()


def test_a_finished_log_is_walked_once_for_its_counts_statistics_and_duplicates():
    loop = draw("numpy.random.rand", 3, HERE)
    trace = build(*[loop] * 30, origins=(("numpy", "d1", "fork", 0),))
    trace.origins.append((2, "numpy", "d1", "fork", 0))  # a child started where the parent stood
    trace.raw = rows = _CountedReads(trace.raw)
    trace.counts(), trace.counts(), trace.statistics(), duplicates(trace)
    assert rows.walks == 1


def test_a_log_whose_rows_are_each_their_own_object_keeps_no_list_of_runs_beside_them():
    # A log read back from a file has one row object per line: a kept list of a million runs of
    # one would double its memory (rngtrace show of a 53 MiB log peaked at 1.9x the file, not 0.8x).
    rows = [draw("random.random", None, ("train.py", 3 + i % 7, "main")) for i in range(2_000)]
    trace = build(*rows)
    trace.raw = walked = _CountedReads(trace.raw)
    assert trace.counts() == {("random", "draw"): 2_000}
    assert sum(s.calls for s in trace.statistics()) == 2_000
    assert walked.walks >= 2  # walked again by each reader, not kept as runs
    assert sum(n for _row, n in trace.runs()) == 2_000


def _alternating_log():
    """A log read back from a file: a row object per line, a loop over call sites of several kinds, counts and
    streams, so nearly every row is a run of its own (rngtrace show of a 9.1 M-row log walked 9.1 M runs per reader)."""
    sites = [
        draw("random.random", None, ("train.py", 3, "main")),
        draw("numpy.random.rand", 4, ("train.py", 4, "main"), ("lib.py", 9, "f")),
        draw("torch.rand", 2, ("train.py", 5, "main")),
        draw("numpy.random.rand", 1, ("train.py", 4, "main"), ("lib.py", 9, "f")),  # another count, one site
        seed("random.seed", "7", ("train.py", 6, "main")),
    ]
    rows = [dict(sites[(i * 7) % 5 if i % 11 else 1]) for i in range(6_000)]
    rows[100:160] = [dict(sites[2])] * 60  # and one long run in the middle
    return build(*rows, overflow=((sites[0], 5, 0), (sites[1], 2, 8)))


def test_a_log_whose_rows_are_runs_of_their_own_is_counted_per_row_as_it_is_per_run(monkeypatch):
    per_row = _alternating_log()
    assert per_row.few_runs() is None  # most rows are a run of their own: counted one by one, in C
    per_run = _alternating_log()
    runs = list(per_run.runs())
    monkeypatch.setattr(per_run, "few_runs", lambda: runs)
    assert list(per_row.counts().items()) == list(per_run.counts().items())
    for key_type in ("lineno", "traceback"):
        for kind in ("draw", "seed"):
            assert per_row.statistics(key_type, kind) == per_run.statistics(key_type, kind)
    assert per_row.counts()[("numpy", "draw")] == sum(1 for r in per_row.raw if r[0] == "numpy") + 2


def test_a_trace_of_long_runs_is_still_counted_per_run():
    # A live trace keeps a loop's row again and again (one object): its runs are few, and kept.
    trace = build(draw("numpy.random.rand", 3, HERE), draw("random.random", None, ("train.py", 4, "main")))
    trace.raw = [trace.raw[0]] * 5_000 + [trace.raw[1]]
    runs = trace.few_runs()
    assert runs is not None and [n for _row, n in runs] == [5_000, 1]
