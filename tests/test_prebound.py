"""References bound before tracing (``from random import randrange`` at import) are learned once per process.

Per-test tracing (a trace per block) must attribute them as a session trace
does: after the first block that meets one, every later block records those
calls on their own line, and no block leaves a module's name changed.
"""

from __future__ import annotations

import importlib
import random
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from rngtrace import _hotpath, rng_trace

#: With the accelerator, random.random records in place: the module's ``uniform`` below is then the
#: recording builtin itself, and no move is left to notice. What these tests check (learning a
#: module's names, arming the hook) is what the pure-Python wrappers do: ``make test``'s second pass.
moves_unseen = pytest.mark.skipif(
    _hotpath.SPEEDUPS is not None, reason="random.random records in place: no move to notice"
)

SOURCE = """\
from random import randrange, random as uniform
import random as _random


def pick():
    return randrange(10) + uniform()  # PICK LINE


def pick_and_notice():
    pick()
    return _random.random()  # NOTICE LINE
"""


@pytest.fixture
def prebound(tmp_path: Path) -> Iterator[ModuleType]:
    """A module that took its own references to random's functions when it was imported."""
    name = f"prebound_{tmp_path.name}"
    (tmp_path / f"{name}.py").write_text(SOURCE)
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module(name)
        yield module
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop(name, None)


def test_references_bound_at_import_are_attributed_from_the_second_block_on(prebound: ModuleType) -> None:
    blocks = []
    for _ in range(6):
        with rng_trace(print=False) as trace:
            for _ in range(3):
                prebound.pick()
        blocks.append(trace)
    # The first block may only notice the move; every later one records each call on its line.
    assert sum(e.kind == "unattributed" for e in blocks[0].events) <= 1
    for trace in blocks[1:]:
        assert [(e.api, e.kind, e.frame.lineno) for e in trace.events] == [
            ("random.randrange", "draw", 6),
            ("random.random", "draw", 6),
        ] * 3
    # Once learned, the module's own names carry the wrappers: the profile hook is no longer needed.
    assert not any("profile hook" in note for note in blocks[-1].notes)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook on demand")
@moves_unseen
def test_a_move_noticed_in_the_module_holding_the_reference_patches_it_and_arms_no_profile_hook(
    prebound: ModuleType,
) -> None:
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    # A profile hook would see every call of the program: the module on the noticing stack holds
    # random's originals, so they are patched instead, and its later calls are recorded by wrappers.
    with rng_trace(print=False) as first:
        prebound.pick_and_notice()  # pick() moves the stream unseen; the module's next draw notices
        hooked = sys.getprofile()
        prebound.pick()
    with rng_trace(print=False) as second:  # nothing left for a hook to find: none from the start either
        hooked_from_start = sys.getprofile()
        prebound.pick()
    assert (hooked, hooked_from_start) == (None, None)
    assert [(e.kind, e.api, e.frame.lineno if e.kind == "draw" else None) for e in first.events] == [
        ("draw", "random.randrange", 6),  # recorded where it calls random's own methods (call_through)
        ("unattributed", "random state", None),
        ("draw", "random.random", 11),
        ("draw", "random.randrange", 6),
        ("draw", "random.random", 6),
    ]
    assert [(e.api, e.frame.lineno) for e in second.events] == [("random.randrange", 6), ("random.random", 6)]
    assert not any("profile hook" in note for note in first.notes + second.notes)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook on demand")
