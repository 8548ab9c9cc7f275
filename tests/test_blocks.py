"""A with statement's exit ends its own block, and a statement left with its exit undone is noticed.

Each behaviour is proved for the Python reference (``_blocks``) and for the C one that stands in
for it where the accelerator is built (``_speedups``, blocks.c), on a small manager of each, and
then on ``rng_trace`` and ``rng_isolate`` themselves.
"""

from __future__ import annotations

import contextlib
import gc
import random
import sys
import threading
from typing import Any

import pytest

from rngtrace import _blocks, rng_isolate, rng_trace
from rngtrace._hotpath import SPEEDUPS
from rngtrace._hub import HUB

IMPLEMENTATIONS = {"python": (_blocks.BindingPython, _blocks.ExitSlotPython, _blocks.claim_python)}
if SPEEDUPS is not None:
    IMPLEMENTATIONS["c"] = (SPEEDUPS.Binding, SPEEDUPS.ExitSlot, SPEEDUPS.claim)


def _manager_class(implementation: str) -> type:
    """A manager as rng_trace is built: each block's payload in its binding, or in a stack when entered by hand."""
    _binding, exit_slot, claim = IMPLEMENTATIONS[implementation]

    class Manager:
        def __init__(self) -> None:
            self.by_hand: list[str] = []
            self.ended: list[tuple[str, Any]] = []
            self.lost: list[str] = []
            self.count = 0

        def __enter__(self) -> str:
            binding = claim(self)
            self.count += 1
            name = f"block {self.count}"
            if binding is None:
                self.by_hand.append(name)
            else:
                binding.payload = name
                binding.on_lost(self.lost.append, name)
            return name

        def _exit_bound(self, binding: Any, exc_type: Any, exc: Any, tb: Any) -> None:
            """End the block this statement entered."""
            name = binding.payload
            if name is None:
                return self._exit_unbound(exc_type, exc, tb)
            self.ended.append((name, exc_type))
            binding.done()

        def _exit_unbound(self, exc_type: Any, exc: Any, tb: Any) -> None:
            """End the newest block entered by hand."""
            self.ended.append((self.by_hand.pop(), exc_type))

        __exit__ = exit_slot(_exit_bound, _exit_unbound)

    return Manager


@pytest.fixture(params=sorted(IMPLEMENTATIONS))
def Manager(request) -> type:
    return _manager_class(request.param)


def test_each_statements_exit_ends_the_block_it_entered_also_nested_in_one_manager(Manager):
    manager = Manager()
    with manager as outer:
        with manager as inner:
            pass
        assert manager.ended == [(inner, None)]
    with pytest.raises(ValueError), manager as third:
        raise ValueError
    assert manager.ended == [("block 2", None), ("block 1", None), ("block 3", ValueError)]
    assert (outer, inner, third) == ("block 1", "block 2", "block 3")
    assert manager.lost == [] and manager.by_hand == []


def test_an_exit_read_on_the_class_is_the_unbound_one_and_exitstack_pairs_by_hand(Manager):
    assert Manager.__exit__ is vars(Manager)["__exit__"].unbound
    assert Manager.__exit__.__doc__ == "End the newest block entered by hand."
    manager = Manager()
    with contextlib.ExitStack() as stack:
        entered = stack.enter_context(manager)
        assert manager.by_hand == [entered]
    assert manager.ended == [(entered, None)] and manager.lost == []


def test_an_exit_bound_by_hand_claims_no_later_enter(Manager):
    manager = Manager()
    exit_ = manager.__exit__  # bound here, not by a with statement
    manager.__enter__()  # another instruction: entered by hand
    assert manager.by_hand == ["block 1"]
    exit_(None, None, None)  # a binding nobody claimed: the newest block entered by hand
    assert manager.ended == [("block 1", None)]
    with manager:  # a statement afterwards binds and claims its own
        assert manager.by_hand == []


def test_a_statement_that_lets_go_of_its_exit_undone_calls_on_lost_once_even_while_a_traceback_is_kept(Manager):
    manager = Manager()
    code = Manager._exit_bound.__code__

    def interrupt_at_the_exits_first_instruction(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code is code:
            sys.settrace(None)
            raise KeyboardInterrupt  # as a Ctrl-C landing there: no code of the exit has run
        return None

    kept = None
    try:
        with manager:
            sys.settrace(interrupt_at_the_exits_first_instruction)
    except KeyboardInterrupt as interrupt:
        kept = interrupt  # a notebook keeps the traceback, and with it the exit function's frame
    finally:
        sys.settrace(None)
    assert kept is not None and manager.ended == []
    assert manager.lost == ["block 1"]
    del kept
    gc.collect()
    assert manager.lost == ["block 1"]


def test_a_finished_exit_runs_no_callback_when_let_go(Manager):
    manager = Manager()
    for _ in range(3):
        with manager:
            pass
    gc.collect()
    assert manager.lost == [] and len(manager.ended) == 3


def test_each_threads_statements_claim_their_own_exits(Manager):
    manager = Manager()
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait()
            for _ in range(300):
                with manager:
                    pass
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    # Each exit ended a block a statement of its own entered: none was entered or ended by hand.
    assert len(manager.ended) == 1200 and manager.by_hand == [] and manager.lost == []
    assert len({name for name, _ in manager.ended}) == 1200


@pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built or is turned off")
def test_rng_trace_and_rng_isolate_bind_their_exits_in_c():
    assert type(vars(type(rng_trace()))["__exit__"]) is SPEEDUPS.ExitSlot
    assert type(vars(rng_isolate)["__exit__"]) is SPEEDUPS.ExitSlot
    assert type(rng_trace().__exit__) is SPEEDUPS.BoundExit


def test_a_trace_whose_exit_is_interrupted_at_its_first_instruction_ends_while_its_traceback_is_kept():
    tracer = rng_trace(print=False)
    code = type(tracer)._exit_bound.__code__

    def interrupt(frame: Any, event: str, arg: Any) -> Any:
        if event == "call" and frame.f_code is code:
            sys.settrace(None)
            raise KeyboardInterrupt
        return None

    kept = None
    try:
        with tracer:
            random.random()
            sys.settrace(interrupt)
    except KeyboardInterrupt as interrupt_:
        kept = interrupt_
    finally:
        sys.settrace(None)
    assert kept is not None
    assert HUB.active == ()  # ended by the hub (on_lost), though the exit's frame is kept
    assert not HUB.hooked()
