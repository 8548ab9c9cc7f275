"""Trace, Event, Frame, statistics and the JSON form, on literal data."""

from __future__ import annotations

import json
import random

import pytest

from rngtrace import Event, Frame, Trace, rng_trace


def literal_trace() -> Trace:
    return Trace.from_dict(
        {
            "format": "rngtrace",
            "version": 1,
            "pid": 42,
            "streams": ["numpy", "random"],
            "depth": 16,
            "max_events": 3,
            "dropped": 2,
            "notes": [],
            "stacks": [
                [["lib/dev.py", 4, "init"], ["story.py", 8, "<module>"]],
                [["story.py", 9, "<module>"]],
            ],
            "threads": {"1": "MainThread"},
            "events": [
                ["numpy", "seed", "numpy.random.seed", None, 1, 1, "666"],
                ["numpy", "draw", "numpy.random.uniform", 1, 0, 1, None],
                ["numpy", "draw", "numpy.random.rand", 3, 1, 1, None],
            ],
            "overflow": [["numpy", "draw", "numpy.random.uniform", 0, 2, 2]],
        }
    )


def test_events_are_frozen_values_built_from_the_raw_tuples():
    trace = literal_trace()
    first = trace.events[1]
    assert first == Event(
        1,
        "numpy",
        "draw",
        "numpy.random.uniform",
        1,
        (Frame("lib/dev.py", 4, "init"), Frame("story.py", 8, "<module>")),
        "MainThread",
        42,
        None,
    )
    with pytest.raises(AttributeError):
        first.count = 2  # type: ignore[misc]
    assert str(first.frame) == "lib/dev.py:4 in init"


def test_statistics_group_by_call_site_including_dropped_events():
    stats = literal_trace().statistics()
    assert [(s.api, str(s.frame), s.calls, s.values) for s in stats] == [
        ("numpy.random.uniform", "lib/dev.py:4 in init", 3, 3),
        ("numpy.random.rand", "story.py:9 in <module>", 1, 3),
    ]
    assert literal_trace().statistics(kind="seed")[0].api == "numpy.random.seed"


def test_statistics_by_traceback_keep_whole_stacks_apart():
    with rng_trace(print=False) as trace:
        for _ in range(2):
            random.random()
        random.random()
    by_line = trace.statistics("lineno")
    assert sorted(s.calls for s in by_line) == [1, 2]
    assert len(trace.statistics("traceback")) == 2


def test_counts_per_stream_and_kind_include_dropped_events():
    assert literal_trace().counts() == {("numpy", "seed"): 1, ("numpy", "draw"): 4}
    assert len(literal_trace()) == 5


def test_to_dict_round_trips_through_json():
    with rng_trace(print=False) as trace:
        random.seed(3)
        random.random()
    data = json.loads(json.dumps(trace.to_dict()))
    assert data["format"] == "rngtrace" and data["version"] == 2
    again = Trace.from_dict(data)
    assert again.events == trace.events
    assert again.statistics() == trace.statistics()


@pytest.mark.parametrize(
    "data, message",
    [
        ({"format": "other"}, "not an rngtrace log"),
        ([], "not an rngtrace log"),
        ({"format": "rngtrace", "version": 99}, "newer than this rngtrace reads"),
        ({"format": "rngtrace", "version": 1, "streams": []}, "truncated or damaged"),
    ],
)
def test_from_dict_rejects_what_it_cannot_read_with_one_clear_line(data, message):
    with pytest.raises(ValueError, match=message) as info:
        Trace.from_dict(data)
    assert "\n" not in str(info.value)


def test_a_move_recorded_with_the_noticing_stack_as_its_own_reads_as_one_with_a_window():
    # The form every unattributed event had before windows, appended as the hub's hot path appends.
    trace = Trace()
    trace.add(("numpy", "draw", "numpy.random.rand", 1, 0, 1, None))
    trace.add(("numpy", "unattributed", "numpy state", None, 1, 1, "moved; noticed before this call"))
    trace.add(("numpy", "draw", "numpy.random.rand", 1, 1, 1, None))
    stacks = {0: (Frame("story.py", 9, "<module>"),), 1: (Frame("story.py", 10, "<module>"),)}
    trace.finish(lambda sid, depth: stacks[sid], {1: "MainThread"})
    moved = trace.events[1]
    assert moved.stack == ()
    assert (moved.window.after, moved.window.noticed_by, moved.window.noticed) == (0, 2, stacks[1])
    assert moved.detail == (
        "between #0 (story.py:9 in <module>) and #2 (story.py:10 in <module>): moved; noticed before this call"
    )


def test_statistics_reject_unknown_keys():
    with pytest.raises(ValueError, match="choose from 'lineno', 'traceback'"):
        literal_trace().statistics("filename")


def test_setting_from_start_works_the_findings_out_again():
    from literal_traces import build, draw

    trace = build(draw("numpy.random.rand", 1, ("/p/prog.py", 2, "<module>")))
    assert trace.findings == []
    trace.from_start = True
    assert [f.kind for f in trace.findings] == ["unseeded"]
