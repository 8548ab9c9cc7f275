"""Pinned frames: the Sweeper lets finished ones go, and nothing it fails to do lets them pile up."""

from __future__ import annotations

import gc
import itertools
import random
import sys
import time
import weakref
from contextlib import ExitStack, contextmanager
from types import FrameType, SimpleNamespace

import pytest

from rngtrace import _hotpath, rng_trace
from rngtrace._catchall import PinningCatchAll
from rngtrace._threads import MAX_PINNED, Sweeper


def finished_frame():
    """A frame object that outlived its execution, as a pinned frame does once its call returns."""
    return sys._getframe()


def pinned(frames: dict, count: int) -> None:
    """Pin ``count`` finished frames in ``frames``, as the stack cache stores them."""
    for _ in range(count):
        f = finished_frame()
        frames[id(f)] = (f.f_lasti, 0, f)


def left_after(frames: dict, seconds: float = 2.0) -> int:
    """How many pins are left in ``frames`` once it empties, or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while frames and time.monotonic() < deadline:
        time.sleep(0.005)
    return len(frames)


@contextmanager
def sweeping(frames: dict):
    """A Sweeper over one thread's pinned frames, stopped on the way out."""
    sweeper = Sweeper({0: SimpleNamespace(frames=frames)})  # all it reads of a ThreadState
    try:
        yield sweeper
    finally:
        sweeper.stop()


def test_the_sweeper_survives_finalizers_that_change_the_frames_it_is_reading():
    frames: dict = {}
    keys = itertools.count()
    churning = True

    class Churn:
        """Cyclic garbage whose finalizer pins a frame and leaves more such garbage behind."""

        def __init__(self) -> None:
            self.cycle = self

        def __del__(self) -> None:
            if churning:
                f = finished_frame()
                frames[("churn", next(keys))] = (f.f_lasti, 0, f)
                Churn()

    # A collection on nearly every allocation: on 3.10/3.11 one runs inside whatever
    # the sweeper allocates while it reads the dict, and its finalizer grows the dict.
    threshold = gc.get_threshold()
    with sweeping(frames):
        gc.set_threshold(1)
        try:
            Churn()
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                pinned(frames, 50)
                time.sleep(0.001)
        finally:
            churning = False
            gc.set_threshold(*threshold)
            gc.collect()
        pinned(frames, 100)
        left = left_after(frames)
        assert left == 0, f"{left} finished frames still pinned: the sweeper stopped"


def test_the_sweeper_keeps_sweeping_after_a_pass_raises():
    class Unreadable(tuple):
        """An entry the pass cannot read: stands for any error inside a pass."""

        def __len__(self) -> int:
            raise RuntimeError("unreadable entry")

    frames: dict = {"bad": Unreadable((0, 0, None))}
    with sweeping(frames):
        time.sleep(Sweeper.INTERVAL * 4)  # a few passes, each raising
        del frames["bad"]
        pinned(frames, 100)
        left = left_after(frames)
        assert left == 0, f"{left} finished frames still pinned after a pass raised"


@contextmanager
def no_monitoring_tool_free():
    """3.12+: take every free sys.monitoring tool id, so rngtrace falls back to pinning frames."""
    taken = []
    if sys.version_info >= (3, 12):
        mon = sys.monitoring
        for tool in range(6):
            if mon.get_tool(tool) is None:
                mon.use_tool_id(tool, "test-occupant")
                taken.append(tool)
    try:
        yield
    finally:
        for tool in taken:
            sys.monitoring.free_tool_id(tool)


def leaf() -> None:
    random.random()


def middle() -> None:
    leaf()  # this frame is pinned (the innermost, leaf's, never is)


def outer() -> None:
    middle()  # and so is this one: each call pins two new frames


def finished_frames_of(*functions) -> int:
    """How many frames of ``functions`` outlived their call: what pinning keeps alive."""
    codes = {f.__code__ for f in functions}
    return sum(1 for o in gc.get_objects() if type(o) is FrameType and o.f_code in codes)


@contextmanager
def pinning_with_a_stalled_sweeper(monkeypatch, traces: int = 1):
    """``traces`` nested traces of ``random`` whose stack cache pins frames, with a Sweeper that never runs.

    Yields the outermost trace, after the draws that start the pinning (``PIN_AFTER + 1`` events).
    """
    if sys.version_info < (3, 12) and sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    monkeypatch.setattr(Sweeper, "INTERVAL", 3600.0)  # stalled: not one pass during the block
    with no_monitoring_tool_free(), ExitStack() as stack:
        made = [stack.enter_context(rng_trace(streams="random", print=False)) for _ in range(traces)]
        for _ in range(PinningCatchAll.PIN_AFTER + 1):
            random.random()  # enough draws for the stack cache to start pinning
        yield made[0]


