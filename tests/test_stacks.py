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


# -- the C walk (_speedups.capture) against the Python one, the reference -------------------

import threading  # noqa: E402

import pytest  # noqa: E402

from rngtrace import _codes, _stack  # noqa: E402

needs_c = pytest.mark.skipif(_stack._c_capture is None, reason="the C accelerator is off (RNGTRACE_PURE) or not built")


class Twins:
    """Two tables fed the same captures, one walking in C and one in Python: everything must match."""

    def __init__(self, depth: int = 16, pin: bool = False) -> None:
        self.c, self.py = _stack.StackTable(), _stack.StackTable()
        self.py.accelerated = None
        self.depth, self.pin = depth, pin
        self.watched: dict[str, list] = {"c": [], "py": []}
        self.c.watch_code = self.watched["c"].append
        self.py.watch_code = self.watched["py"].append
        self.known: dict[int, tuple[dict, dict]] = {}  # per thread, as the recorder keeps them
        # Every frame a cache entry names, held as exit events (or pins) would keep it named only
        # while it lives: a dead frame's id could name a new frame, which the C walk, making
        # fewer frame objects than the Python one, would not meet at the same address.
        self._named: list = []

    def snap(self, frame=None, depth: int | None = None) -> tuple:
        """Capture the caller's stack with both tables; assert they agree in every respect."""
        frame = frame if frame is not None else sys._getframe(1)
        depth = self.depth if depth is None else depth
        kc, kp = self.known.setdefault(threading.get_ident(), ({}, {}))
        sc = self.c.capture(frame, depth, kc, self.pin)
        sp = self.py.capture(frame, depth, kp, self.pin)
        assert sc == sp
        assert self.c.ids == self.py.ids and self.c._nodes == self.py._nodes
        assert kc == kp
        assert self.watched["c"] == self.watched["py"]
        f = frame
        while f is not None:
            if id(f) in kc:
                self._named.append(f)
            f = f.f_back
        return self.c.resolve(sc, 64)


both_modes = pytest.mark.parametrize("pin", [False, True], ids=["exit-events", "pinned"])


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_recursion_at_every_depth_cut_off(pin):
    for depth in (1, 3, 16, 64):
        twins = Twins(depth, pin)

        def down(n):
            return down(n - 1) if n else twins.snap()  # noqa: B023 (called within the iteration)

        stacks = [down(n) for n in (5, 1, 9, 5, 0, 30)]
        # With a frame cache the walk is whole; depth only decides which cached chain may end it.
        assert [sum(f.function.endswith("down") for f in s) for s in stacks][:4] == [6, 2, 10, 6]


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_fresh_frames_under_a_reused_loop_frame(pin):
    twins = Twins(16, pin)

    def helper(n):
        return helper(n - 1) if n else twins.snap()

    def loop():
        return [helper(i % 3) for i in range(20)] + [twins.snap() for _ in range(3)]

    stacks = loop()
    assert stacks[0] == stacks[3] and stacks[1] != stacks[0]
    assert len(set(stacks[-3:])) == 1


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_generators_resumed_from_different_callers(pin):
    twins = Twins(16, pin)

    def gen():
        while True:
            yield twins.snap()

    def consume(g):
        return next(g)

    g = gen()
    stacks = [next(g), consume(g), next(g), consume(g)]
    assert stacks[0] != stacks[1] and stacks[1][1].function.endswith("consume")


