"""Trace.save and Trace.load: a log written to disk reads back as the same trace, and a bad file says what to do."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from torch_traces import cudnn_benchmark_trace

import rngtrace
from rngtrace import LogError, Trace, rng_trace
from rngtrace.render import render


def _draw_a_little() -> None:
    random.seed(7)
    random.random()
    random.shuffle([1, 2, 3])


@pytest.fixture
def trace() -> Trace:
    with rng_trace(print=False) as recorded:
        _draw_a_little()
    return recorded


@pytest.fixture
def saved(tmp_path: Path, trace: Trace) -> Path:
    path = tmp_path / "run.json"
    trace.save(path)
    return path


def test_a_saved_trace_loads_back_with_the_same_events_statistics_and_log(trace, saved):
    loaded = Trace.load(saved)
    assert loaded.events == trace.events
    assert loaded.statistics("traceback") == trace.statistics("traceback")
    assert loaded.counts() == trace.counts()
    assert render(loaded) == render(trace)


def test_the_file_is_the_to_dict_form_with_one_event_a_line(trace, saved):
    text = saved.read_text(encoding="utf-8")
    assert json.loads(text) == json.loads(json.dumps(trace.to_dict()))
    event_lines = [line for line in text.splitlines() if line.lstrip().startswith('["random", ')]
    assert len(event_lines) == len(trace.events) == 3


def test_events_past_max_events_survive_the_round_trip_as_counts(tmp_path):
    with rng_trace(print=False, max_events=1) as trace:
        for _ in range(4):
            random.random()
    trace.save(str(tmp_path / "few.json"))
    loaded = Trace.load(str(tmp_path / "few.json"))
    assert (len(loaded.events), loaded.dropped, len(loaded)) == (1, 3, 4)
    assert [s.calls for s in loaded.statistics()] == [4]


def test_a_trace_cannot_be_saved_while_its_block_still_records(tmp_path):
    with rng_trace(print=False) as trace:
        random.random()
        with pytest.raises(RuntimeError, match="save it after its block ends"):
            trace.save(tmp_path / "early.json")


def test_log_error_is_a_value_error_exported_by_the_package():
    assert issubclass(LogError, ValueError)
    assert rngtrace.LogError is LogError


def _rewrite(saved: Path, change) -> Path:
    data = json.loads(saved.read_text(encoding="utf-8"))
    change(data)
    saved.write_text(json.dumps(data), encoding="utf-8")
    return saved


def _cut_in_half(saved: Path) -> Path:
    text = saved.read_text(encoding="utf-8")
    saved.write_text(text[: len(text) // 2], encoding="utf-8")
    return saved


BAD_FILES = {
    "missing": (lambda p: p.with_name("nowhere.json"), r"^no such file: '.*nowhere\.json'; check the path$"),
    "empty": (lambda p: (p.write_text(""), p)[1], r"is empty; record the log again$"),
    "not JSON": (lambda p: (p.write_text("hello"), p)[1], r"is not JSON \(.*\); pass a file written by"),
    "binary": (lambda p: (p.write_bytes(b"\xff\xfe\x00"), p)[1], r"is not JSON \(not UTF-8 text\)"),
    "other JSON": (lambda p: (p.write_text('{"a": 1}'), p)[1], r"is not an rngtrace log .*; pass a file written by"),
    "a list": (lambda p: (p.write_text("[1, 2]"), p)[1], r"is not an rngtrace log"),
    "a deep list": (lambda p: (p.write_text("[" * 100_000), p)[1], r"is not an rngtrace log"),
    "a device": (lambda p: Path(os.devnull), r"is a character device, not a regular file; pass a file written by"),
    "truncated": (_cut_in_half, r"is a truncated or damaged rngtrace log \(.*\); record it again$"),
    "field missing": (
        lambda p: _rewrite(p, lambda d: d.pop("stacks")),
        r"truncated or damaged rngtrace log \(no 'stacks' field\); record it again$",
    ),
    "short event": (
        lambda p: _rewrite(p, lambda d: d["events"][0].pop()),
        r"damaged rngtrace log \(events\[0\]: expected an event of 7 values, got 6\)",
    ),
    "bad frame": (
        lambda p: _rewrite(p, lambda d: d["stacks"][0].__setitem__(0, ["f.py", "x", "g"])),
        r"damaged rngtrace log \(.*\); record it again$",
    ),
    "newer": (
        lambda p: _rewrite(p, lambda d: d.__setitem__("version", 3)),
        r"written by a newer rngtrace \(log format version 3, this one reads up to 2\); upgrade rngtrace",
    ),
    "a directory": (lambda p: p.parent, r"is a directory; pass a file written by"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_a_file_that_is_not_a_readable_log_raises_one_line_log_error_saying_what_to_do(saved, case):
    make, message = BAD_FILES[case]
    with pytest.raises(LogError, match=message) as error:
        Trace.load(make(saved))
    assert "\n" not in str(error.value)


def test_what_the_findings_read_survives_the_round_trip(tmp_path):
    pytest.importorskip("torch")
    trace = cudnn_benchmark_trace()
    trace.from_start = True
    trace.settings["torch.starts_fixed"] = True  # as rngtrace run notes it for a build with a fixed default seed
    trace.save(tmp_path / "run.json")
    loaded = Trace.load(tmp_path / "run.json")
    assert loaded.from_start is True and loaded.settings == trace.settings and loaded.settings["cudnn.benchmark"]
    assert loaded.findings == trace.findings and [f.kind for f in loaded.findings] == ["settings"]
