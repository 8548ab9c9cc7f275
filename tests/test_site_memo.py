"""Past max_events the C recorder remembers a draw's call-site form by the frame that drew and its line.

A loop drawing past ``max_events`` would otherwise walk its whole stack at every draw. The memo
must give exactly what the walk gives (two lines of one frame, a generator resumed from two places,
frames called afresh each time) and must not keep a finished frame, and with it its locals, alive.
"""

from __future__ import annotations

import os
import random
import sysconfig
import weakref

import pytest

from rngtrace import rng_trace
from rngtrace._hotpath import SPEEDUPS

needs_c = pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built or is turned off")
LIBRARY = os.path.join(sysconfig.get_paths()["purelib"], "somelib", "loops.py")


def _library(source: str) -> dict:
    """``source`` compiled as an installed package's module: its frames are not the user's."""
    namespace: dict = {"random": random}
    exec(compile(source, LIBRARY, "exec"), namespace)
    return namespace


def _sites(trace) -> list[tuple]:
    """The call-site table, whole stacks: (api, frames, calls)."""
    return sorted(
        (s.api, tuple((f.function, f.lineno) for f in s.stack), s.calls) for s in trace.statistics("traceback")
    )


def _user_lines(rows: list[tuple]) -> dict[tuple, int]:
    """Calls per (library line, calling user function) of a table whose draws come from LIBRARY."""
    out: dict[tuple, int] = {}
    for _api, frames, calls in rows:
        key = (frames[0], frames[1][0].rpartition(".")[2])  # 3.11+ names qualify a function
        out[key] = out.get(key, 0) + calls
    return out


def test_draws_from_many_lines_of_one_looping_frame_are_each_counted_under_their_own_line():
    # More lines than the memo has entries: some share an entry, and must not share a count.
    lib = _library("def loop(n):\n    for _ in range(n):\n" + "        random.random()\n" * 40)

    def user():
        lib["loop"](50)

    with rng_trace(print=False, max_events=5) as trace:
        user()
    counts = _user_lines(_sites(trace))
    assert counts == {(("loop", line), "user"): 50 for line in range(3, 43)}


def _resumed_from_two_places(gen):
    """A trace past max_events of ``gen`` resumed 200 times each from ``first`` and from ``second``."""

    def first():
        return next(gen)

    def second():
        return next(gen)

    with rng_trace(print=False, max_events=5) as trace:
        for _ in range(200):
            first()
            second()
    return trace


def test_a_generator_drawing_past_max_events_is_counted_under_each_caller_that_resumes_it():
    lib = _library("def values():\n    while True:\n        yield random.random()\n")
    counts = _user_lines(_sites(_resumed_from_two_places(lib["values"]())))
    assert counts == {(("values", 3), "first"): 200, (("values", 3), "second"): 200}


def test_a_function_called_afresh_from_two_lines_is_counted_under_each():
    lib = _library("def draw():\n    return random.random()\n")

    def user():
        for _ in range(250):
            lib["draw"]()  # one line
            lib["draw"]()  # another: the fresh frames may land where the last one was

    with rng_trace(print=False, max_events=5) as trace:
        user()
    lines = {}
    for _api, frames, calls in _sites(trace):
        lines[frames[1]] = lines.get(frames[1], 0) + calls
    assert sorted(lines.values()) == [250, 250] and len(lines) == 2


def test_one_call_line_calling_many_functions_in_turn_counts_each_under_its_own():
    # One line, one instruction, forty drawing codes: more than the memo has entries.
    lib = _library("".join(f"def f{i}():\n    return random.random()\n" for i in range(40)))
    functions = [lib[f"f{i}"] for i in range(40)]

    def user():
        for _ in range(50):
            for fn in functions:
                fn()

    with rng_trace(print=False, max_events=5) as trace:
        user()
    counts = {}
    for _api, frames, calls in _sites(trace):
        counts[frames[0][0]] = counts.get(frames[0][0], 0) + calls
    assert counts == {f"f{i}": 50 for i in range(40)}


def test_a_helper_called_from_a_generator_resumed_from_two_places_is_counted_under_each():
    lib = _library(
        "def draw():\n"
        "    return random.random()\n"
        "def values():\n"
        "    while True:\n"
        "        yield draw()\n"  # the caller of the drawing frame: a generator's, resumed from two places
    )
    callers = {}
    for _api, frames, calls in _sites(_resumed_from_two_places(lib["values"]())):
        name = frames[2][0].rpartition(".")[2]
        callers[name] = callers.get(name, 0) + calls
    assert callers == {"first": 200, "second": 200}


def test_one_loop_drawing_past_max_events_in_two_traces_in_turn_counts_each_draw_in_its_own_trace():
    lib = _library("def draw(n):\n    for _ in range(n):\n        random.random()\n")
    traces = []
    for _ in range(3):  # one frame, one line, three traces one after another
        with rng_trace(print=False, max_events=5) as trace:
            lib["draw"](300 + 100 * len(traces))
        traces.append(trace)
    for n, trace in zip((300, 400, 500), traces):
        assert len(trace.events) + trace.dropped == n
        assert sum(calls for _api, _frames, calls in _sites(trace)) == n


class _Payload:
    pass


def _warm_up(lib: dict) -> None:
    """Draws enough for a thread's cache of live frames to be kept (3.10/3.11 pin after 64 walks),
    and from every code the tests draw from (a code the C walk has not met is noted in Python):
    before both, a draw is recorded in Python."""
    for _ in range(200):
        random.random()
    _draws_and_returns(lib)


def _draws_and_returns(lib: dict) -> weakref.ref:
    payload = _Payload()  # a local of the frame that drew: freed when the frame goes
    lib["draw"]()
    random.random()
    return weakref.ref(payload)


@needs_c
def test_a_frame_that_drew_past_max_events_is_let_go_once_draws_come_from_elsewhere():
    lib = _library("def draw():\n    return random.random()\n")
    lines = _library("".join(f"def f{i}():\n    return random.random()\n" for i in range(40)))
    many = [lines[f"f{i}"] for i in range(40)]

    def elsewhere():
        for draw in many:
            draw()

    with rng_trace(print=False, max_events=1):
        _warm_up(lib)
        elsewhere()  # each code noted now (in Python), so that each draw below is recorded in C
        gone = _draws_and_returns(lib)
        elsewhere()  # draws from other places: the finished frame is let go within a few of them
        assert gone() is None


@needs_c
def test_a_frame_that_drew_last_in_a_trace_is_let_go_when_the_trace_ends():
    lib = _library("def draw():\n    return random.random()\n")
    with rng_trace(print=False, max_events=1):
        _warm_up(lib)
        gone = _draws_and_returns(lib)
    assert gone() is None
    assert SPEEDUPS.forget_sites(False) == 0


@needs_c
def test_values_past_max_events_are_bit_identical_with_the_memo():
    def program():
        random.seed(5)
        return [random.random() for _ in range(2000)] + [random.gauss(0, 1) for _ in range(500)]

    plain = program()
    with rng_trace(print=False, max_events=10) as trace:
        traced = program()
    assert traced == plain
    assert trace.dropped == 2500 + 1 - 10
