"""An unattributed move is placed by its window, never blamed on the call that noticed it."""

from __future__ import annotations

import functools
import json
import sys
import textwrap
import types

import numpy as np
import pytest

from rngtrace import LogError, Trace, _hotpath, rng_trace
from rngtrace.cli import main as rngtrace_main
from rngtrace.diff import compare
from rngtrace.render import render_diff
from rngtrace.render.html import render as render_html
from rngtrace.render.text import render

STORY = "/p/story.py"
# The singleton's method taken from its type before any trace and held in an object: no patch or
# in-place hook reaches calls through it (np.random.random_sample itself records wherever it is
# held), and no trace learns (patches) it, as it would a module's name for it.
HELD = types.SimpleNamespace(
    random_sample=functools.partial(np.random.RandomState.random_sample, np.random.mtrand._rand)
)


def unseen_draw() -> None:
    list(map(HELD.random_sample, [2]))  # C code calls the reference: no hook sees it


def moved_between_two_draws() -> Trace:
    with rng_trace(streams="numpy", print=False) as trace:
        np.random.rand(1)
        unseen_draw()
        np.random.rand(1)
    return trace


def literal(*events: tuple, stacks: list | None = None) -> Trace:
    """A finished Trace from saved-form rows (stream, kind, api, count, stack, thread, detail)."""
    return Trace.from_dict(
        {
            "format": "rngtrace",
            "version": 1,
            "pid": 1,
            "streams": ["numpy", "random", "torch"],
            "depth": 16,
            "max_events": 100_000,
            "dropped": 0,
            "notes": [],
            "stacks": stacks if stacks is not None else [[[STORY, 9, "<module>"]], [[STORY, 10, "<module>"]]],
            "threads": {"1": "MainThread", "2": "loader-0"},
            "events": [list(e) for e in events],
            "overflow": [],
        }
    )


RAND_9 = ("numpy", "draw", "numpy.random.rand", 1, 0, 1, None)
RAND_10 = ("numpy", "draw", "numpy.random.rand", 1, 1, 1, None)
MOVED_BEFORE_10 = (
    "numpy",
    "unattributed",
    "numpy state",
    None,
    1,
    1,
    "moved since the previous recorded event; noticed before this numpy.random.rand call",
)


# -- the event -------------------------------------------------------------------------


def test_an_unattributed_move_has_no_stack_of_its_own():
    moved = moved_between_two_draws().events[1]
    assert moved.kind == "unattributed"
    assert moved.stack == () and moved.frame is None


def test_its_window_runs_from_the_streams_previous_event_to_the_call_that_noticed_it():
    first, moved, noticing = moved_between_two_draws().events
    window = moved.window
    assert (window.after, window.noticed_by) == (0, 2)
    assert window.after_frame == first.frame and window.noticed[0] == noticing.frame
    assert moved.detail.startswith(f"between #0 ({first.frame}) and #2 ({noticing.frame}): ")
    assert moved.detail.endswith("noticed before this numpy.random.rand call")


def test_moves_noticed_at_one_line_are_one_site_with_no_line():
    with rng_trace(streams="numpy", print=False) as trace:
        for _ in range(2):
            unseen_draw()
            np.random.rand(1)
        unseen_draw()
        np.random.randn(1)
    stats = trace.statistics("lineno", kind="unattributed")
    assert [(s.calls, s.stack) for s in stats] == [(3, ())]


def test_a_move_before_any_event_opens_its_window_at_the_start_of_the_trace():
    trace = literal(MOVED_BEFORE_10, RAND_10)
    assert trace.events[0].window.after is None
    assert "moved between the start of the trace and #1 /p/story.py:10" in render(trace)


def test_a_move_of_a_cuda_stream_opens_at_the_torch_seed_that_reseeded_it():
    trace = literal(
        ("torch", "seed", "torch.manual_seed", None, 0, 1, "3"),
        ("torch", "draw", "torch.rand", 1, 0, 1, None),
        (
            "torch.cuda:0",
            "unattributed",
            "torch.cuda:0 state",
            None,
            1,
            1,
            "moved during the block with no recorded call; noticed when the block ended",
        ),
    )
    assert trace.events[2].window.after == 0


def test_a_noticing_call_on_another_thread_does_not_close_the_window():
    trace = literal(RAND_9, MOVED_BEFORE_10, ("numpy", "draw", "numpy.random.rand", 1, 1, 2, None), RAND_10)
    assert trace.events[1].window.noticed_by == 3


# -- the log -------------------------------------------------------------------------


def test_the_log_prints_the_window_never_the_line_that_noticed_the_move(monkeypatch, tmp_path):
    trace = moved_between_two_draws()
    monkeypatch.chdir(tmp_path)  # paths print in full: this file is outside the working directory
    first, _moved, noticing = trace.events
    lines = render(trace).splitlines()
    row = next(i for i, line in enumerate(lines) if "numpy state" in line)
    assert lines[row].split() == ["!", "1", "numpy", "unattributed", "numpy", "state", "—"]
    here = f"{__file__}:"
    assert lines[row + 1].strip() == (
        f"moved between #0 {here}{first.frame.lineno} and #2 {here}{noticing.frame.lineno}"
    )


