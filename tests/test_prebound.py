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

from rngtrace import rng_trace

SOURCE = """\
from random import randrange, random as uniform


def pick():
    return randrange(10) + uniform()  # PICK LINE
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
            ("random.randrange", "draw", 5),
            ("random.random", "draw", 5),
        ] * 3
    # Once learned, the module's own names carry the wrappers: the profile hook is no longer needed.
    assert not any("profile hook" in note for note in blocks[-1].notes)


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