@needs_c
@both_modes
def test_c_and_python_walks_agree_across_threads(pin):
    twins = Twins(16, pin)
    lock = threading.Lock()  # the tables must see the same sequence of captures
    together = threading.Barrier(4)  # four live threads, four caches

    def work(n):
        together.wait()

        def down(k):
            if k:
                return down(k - 1)
            with lock:
                return twins.snap()

        for i in range(10):
            down(n + i % 2)
        together.wait()

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(twins.known) == 4


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_hidden_frames_and_a_program_entry(pin):
    twins = Twins(16, pin)
    namespace: dict = {}
    # A function whose code claims to be rngtrace's own: hidden wherever it sits.
    exec(compile("def hidden(fn):\n    return fn()\n", _stack.__file__, "exec"), namespace)
    hidden = namespace["hidden"]

    @_codes.program_entry
    def runner(fn):
        return fn()

    def leaf():
        return twins.snap()

    def outer():
        return hidden(lambda: hidden(leaf))

    plain = [outer() for _ in range(3)]
    entered = [runner(outer) for _ in range(3)]
    assert not any(f.filename == _stack.__file__ for f in plain[0])
    assert len(entered[0]) == 3 and len(plain[0]) > 3  # leaf, the lambda, outer: nothing outside runner


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_frames_cached_then_finished(pin):
    twins = Twins(16, pin)

    def a():
        return b()

    def b():
        return twins.snap()

    def c():
        x = twins.snap()  # noqa: F841 (a different line from a's)
        return d()

    def d():
        return twins.snap()

    # Each call's frames are new; a finished frame's id may name the next one's frame.
    stacks = [f() for f in (a, c, a, c, a)]
    assert stacks[0] == stacks[2] == stacks[4]


@needs_c
def test_c_and_python_walks_both_let_every_pin_go_past_max_pinned():
    twins = Twins(16, pin=True)
    kc, kp = twins.known.setdefault(threading.get_ident(), ({}, {}))
    for known in (kc, kp):
        known.update({-i: (0, -1, None) for i in range(1, _stack.MAX_PINNED + 2)})

    def down(n):
        return down(n - 1) if n else twins.snap()

    down(3)
    assert len(kc) < 10


@needs_c
def test_an_unexpected_cache_entry_sends_the_capture_to_the_python_walk():
    table = _stack.StackTable()
    reference = _stack.StackTable()
    reference.accelerated = None
    calls = []
    walk = table.accelerated

    def counted(*args):
        node = walk(*args)
        calls.append(node)
        return node

    table.accelerated = counted
    frame = sys._getframe()
    odd = {id(frame.f_back): ("not an offset", 0)}
    assert table.capture(frame, 16, dict(odd)) == reference.capture(frame, 16, dict(odd))
    assert calls == [NotImplemented]
    assert table.resolve(table.capture(frame, 16, {}), 16) == reference.resolve(reference.capture(frame, 16, {}), 16)


@needs_c
@both_modes
def test_c_walk_memo_is_per_table_and_agrees_on_repeated_fresh_paths(pin):
    # The second capture of each path is answered from the C walk's memo; a new table
    # starts with an empty memo of its own, whatever the old one still holds.
    for _ in range(2):
        twins = Twins(16, pin)

        def deep(n):
            return deep(n - 1) if n else twins.snap()  # noqa: B023 (called within the iteration)

        stacks = [deep(n % 4 + 10) for n in range(12)]
        assert stacks[:4] == stacks[4:8] == stacks[8:]
        assert len(twins.c._nodes) == len(twins.py._nodes)


@needs_c
def test_an_error_in_the_c_walk_falls_back_to_the_python_walk():
    table, reference = _stack.StackTable(), _stack.StackTable()
    reference.accelerated = None

    def broken(*args):
        raise MemoryError

    table.accelerated = broken

    def leaf():
        return sys._getframe()

    frame = leaf()  # finished: its offset stays put between the two captures
    nodes = [t.capture(frame, 16, {}) for t in (table, reference)]  # from one offset of this frame
    assert nodes[0] == nodes[1]
    assert table.ids == reference.ids and table._nodes == reference._nodes


# -- the C walk over the interpreter's own frames (3.11-3.13) ---------------------------------


def test_the_c_walk_reads_the_interpreters_frames_where_their_layout_was_proven():
    speedups = __import__("pytest").importorskip("rngtrace._speedups")
    assert speedups.internal_frames is ((3, 11) <= sys.version_info[:2] <= (3, 13))


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_one_code_object_reached_at_two_instructions(pin):
    twins = Twins(16, pin)

    def two(n):
        first = twins.snap()  # one line
        second = twins.snap()  # another line of the same frame
        return (first, second) if n == 0 else two(n - 1)

    def loop():
        return [two(i % 2) for i in range(6)]

    pairs = loop()
    first_line = two.__code__.co_firstlineno + 1
    for first, second in pairs:
        assert first[0].lineno == first_line and second[0].lineno == first_line + 1
        assert first[1:] == second[1:]  # the same callers, at the same instructions
    assert pairs[0] == pairs[2] == pairs[4] and pairs[1] == pairs[3]
    assert pairs[1][0][1].function.endswith("two") and not pairs[0][0][1].function.endswith("two")