def test_a_move_noticed_when_the_block_ended_closes_at_the_block_end(here):
    with rng_trace(streams="numpy", print=False) as trace:
        np.random.rand(1)
        unseen_draw()
    first, moved = trace.events
    end = moved.window.noticed[0]
    assert moved.window.at_end and end.function == first.frame.function
    here = f"{__file__}:"
    assert f"moved between #0 {here}{first.frame.lineno} and the end of the block at {here}{end.lineno}" in render(
        trace
    )


def test_a_reference_bound_before_the_block_is_noted_as_one_rngtrace_run_attributes(tmp_path, capsys):
    model = tmp_path / "prebound_model.py"
    model.write_text(
        textwrap.dedent("""\
        import numpy as np
        from numpy.random import random_sample as pre

        def work():
            np.random.rand(1)
            list(map(pre, [2]))
            np.random.rand(1)
        """)
    )
    script = tmp_path / "main.py"
    script.write_text("import prebound_model\nprebound_model.work()\n")
    sys.path.insert(0, str(tmp_path))
    try:
        import prebound_model  # noqa: PLC0415 (bound now, before the block, as a program's import does)

        with rng_trace(streams="numpy", print=False) as trace:
            prebound_model.work()
        sys.modules.pop("prebound_model")
        log = tmp_path / "run.json"
        assert rngtrace_main(["run", "--streams", "numpy", "--json", str(log), str(script)]) == 0
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("prebound_model", None)
    ran = Trace.load(log)
    # What `rngtrace run` does: run from the start, the same import binds rngtrace's recorder.
    assert [(e.kind, e.api, e.frame.lineno) for e in ran.events] == [
        ("draw", "numpy.random.rand", 5),
        ("draw", "numpy.random.random_sample", 6),
        ("draw", "numpy.random.rand", 7),
    ]
    assert not any("`pre`" in note for note in ran.notes)
    capsys.readouterr()
    if _hotpath.SPEEDUPS is not None:
        # With the accelerator the bound method records in place: the block attributes the call
        # through `pre` as the run does, and has nothing to note.
        assert [(e.kind, e.api, e.frame.lineno) for e in trace.events] == [
            (e.kind, e.api, e.frame.lineno) for e in ran.events
        ]
        assert not any("`pre`" in note for note in trace.notes)
        return
    assert [e.kind for e in trace.events] == ["draw", "unattributed", "draw"]
    assert [note for note in trace.notes if "`pre`" in note] == [
        "prebound_model.py binds `pre` to numpy.random.random_sample before tracing began, out of the patches' "
        "reach: a move made through it is unattributed here, and `rngtrace run` would have attributed it"
    ]
    assert "Note: prebound_model.py binds `pre`" in render(trace)


def test_the_html_report_lists_a_move_by_its_window(here):
    trace = literal(RAND_9, MOVED_BEFORE_10, RAND_10)
    page = render_html(trace)
    assert "moved between #0 /p/story.py:9 and #2 /p/story.py:10" in page
    row = page[page.index('data-index="1"') :].split("</tr>", 1)[0]
    assert "story.py:10 in" not in row


# -- the diff --------------------------------------------------------------------------


def test_the_diffs_headline_places_an_extra_move_by_its_window():
    a = literal(RAND_9, MOVED_BEFORE_10, RAND_10)
    b = literal(RAND_9, RAND_10)
    text = render_diff(compare(a, b))
    headline = next(line for line in text.splitlines() if line.startswith("First divergence"))
    assert headline == (
        "First divergence: A has 1 numpy unattributed move between #0 /p/story.py:9 and #2 /p/story.py:10 "
        "that B lacks, before the draw both runs make at /p/story.py:10 in <module>"
    )
    sites = text.split("Call sites whose counts differ:", 1)[1]
    assert "story.py:10" not in sites


# -- the saved log ---------------------------------------------------------------------


def test_the_window_survives_saving_and_loading(tmp_path):
    trace = moved_between_two_draws()
    path = tmp_path / "log.json"
    trace.save(path)
    loaded = Trace.load(path).events
    assert loaded == trace.events
    assert (loaded[1].stack, loaded[1].window.after, loaded[1].window.noticed_by) == ((), 0, 2)
    # Saved as version 1 always kept it: the noticing call's stack in the event's stack field.
    saved = json.loads(path.read_text())
    row = saved["events"][1]
    assert saved["version"] == 2 and len(row) == 7
    assert saved["stacks"][row[4]][0][1] == trace.events[2].frame.lineno


def test_a_log_from_before_windows_loads_with_the_window_and_no_stack():
    moved = literal(RAND_9, MOVED_BEFORE_10, RAND_10).events[1]
    assert moved.stack == ()
    assert (moved.window.after, moved.window.noticed_by, moved.window.noticed[0].lineno) == (0, 2, 10)


@pytest.mark.parametrize("field, value", [(4, 7), (4, True), (6, ["moved", 1])])
def test_an_unattributed_event_with_a_damaged_stack_or_detail_is_refused(tmp_path, field, value):
    trace = literal(RAND_9, MOVED_BEFORE_10, RAND_10)
    data = trace.to_dict()
    data["events"][1][field] = value
    path = tmp_path / "damaged.json"
    path.write_text(json.dumps(data))
    with pytest.raises(LogError, match="truncated or damaged"):
        Trace.load(path)
