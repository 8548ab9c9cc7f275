"""One binding of ``__exit__`` per ``with`` statement: its exit ends its own block, and a lost exit is noticed.

A ``with`` statement looks up (and so binds) its manager's ``__exit__`` before
it calls ``__enter__``, and holds that bound exit until the statement is over.
``ExitSlot`` makes each bound exit an object of its own, with a ``Binding``
behind it: ``__enter__`` claims the binding its statement just made and puts
what the block needs in it, and the exit reads it back. So an exit always ends
its own block, from whichever thread or task. And where the statement is left
without its exit having done its work, the bound exit is freed with the work
still undone, and the binding's ``on_lost`` callback runs. That is the one window
no ``try`` can cover: a Ctrl-C at the first instruction of ``__exit__`` is
raised before any code of ours runs.

The bound exit is a ``functools.partial``, C, so that no Python frame refers to
it: a traceback keeps the frames it passed through alive, with their locals, and
would keep the statement's exit alive long after the statement (in a notebook,
until the next error). Only the statement holds it.

Where no statement bound the exit just before (``ExitStack``, a manual
``__enter__()``), ``claim`` finds nothing and the manager pairs its entries and
exits as it did before.

The classes and function here are the reference; where the accelerator is built,
``_speedups`` (blocks.c) stands in for all three, with the same steps and no
Python frame, partial or weak reference per block: its bound exit is an object of
its own whose finalizer is the weak reference's callback.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from collections.abc import Callable
from types import FrameType
from typing import Any

from ._hotpath import SPEEDUPS


class Binding:
    """What one ``with`` statement's exit of a manager knows: the ``payload`` its ``__enter__`` left."""

    __slots__ = ("payload", "_watch", "_lost", "_lost_arg")

    def __init__(self) -> None:
        #: what ``__enter__`` put here for the exit (None: no ``__enter__`` claimed this binding)
        self.payload: Any = None
        self._watch: weakref.ref | None = None
        self._lost: Callable[[Any], Any] | None = None
        self._lost_arg: Any = None

    def on_lost(self, callback: Callable[[Any], Any], arg: Any) -> None:
        """Call ``callback(arg)`` if the statement is over before ``done()``: its exit never finished."""
        self._lost = callback
        self._lost_arg = arg

    def done(self) -> None:
        """The exit did its work: nothing is lost when the statement lets go of it."""
        # Dropping the weak reference first means the usual exit runs no Python code when
        # the statement lets go (a Ctrl-C landing in a callback is printed and lost).
        self._watch = None
        self._lost = self._lost_arg = None

    def _gone(self, _ref: Any) -> None:
        lost, arg, self._lost, self._lost_arg, self._watch = self._lost, self._lost_arg, None, None, None
        if lost is not None:
            lost(arg)


#: per thread, the exit bound last and where: (binding, bound exit, code, instruction, id of the frame)
_made = threading.local()


class ExitSlot:
    """A class's ``__exit__``, bound anew by each ``with`` statement.

    A statement's bound exit calls ``bound(manager, binding, exc_type, exc, tb)``;
    ``Class.__exit__`` (as ``ExitStack`` reads it) is ``unbound``, called as
    ``unbound(manager, exc_type, exc, tb)``.
    """

    def __init__(self, bound: Callable[..., Any], unbound: Callable[..., Any]) -> None:
        self.bound = bound
        self.unbound = unbound
        self.__doc__ = unbound.__doc__

    def __get__(self, manager: Any, owner: type | None = None) -> Any:
        if manager is None:
            return self.unbound
        binding = BindingPython()  # (the name Binding is the C one where the accelerator is built)
        exit = functools.partial(self.bound, manager, binding)
        frame = sys._getframe(1)
        # Where: only the __enter__ that the same instruction of the same frame calls next claims it.
        _made.entry = (manager, binding, exit, frame.f_code, frame.f_lasti, id(frame))
        return exit


def claim(manager: Any) -> Binding | None:
    """The binding of the ``with`` statement entering ``manager``, or None.

    Called by ``__enter__`` itself: its caller's frame is the statement's. A ``with``
    statement binds the exit and calls ``__enter__`` from one instruction, so an exit
    bound at another (``manager.__exit__`` read by hand) is never taken for this block's.
    """
    frame: FrameType = sys._getframe(2)
    entry = getattr(_made, "entry", None)
    if entry is None:
        return None
    _made.entry = None
    owner, binding, exit, code, lasti, frame_id = entry
    if owner is not manager or frame.f_lasti != lasti or frame.f_code is not code or id(frame) != frame_id:
        return None
    binding._watch = weakref.ref(exit, binding._gone)
    return binding


#: The reference implementations, whichever is used (tests compare the two).
BindingPython, ExitSlotPython, claim_python = Binding, ExitSlot, claim
#: What a with statement's bound exit is: ``functools.partial`` here, its own type in C.
BOUND_EXIT_TYPES: tuple[type, ...] = (functools.partial,)

if SPEEDUPS is not None:
    Binding = SPEEDUPS.Binding  # type: ignore[misc]
    ExitSlot = SPEEDUPS.ExitSlot  # type: ignore[misc]
    claim = SPEEDUPS.claim
    BOUND_EXIT_TYPES = (functools.partial, SPEEDUPS.BoundExit)

__all__ = ["BOUND_EXIT_TYPES", "Binding", "ExitSlot", "claim"]