@moves_unseen
def test_the_profile_hook_goes_back_to_armed_once_the_name_it_found_is_patched(prebound: ModuleType) -> None:
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    with rng_trace(print=False) as trace:
        prebound.pick()  # a move no patch saw, noticed below, where no module holds random's originals
        random.random()
        armed = sys.getprofile()
        prebound.pick()  # the hook sees it and patches the module's names: it has nothing left to find
        after = sys.getprofile()
        prebound.pick()
    assert armed is not None and after is None
    name = "test_the_profile_hook_goes_back_to_armed_once_the_name_it_found_is_patched"
    assert [(e.kind, e.api, e.frame.function) for e in trace.events[2:]] == [("draw", "random.random", name)] + [
        ("draw", "random.randrange", "pick"),
        ("draw", "random.random", "pick"),
    ] * 2


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook on demand")
@moves_unseen
def test_the_profile_hook_stays_where_it_found_a_call_no_patch_reaches(prebound: ModuleType) -> None:
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    holder = types.SimpleNamespace(random=random.random)
    with rng_trace(print=False) as trace:
        holder.random()  # a move no patch saw, through a reference no module holds
        random.random()  # noticed: the hook arms
        holder.random()  # found by the hook: no name to patch, so it stays
        prebound.pick()  # found too, and the module's names patched: still needed for the holder's
        after = sys.getprofile()
        holder.random()
    assert after is not None
    assert [e.kind for e in trace.events][-4:] == ["draw"] * 4


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="needs the C accelerator")
def test_a_modules_own_reference_to_random_random_is_recorded_on_its_line_by_the_builtin_itself(
    prebound: ModuleType,
) -> None:
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active")
    holder = types.SimpleNamespace(random=random.random)
    # 3.10/3.11: where an earlier test's last trace met a move only the profile hook attributes, the
    # next trace starts with the hook on (EARLY_NOTE); this one takes that over and meets none.
    with rng_trace(print=False):
        pass
    for _ in range(2):
        with rng_trace(print=False) as trace:
            prebound.pick()
            holder.random()
            hooked = sys.getprofile()
        assert hooked is None  # no move unseen: no hook armed
        assert [(e.kind, e.api, e.frame.lineno) for e in trace.events][:2] == [
            ("draw", "random.randrange", 6),
            ("draw", "random.random", 6),
        ]
        assert [(e.kind, e.api, e.frame.function) for e in trace.events][2:] == [
            ("draw", "random.random", trace.events[2].frame.function)
        ]
        assert trace.events[2].frame.filename == __file__
    assert prebound.uniform is random.random  # the module's name was never changed


def test_learned_names_hold_the_originals_again_after_each_trace(prebound: ModuleType) -> None:
    originals = (prebound.randrange, prebound.uniform)
    for _ in range(4):
        with rng_trace(print=False):
            prebound.pick()
        assert (prebound.randrange, prebound.uniform) == originals
        assert prebound.randrange is random.randrange  # the very object random.py bound, not a wrapper


def test_a_name_the_module_rebinds_between_traces_stays_its_own(prebound: ModuleType) -> None:
    for _ in range(3):
        with rng_trace(print=False):
            prebound.pick()

    def four(n: int) -> int:
        return 4

    prebound.randrange = four
    with rng_trace(print=False) as trace:
        assert prebound.randrange is four
        prebound.pick()
    assert prebound.randrange is four
    assert [e.api for e in trace.events] == ["random.random"]


def test_learning_draws_the_same_values_as_untraced(prebound: ModuleType) -> None:
    random.seed(5)
    untraced = [prebound.pick() for _ in range(20)]
    random.seed(5)
    traced = []
    for _ in range(20):
        with rng_trace(print=False):
            traced.append(prebound.pick())
    assert traced == untraced


_held = types.SimpleNamespace(draw=types.SimpleNamespace(random=random.random))  # bound before tracing


def _through_the_catchall() -> float:
    return _held.draw.random()  # the same bytecode as below: a frame at the same address, the same offset


def _through_a_wrapper() -> float:
    return np.random.rand()


def test_a_wrappers_call_at_the_address_and_offset_of_a_catchall_record_is_still_recorded():
    # The catch-all marks the call it recorded (the frame and offset) for the wrapper it may run
    # into; a later frame of other code at that address and offset is another call, recorded too.
    with rng_trace(print=False) as trace:
        for _ in range(50):
            _through_the_catchall()
            _through_a_wrapper()
    kinds = [(e.kind, e.api) for e in trace.events]
    assert ("unattributed", "numpy state") not in kinds
    assert kinds.count(("draw", "numpy.random.rand")) == 50