@needs_c
@both_modes
def test_c_and_python_walks_agree_through_a_running_generator_among_fresh_frames(pin):
    twins = Twins(16, pin)

    def leaf():
        return twins.snap()

    def gen():
        while True:
            yield leaf()

    def fresh(g, n):
        return next(g) if n == 0 else fresh(g, n - 1)

    g = gen()
    stacks = [fresh(g, i % 3) for i in range(9)]
    assert stacks[0] == stacks[3] and stacks[0] != stacks[1]
    assert [f.function.rsplit(".", 1)[-1] for f in stacks[2][:5]] == ["leaf", "gen", "fresh", "fresh", "fresh"]


@needs_c
@both_modes
def test_c_and_python_walks_agree_from_a_finished_frame_and_from_a_suspended_generator(pin):
    twins = Twins(16, pin)

    def finished():
        return sys._getframe()

    def suspended():
        yield sys._getframe()

    g = suspended()
    for frame in (finished(), next(g), finished()):
        twins.snap(frame)
    assert twins.snap(finished())[0].function.endswith("finished")


@needs_c
def test_the_frame_a_fresh_walk_pins_is_the_very_frame_with_its_own_object():
    twins = Twins(16, pin=True)

    def inner(n):
        return twins.snap() if n == 0 else inner(n - 1)

    def outer():
        return inner(4)

    outer()
    kc, _ = twins.known[threading.get_ident()]
    for key, (lasti, _node, frame) in kc.items():
        assert id(frame) == key and frame.f_lasti == lasti


@needs_c
@both_modes
def test_c_and_python_walks_agree_on_another_threads_running_frames(pin):
    # Another thread's frames may return whenever the GIL is let go: walked through their objects.
    twins = Twins(16, pin)
    parked, release = threading.Event(), threading.Event()

    def down(n):
        if n:
            return down(n - 1)
        parked.set()
        release.wait(10)

    worker = threading.Thread(target=down, args=(5,))
    worker.start()
    try:
        assert parked.wait(10)
        frame = sys._current_frames()[worker.ident]
        stack = twins.snap(frame)
        assert sum(f.function.endswith("down") for f in stack) == 6
    finally:
        release.set()
        worker.join()


# -- lines: the C lookup and the co_lines() reference -----------------------------------------


def _code_objects(*modules):
    """Every code object in ``modules``, nested ones (functions, comprehensions, classes) too."""
    found, todo = [], []
    for module in modules:
        for value in vars(module).values():
            code = getattr(getattr(value, "__func__", value), "__code__", None)
            if code is not None:
                todo.append(code)
            elif isinstance(value, type):
                todo.extend(getattr(v, "__code__", None) for v in vars(value).values())
    while todo:
        code = todo.pop()
        if code is None or code in found:
            continue
        found.append(code)
        todo.extend(c for c in code.co_consts if hasattr(c, "co_lines"))
    return found


@needs_c
def test_the_c_line_lookup_gives_the_line_co_lines_gives_at_every_instruction_of_real_code():
    import json.decoder
    import random as random_module
    import traceback

    codes = _code_objects(random_module, json.decoder, traceback, _stack)
    checked = 0
    for code in codes:
        size = len(code.co_code)
        for lasti in range(-2, size + 4, 2):
            line = _codes._c_lineno_at(code, lasti)
            if line is None:  # no line of its own, or outside the code: the reference decides
                assert (
                    lasti < 0
                    or lasti >= size
                    or any(start <= lasti < end and lineno is None for start, end, lineno in code.co_lines())
                ), f"{code.co_name} at {lasti}: C found no line where co_lines has one"
                continue
            assert line == _codes.lineno_from_table(code, lasti), f"{code.co_name} at {lasti}"
            checked += 1
        assert _codes.lineno_at(code, size + 2) == _codes.lineno_from_table(code, size + 2)
    assert len(codes) > 100 and checked > 5_000
