"""Reading a saved log line by line: a log in the writer's layout (one field, stack or event a line) is
read as a stream of lines, never held whole, and gives what parsing its whole text gives; any other
layout, and any damage at all, is read whole and says what the whole-text reader says, word for word."""

from __future__ import annotations

import io
import itertools
import json
import os
from pathlib import Path

import numpy as np
import pytest
from fork_pools import parent_and_forked_child_draw
from literal_traces import build, draw, ev, moved, seed

from rngtrace import LogError, Trace, _logfile, cli, rng_trace
from rngtrace._logjson import NotLines, parse, parse_lines


def _site(k: int) -> None:
    np.random.rand(k % 3 + 1)


def _real() -> Trace:
    """A traced run: a seed, draws from a few lines, more draws than max_events keeps."""
    with rng_trace(print=False, max_events=50) as trace:
        np.random.seed(3)
        for k in range(80):
            _site(k)
    return trace


def _literal() -> Trace:
    """Seeds, moves, overflow, notes, text that is not ASCII and a lone surrogate, two threads."""
    a, b = ("/p/train.py", 10, "<module>"), ("/p/données.py", 4, "f\udcff")
    return build(
        seed("numpy.random.seed", "7", a),
        draw("numpy.random.rand", 3, b, a),
        draw("numpy.random.rand", 3, b, a),
        draw("random.random", 1, a, thread=2),
        moved("numpy", "moved by C code", a),
        ev("torch", "entropy", "torch.Generator.seed", None, b),
        draw("numpy.random.rand", 3, b, a),
        overflow=((draw("numpy.random.rand", 3, b), 40, 120),),
        notes=("a note: ünïcode",),
    )


LOGS = {"real": _real, "literal": _literal}
if hasattr(os, "fork"):
    LOGS["processes"] = parent_and_forked_child_draw


@pytest.fixture(params=list(LOGS))
def log(request, tmp_path) -> Path:
    path = tmp_path / f"{request.param}.json"
    LOGS[request.param]().save(path)
    return path


def _lines_of(data: bytes):
    return iter(data.split(b"\n")[:-1] if data.endswith(b"\n") else data.split(b"\n"))


def _whole_text_only(monkeypatch) -> None:
    """Make every read take the whole-text path, as before the line reader."""

    def refuse(lines):
        raise NotLines

    monkeypatch.setattr(_logfile, "parse_lines", refuse)


def test_a_saved_log_is_read_line_by_line_never_as_one_text(log, monkeypatch):
    def whole(*args):
        raise AssertionError("read whole")

    monkeypatch.setattr(_logfile, "_read_text", whole)
    assert len(Trace.load(log)) > 0


@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
def test_the_line_reader_gives_what_parsing_the_whole_text_gives(log, newline):
    data = log.read_bytes().replace(b"\n", newline)
    read = parse_lines(_lines_of(data))
    assert read == parse(data.decode("utf-8"))
    assert all(row.__class__ is tuple for row in read["events"] + read["overflow"])


def test_repeated_event_rows_are_one_tuple(tmp_path):
    path = tmp_path / "log.json"
    _real().save(path)
    rows = parse_lines(_lines_of(path.read_bytes()))["events"]
    assert len({id(row) for row in rows}) == len(set(rows)) < len(rows)


def _show(path: Path, capsys, *more: str) -> str:
    assert cli.main(["show", str(path), *more]) == 0
    return capsys.readouterr().out


def test_show_prints_the_same_bytes_whichever_way_the_log_was_read(log, capsys, monkeypatch, tmp_path):
    lines_text = _show(log, capsys)
    _show(log, capsys, "--html", str(tmp_path / "lines.html"))
    _whole_text_only(monkeypatch)
    assert _show(log, capsys) == lines_text
    _show(log, capsys, "--html", str(tmp_path / "whole.html"))
    assert (tmp_path / "lines.html").read_bytes() == (tmp_path / "whole.html").read_bytes()


def _replace_line(number: int, new: bytes):
    def change(data: bytes) -> bytes:
        lines = data.split(b"\n")
        lines[number] = new
        return b"\n".join(lines)

    return change


def _event_line(change):
    """Change the first event line."""

    def apply(data: bytes) -> bytes:
        lines = data.split(b"\n")
        at = lines.index(b'  "events": [') + 1
        lines[at] = change(lines[at])
        return b"\n".join(lines)

    return apply


DAMAGES = {
    "cut inside an event": lambda d: d[: d.index(b'  "overflow"') - 20],
    "cut after a field": lambda d: d[: d.index(b'  "overflow"')],
    "no closing brace": lambda d: d.rstrip()[:-1],
    "a line after the closing brace": lambda d: d + b"{}\n",
    "blank lines after it": lambda d: d + b"\n\n",
    "a comma missing between events": _event_line(lambda line: line.rstrip(b",")),
    "an event that is not JSON": _event_line(lambda line: line.replace(b"[", b"{", 1)),
    "an event of 5000 digits": _event_line(lambda line: line.replace(b", null", b", " + b"9" * 5000, 1)),
    "an event not UTF-8": _event_line(lambda line: line.replace(b'"', b'"\xff', 1)),
    "an event of 6 values": _event_line(lambda line: line.replace(b", null]", b"]", 1)),
    "an event with true as a count": _event_line(lambda line: line.replace(b", 1,", b", true,", 1)),
    "an event on one line with the next": _event_line(lambda line: line + line),
    "an event indented by 2": _event_line(lambda line: line[2:]),
    "a field without its comma": _replace_line(3, b'  "pid": 5'),
    "a field with a bad value": _replace_line(3, b'  "pid": 5x,'),
    "a key not closed": _replace_line(3, b'  "pid: 5,'),
    "a version too new": _replace_line(2, b'  "version": 9,'),
    "a byte order mark": lambda d: b"\xef\xbb\xbf" + d,
    "a nested too deeply": _replace_line(8, b'  "notes": ' + b"[" * 100_000 + b"]" * 100_000 + b","),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_damaged_log_says_what_the_whole_text_reader_says(log, damage, monkeypatch):
    log.write_bytes(DAMAGES[damage](log.read_bytes()))
    try:
        lines_said = str(Trace.load(log))
    except LogError as error:
        lines_said = str(error)
    _whole_text_only(monkeypatch)
    try:
        whole_said = str(Trace.load(log))
    except LogError as error:
        whole_said = str(error)
    assert lines_said == whole_said
    assert "\n" not in lines_said


def test_a_log_that_grows_past_the_limit_while_it_is_read_is_refused():
    lines = itertools.chain.from_iterable(_logfile._lines(io.BytesIO(b"x\n" * 2_000_000), "'log'", 3_000_000))
    with pytest.raises(LogError, match=r"^'log' has grown, more than the 2.9 MiB a log may have; to read it"):
        list(lines)


def test_a_log_in_another_layout_still_reads(tmp_path):
    path = tmp_path / "log.json"
    trace = _literal()
    path.write_text(json.dumps(trace.to_dict(), indent=1), encoding="utf-8")
    assert Trace.load(path).to_dict() == trace.to_dict()