def test_pinned_frames_stay_bounded_when_the_sweeper_never_runs(monkeypatch):
    kept = []
    # Two traces: every draw takes the Python record() path, where nothing but the Sweeper and
    # the bound lets a pin go (one trace's C path also lets go at each pin: the next test).
    with pinning_with_a_stalled_sweeper(monkeypatch, traces=2):
        for i in range(1, MAX_PINNED * 3 + 1):
            outer()
            if i % (MAX_PINNED // 4) == 0:
                kept.append(finished_frames_of(outer, middle))
    assert max(kept) > MAX_PINNED // 2, f"at most {max(kept)} frames kept: too few pinned to prove a bound"
    assert max(kept) <= MAX_PINNED + 64, f"{max(kept)} finished frames kept alive with a stalled sweeper"


class Batch:
    """Stands for what a fresh frame's locals hold: a batch of tensors, a forward()'s activations."""


def fetch(alive: list) -> None:
    batch = Batch()
    alive.append(weakref.ref(batch))
    middle()  # pins this frame, with ``batch`` in it, until it is let go


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the C accelerator's walk lets go of finished pins")
def test_a_draw_that_pins_a_frame_lets_go_of_the_finished_ones_without_waiting_for_the_sweeper(monkeypatch):
    # A DataLoader worker calls fetch() afresh per batch: kept until the Sweeper's next pass,
    # each batch's tensors stayed alive while the next batch allocated, and the worker's
    # memory grew page by page (hundreds of copy-on-write faults per worker and epoch).
    alive: list = []
    with pinning_with_a_stalled_sweeper(monkeypatch) as trace:  # only the walk can let go
        for _ in range(200):
            fetch(alive)
        kept = [i for i, ref in enumerate(alive) if ref() is not None]
        frames = finished_frames_of(fetch, middle)
    assert len(trace.events) == PinningCatchAll.PIN_AFTER + 1 + 200  # every draw still recorded
    assert kept == [len(alive) - 1], f"batches {kept} of {len(alive)} still held by pinned frames"
    assert frames <= 2, f"{frames} finished frames pinned with a stalled sweeper"


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the C accelerator's walk lets go of finished pins")
def test_a_draw_that_pins_lets_go_of_every_finished_frame_however_many_piled_up_before(monkeypatch):
    alive: list = []
    with pinning_with_a_stalled_sweeper(monkeypatch):
        with rng_trace(streams="random", print=False):  # two traces: the Python path, which only pins
            for _ in range(100):
                fetch(alive)
        piled = finished_frames_of(fetch, middle)
        fetch(alive)  # one trace again: its walk lets go of all of them (more than its inline room)
        left = finished_frames_of(fetch, middle)
        kept = [i for i, ref in enumerate(alive) if ref() is not None]
    assert piled > 16, f"only {piled} finished frames piled up: the test proves nothing"
    assert left <= 2 and set(kept) <= {len(alive) - 1}, f"{left} finished frames and batches {kept} still held"


class _DrawsWhenFreed:
    """A local whose finalizer draws, as a resource's cleanup might."""

    freed = 0

    def __del__(self) -> None:
        _DrawsWhenFreed.freed += 1
        random.random()


def fetch_holding_a_drawing_local() -> None:
    local = _DrawsWhenFreed()  # noqa: F841  freed when this frame is let go
    middle()


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the C accelerator's walk lets go of finished pins")
def test_a_finalizer_in_a_let_go_frame_that_draws_is_an_event_of_its_own(monkeypatch):
    _DrawsWhenFreed.freed = 0
    with pinning_with_a_stalled_sweeper(monkeypatch) as trace:
        for _ in range(100):
            fetch_holding_a_drawing_local()
        freed = _DrawsWhenFreed.freed
    events = trace.events[PinningCatchAll.PIN_AFTER + 1 :]
    from_finalizers = [e for e in events if e.stack[0].function.endswith("__del__")]
    assert freed >= 95, f"only {freed} of 100 locals freed during the block"
    assert len(from_finalizers) == freed and len(events) == 100 + freed
    assert not [e for e in events if e.kind != "draw"]  # no move left unexplained


def test_seeds_never_start_pinning_however_many_a_trace_records():
    # pytest-randomly reseeds `random` and NumPy six times per test, each from pluggy's fresh
    # stacks: counted as walks, they started the Sweeper's thread and pinned frames no later seed
    # reuses. Draws still start it (the test above: PIN_AFTER + 1 draws).
    from rngtrace._hub import HUB

    if sys.version_info < (3, 12) and sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    with no_monitoring_tool_free(), rng_trace(streams="random", print=False) as trace:
        for i in range(PinningCatchAll.PIN_AFTER * 3):
            random.seed(i)
        mode = HUB.rec.mode
    assert len(trace.events) == PinningCatchAll.PIN_AFTER * 3
    assert mode is _hotpath.FrameMode.WALK
