"""When and how rng_trace prints its log."""

from __future__ import annotations

import io
import random

from rngtrace import rng_trace
from rngtrace.render import render


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_log_goes_to_stderr_by_default_and_only_when_something_was_recorded(capsys):
    with rng_trace():
        pass
    assert capsys.readouterr().err == ""
    with rng_trace():
        random.random()
    err = capsys.readouterr().err
    assert err.startswith("rngtrace: 1 event")
    assert "random.random" in err


def test_print_false_prints_nothing(capsys):
    with rng_trace(print=False):
        random.random()
    assert capsys.readouterr() == ("", "")


def test_colour_only_on_a_tty_and_never_with_no_color(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    tty, plain = FakeTTY(), io.StringIO()
    for out in (tty, plain):
        with rng_trace(file=out):
            random.random()
    assert "\x1b[" in tty.getvalue()
    assert "\x1b[" not in plain.getvalue()
    monkeypatch.setenv("NO_COLOR", "1")
    quiet = FakeTTY()
    with rng_trace(file=quiet):
        random.random()
    assert "\x1b[" not in quiet.getvalue()


def test_the_log_is_printed_when_the_block_raises_and_the_error_still_propagates():
    out = io.StringIO()
    try:
        with rng_trace(file=out):
            random.random()
            raise LookupError("user error")
    except LookupError as error:
        assert str(error) == "user error"
    assert "random.random" in out.getvalue()


def test_a_report_read_inside_the_block_already_has_stacks():
    with rng_trace(print=False) as trace:
        random.random()
        inside = trace.events[0].stack
    assert inside and inside[0].filename == __file__
    assert trace.events[0].stack == inside


def test_a_report_read_inside_the_block_shows_the_call_sites_so_far():
    with rng_trace(print=False) as trace:
        random.random()
        text = render(trace)
    assert "test_printing.py" in text and "random.random" in text
