"""Stacks are exact however they are cached, and the cache keeps no returned frame alive."""

from __future__ import annotations

import gc
import random
import sys
import time
import weakref

from rngtrace import rng_trace

HERE = __file__


def draw_here() -> float:
    return random.random()


def step() -> float:
    return draw_here()


def after_warm_up(trace) -> list:
    return [e for e in trace.draws if not any(f.function == "warm_up" for f in e.stack)]


def caller_lines(trace) -> list[int]:
    """For each draw after the warm-up, the line in the test function that led to it."""
    return [next(f.lineno for f in e.stack if f.function.startswith("test_")) for e in after_warm_up(trace)]


def warm_up() -> None:
    """Enough draws for the stack cache to be on, whichever way this Python keeps it."""
    for _ in range(200):
        random.random()


def test_the_same_function_called_from_two_lines_gets_two_stacks():
    with rng_trace(print=False) as trace:
        warm_up()
        first = sys._getframe().f_lineno + 1
        step()
        step()
        for _ in range(3):
            step()
    assert caller_lines(trace) == [first, first + 1] + [first + 3] * 3


def test_a_generator_resumed_from_different_callers_is_attributed_to_each_caller():
    def drawer():
        while True:
            yield random.random()

    def consume(gen):
        return next(gen)

    gen = drawer()
    with rng_trace(print=False) as trace:
        warm_up()
        line = sys._getframe().f_lineno + 1
        next(gen)
        consume(gen)
        next(gen)
    draws = after_warm_up(trace)
    callers = [[f.function for f in e.stack[:3]] for e in draws]
    assert callers[0][1].startswith("test_") and callers[2][1].startswith("test_")
    assert callers[1][1].endswith("consume")
    assert [e.stack[1].lineno for e in (draws[0], draws[2])] == [line, line + 2]


def test_recursion_at_varying_depths_keeps_every_stack_exact():
    def down(n):
        if n:
            return down(n - 1)
        return random.random()

    with rng_trace(print=False, depth=64) as trace:
        warm_up()
        for n in (3, 1, 5, 1, 3):
            down(n)
    depths = [sum(1 for f in e.stack if f.function.endswith("down")) for e in after_warm_up(trace)]
    assert depths == [4, 2, 6, 2, 4]


class Big:
    """Something whose lifetime the test watches."""


def test_a_returned_frame_that_drew_does_not_keep_its_locals_alive():
    def helper():
        payload = Big()
        random.random()  # drawn from here: helper's frame is in the captured stack
        inner()
        return weakref.ref(payload)

    def inner():
        random.random()  # helper is now an outer frame: the cache may hold it

    with rng_trace(print=False):
        for _ in range(200):  # enough draws for the stack cache to be worth turning on
            random.random()
        ref = helper()
        deadline = time.monotonic() + 2.0
        while ref() is not None and time.monotonic() < deadline:
            time.sleep(0.005)
            gc.collect()
        alive_in_block = ref() is not None
    assert not alive_in_block, "a returned frame's locals were kept alive during the block"
