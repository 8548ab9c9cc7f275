"""Reading a long log without an Event per row: the findings and the text log walk the raw rows
(``EventRows``), make an Event for the rows they keep or show, and find and print what the list of
every Event gives."""

from __future__ import annotations

import os

import pytest
from fork_pools import parent_and_forked_child_draw
from literal_traces import build, draw, moved, seed

from rngtrace import Trace
from rngtrace._findings import KINDS
from rngtrace._model import Event, build_events
from rngtrace._rows import EventRows, alike, event_pids, event_rows, kind_count, walk
from rngtrace.render.text import render

HERE = os.path.abspath(__file__)  # the user's file
LIB = os.path.join(os.sep, "venv", "lib", "python3.11", "site-packages", "aug", "core.py")


def _interleaved(library_draws: int = 3) -> Trace:
    """The user's seed, a library's draws from one line (rows alike), then the user's draw."""
    return build(
        seed("numpy.random.seed", "0", (HERE, 4, "<module>")),
        *[draw("numpy.random.rand", 2, (LIB, 10, "jitter"), (HERE, 5, "<module>"))] * library_draws,
        draw("numpy.random.rand", 1, (HERE, 6, "<module>")),
    )


def _mixed() -> Trace:
    """Moves with windows, seeds, draws of two threads, a reseed by a library, an entropy seed."""
    return build(
        draw("random.random", 1, (HERE, 3, "<module>")),
        seed("numpy.random.seed", "1", (HERE, 4, "<module>")),
        draw("numpy.random.rand", 1, (HERE, 5, "f")),
        moved("numpy", "moved by C code", (HERE, 7, "<module>")),
        draw("numpy.random.rand", 1, (HERE, 7, "<module>")),
        seed("numpy.random.seed", "9", (LIB, 2, "setup"), (HERE, 8, "<module>")),
        draw("numpy.random.rand", 1, (HERE, 9, "<module>"), thread=2),
        seed("random.seed", None, (HERE, 10, "<module>")),
        draw("random.random", 1, (HERE, 11, "<module>")),
        moved("random", "moved by C code", (HERE, 12, "<module>")),
        from_start=True,
    )


TRACES = {"interleaved": _interleaved, "mixed": _mixed}


def _built(trace: Trace) -> list[Event]:
    return build_events(trace.raw, trace.resolved_stacks(), trace.threads, trace.pid, {trace.raw[-1][5]: 77})


@pytest.mark.parametrize("name", list(TRACES))
def test_event_rows_make_the_events_build_events_makes(name):
    trace = TRACES[name]()
    rows = EventRows(trace.raw, trace.resolved_stacks(), trace.threads, trace.pid, {trace.raw[-1][5]: 77})
    events = _built(trace)
    assert len(rows) == len(events)
    assert list(rows) == events
    assert [rows[i] for i in range(-len(events), len(events))] == events + events
    assert rows[2:-1] == events[2:-1] and rows[::3] == events[::3]
    with pytest.raises(IndexError):
        rows[len(events)]
    assert event_pids(rows) == event_pids(events) == {e.pid for e in events}
    for kind in ("draw", "unattributed"):
        expected = sum(e.kind == kind for e in events[1:8])
        assert kind_count(rows, kind, 1, 8) == kind_count(events, kind, 1, 8) == expected


@pytest.mark.parametrize("name", list(TRACES))
def test_walking_rows_gives_each_index_with_an_event_alike_its_own(name):
    trace = TRACES[name]()
    events = trace.events
    walked = list(walk(event_rows(trace)))
    assert [i for i, _e in walked] == list(range(len(events)))
    assert all(e == events[i].__class__(**{**vars(events[i]), "index": e.index}) for i, e in walked)
    assert [i for i, _e in walk(event_rows(trace), ("seed",))] == [e.index for e in events if e.kind == "seed"]
    distinct = list(alike(event_rows(trace), ("draw",)))
    assert [(e.stream, e.api, e.stack, e.pid) for e in distinct] == list(
        dict.fromkeys((e.stream, e.api, e.stack, e.pid) for e in events if e.kind == "draw")
    )


def test_rows_alike_share_one_event_and_each_keeps_its_index_in_a_finding():
    trace = _interleaved()
    (finding,) = trace.findings
    assert finding.kind == "interleaved"
    assert finding.events == (0, 1, 2, 3, 4)
    assert len({id(e) for i, e in walk(event_rows(trace)) if 1 <= i <= 3}) == 1


@pytest.mark.parametrize("name", list(TRACES))
def test_findings_read_from_rows_are_the_findings_read_from_the_list_of_events(name):
    trace = TRACES[name]()
    for kind in KINDS:
        listed = kind.find(trace, trace.events, [])
        assert kind.find(trace, event_rows(trace), []) == listed, kind.name


@pytest.fixture
def count_events(monkeypatch):
    made = [0]
    init = Event.__init__

    def counting(self, *args, **kwargs):
        made[0] += 1
        init(self, *args, **kwargs)

    monkeypatch.setattr(Event, "__init__", counting)
    return made


def _long(tmp_path) -> Trace:
    """A saved and loaded log: the user's seed, then 20,000 draws from a loop (a library's among them)."""
    path = tmp_path / "long.json"
    mine, theirs = (HERE, 6, "<module>"), ((LIB, 3, "g"), (HERE, 7, "f"))
    rows = [draw("numpy.random.rand", 1, mine), draw("random.random", 1, *theirs)]
    build(seed("numpy.random.seed", "0", (HERE, 4, "<module>")), *rows * 10_000).save(path)
    return Trace.load(path)


def test_the_findings_of_a_long_log_make_no_event_per_row(tmp_path, count_events):
    trace = _long(tmp_path)
    count_events[0] = 0
    assert trace.findings == []
    assert count_events[0] < 100


def test_the_text_log_of_a_long_log_makes_an_event_only_for_the_rows_it_shows(tmp_path, count_events):
    trace = _long(tmp_path)
    count_events[0] = 0
    log = render(trace, max_lines=60)
    assert "… 19,941 more events not shown" in log
    assert count_events[0] < 200


SHOWN = {**TRACES, "long": lambda: _long_trace(200)}
if hasattr(os, "fork"):
    SHOWN["processes"] = parent_and_forked_child_draw


def _long_trace(loops: int) -> Trace:
    mine, theirs = (HERE, 6, "<module>"), ((LIB, 3, "g"), (HERE, 7, "f"))
    rows = [draw("numpy.random.rand", 1, mine), draw("random.random", 1, *theirs), moved("random", "C", mine)]
    return build(seed("numpy.random.seed", "0", (HERE, 4, "<module>")), *rows * loops)


@pytest.mark.parametrize("name", list(SHOWN))
def test_show_prints_the_same_text_and_html_walking_rows_as_with_every_event_built(name, tmp_path, capsys, monkeypatch):
    from rngtrace import _duplicates, _findings, cli
    from rngtrace.render import base, html, text

    path = tmp_path / "log.json"
    SHOWN[name]().save(path)

    def show() -> tuple[str, bytes]:
        assert cli.main(["show", str(path)]) == 0
        assert cli.main(["show", str(path), "--html", str(tmp_path / "log.html")]) == 0
        return capsys.readouterr().out, (tmp_path / "log.html").read_bytes()

    walking = show()
    for module in (_findings, _duplicates, base, html, text):  # every reader back on the list of every Event
        monkeypatch.setattr(module, "event_rows", lambda store: store.events)
    assert show() == walking
