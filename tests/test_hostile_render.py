"""Logs are untrusted: whatever their names hold, `show` and `diff` print it escaped, never as terminal control."""

from __future__ import annotations

import re

import pytest
from literal_traces import build, ev

from rngtrace.diff import compare
from rngtrace.render import render_diff
from rngtrace.render.base import printable
from rngtrace.render.text import render

# What a crafted name could do to a terminal if printed raw, and the escaped form a reader sees instead.
PAYLOADS = {
    "erase line": ("\x1b[2K\r", r"\x1b[2K\r"),
    "clipboard": ("\x1b]52;c;cm0gLXJmIH4=\x07", r"\x1b]52;c;cm0gLXJmIH4=\x07"),
    "bell": ("\x07", r"\x07"),
    "carriage return": ("\rall clear", r"\rall clear"),
    "fake line": ("\nNote: all clear", r"\nNote: all clear"),
    "C1 CSI": ("\x9b8m", r"\x9b8m"),
    "DEL": ("\x7f", r"\x7f"),
    "bidi override": ("\u202egnp.", r"\u202egnp."),
    "bidi isolate": ("\u2066x\u2069", r"\u2066x\u2069"),
    "lone surrogate": ("\udcff", r"\udcff"),
}
# Any of these left in the output reaches the terminal raw; "\n" is the log's own line break.
RAW = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff]")
SGR = re.compile(r"\x1b\[[0-9;]*m")  # the log's own colour codes, when colour is on
FIELDS = ("filename", "function", "api", "stream", "thread", "seed value", "note")


def hostile_trace(field: str, payload: str, here) -> tuple:
    """A trace whose ``field`` holds ``payload``, and a clean twin that a diff sets it against."""

    def make(bad: str) -> object:
        def put(name: str, value: str) -> str:
            return value + bad if field == name else value

        stack = (here(put("filename", "train.py")), 7, put("function", "main"))
        events = [
            ev("numpy", "seed", "numpy.random.seed", None, stack, detail=put("seed value", "666")),
            ev(put("stream", "numpy"), "draw", put("api", "numpy.random.rand"), 3, stack, thread=2),
            ev("random", "draw", "random.random", 1, stack),
        ]
        trace = build(*events, notes=(put("note", "seen"),))
        if field == "thread":  # thread names are a dict in the log; the literal builder has fixed ones
            trace = build(*events, notes=("seen",))
            trace._threads[2] = "loader-0" + bad
        return trace

    return make(payload), make("")


def assert_safe(out: str, shown: str, *, color: bool = False) -> None:
    """No raw control character in ``out`` (bar the log's own colour), and ``shown`` visible in it."""
    bare = SGR.sub("", out) if color else out
    assert not RAW.findall(bare), f"raw control characters reach the terminal: {RAW.findall(bare)!r}"
    out.encode("utf-8")  # print() to a UTF-8 terminal must not raise
    assert shown in bare, f"{shown!r} not shown in:\n{bare}"
    assert not any(line.startswith("Note: all clear") for line in bare.splitlines()), "a name forged a line"


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize("field", FIELDS)
def test_show_prints_control_characters_in_every_name_escaped(field, payload, here):
    raw, shown = PAYLOADS[payload]
    trace, _clean = hostile_trace(field, raw, here)
    assert_safe(render(trace), shown)
    assert_safe(render(trace, color=True), shown, color=True)


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
@pytest.mark.parametrize("field", [f for f in FIELDS if f not in ("thread", "note")])  # a diff shows neither
def test_diff_prints_control_characters_in_every_name_escaped(field, payload, here):
    raw, shown = PAYLOADS[payload]
    trace, _clean = hostile_trace(field, raw, here)
    lean = build(ev("random", "draw", "random.random", 1, (here("train.py"), 7, "main")))  # lacks the numpy events
    for a, b in ((trace, lean), (lean, trace)):
        assert_safe(render_diff(compare(a, b)), shown)
        assert_safe(render_diff(compare(a, b), color=True), shown, color=True)


@pytest.mark.parametrize("payload", PAYLOADS, ids=list(PAYLOADS))
def test_diff_headline_escapes_a_seed_value_that_differs(payload, here):
    raw, shown = PAYLOADS[payload]
    trace, clean = hostile_trace("seed value", raw, here)
    out = render_diff(compare(clean, trace))
    assert_safe(out, shown)
    assert f"A seeded 666, B 666{shown}" in out


def test_diff_escapes_the_file_names_it_was_given(here):
    trace, clean = hostile_trace("api", "", here)
    out = render_diff(compare(trace, clean), names=("a\x1b[2K.json", "b\u202e.json"))
    assert_safe(out.splitlines()[0], r"A = a\x1b[2K.json and B = b\u202e.json")


def test_escaped_names_keep_the_columns_aligned(here):
    trace, _clean = hostile_trace("api", "\x1b[2K", here)
    lines = render(trace).split("\n\n")[0].splitlines()[1:4]
    assert r"numpy.random.rand\x1b[2K ×3" in lines[2]
    starts = {line.index("train.py:7") for line in lines[1:]}
    assert len(starts) == 1 and lines[0].index("called at") in starts


def test_printable_writes_escapes_readably_and_leaves_ordinary_text_alone():
    assert printable("ok.py") == "ok.py"
    assert printable("naïve — 数据 <lambda> C:\\Users\\me") == "naïve — 数据 <lambda> C:\\Users\\me"
    assert printable("\x1b[2K\t\x00\x85\u202e\u2028\udcff") == r"\x1b[2K\t\x00\x85\u202e\u2028\udcff"
