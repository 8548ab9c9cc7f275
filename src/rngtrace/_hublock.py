"""The hub's ways of taking its lock, each in C where the accelerator is built.

A Python ``with lock:`` (or acquire, then ``try``) leaves a point between taking the
lock and guarding its release: a profile or monitoring hook runs there (the catch-all's,
or another tool's), and a Ctrl-C landing in it keeps the lock held for good. In C the
lock is taken and let go with no such point; the pure-Python forms below let go of it
wherever an interruption landed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ._hotpath import SPEEDUPS as _speedups


def _under(lock: Any, blocking: bool, fn: Callable, args: tuple) -> Any:
    """``fn(*args)`` holding the RLock ``lock`` (NotImplemented where ``blocking`` is False and it is taken).

    Not a with statement, nor acquire() then try: a Ctrl-C can land right after the
    acquire, or just before the release is called. The outer ``try`` lets go of the
    lock wherever it landed.
    """
    if lock._is_owned():
        return fn(*args)  # this thread's already: taken again by nothing, let go by nothing
    try:
        if not lock.acquire(blocking):
            return NotImplemented
        try:
            return fn(*args)
        finally:
            lock.release()
    except BaseException:
        if lock._is_owned():
            lock.release()
        raise


def _try_locked(lock: Any, fn: Callable, *args: Any) -> Any:
    return _under(lock, False, fn, args)


def _call_with(lock: Any, fn: Callable, *args: Any) -> Any:
    return _under(lock, True, fn, args)


def _call_unlocked(lock: Any, fn: Callable, *args: Any) -> Any:
    # Without the accelerator: a try-acquire in Python could be interrupted before its release
    # is guarded, leaving the lock held for good, so the check runs as before, without it.
    return fn(*args)


#: ``fn(*args)`` under ``lock``, waiting for it. On 3.12+ the catch-all's monitoring callback
#: runs before a ``with`` statement's __exit__ call: a Ctrl-C there would keep the lock.
call_locked: Callable[..., Any] = _speedups.call_locked if _speedups is not None else _call_with

#: ``fn(*args)`` under ``lock`` where no other thread holds it, else NotImplemented (``fn`` not called)
call_when_free: Callable[..., Any] = _speedups.call_if_free if _speedups is not None else _try_locked

#: the same in C; without the accelerator ``fn`` runs without the lock (a block's end check,
#: a hook firing inside the hub), never leaving the lock held
call_if_free: Callable[..., Any] = _speedups.call_if_free if _speedups is not None else _call_unlocked

__all__ = ["call_if_free", "call_locked", "call_when_free"]
