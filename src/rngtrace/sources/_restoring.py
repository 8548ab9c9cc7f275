"""The wrappers of a stream's state getters and setters: putting back a state handed out is a restore.

A getter (``getstate``, ``get_state``, ``get_rng_state``) remembers a digest of each
state it hands out, with the line that asked for it (``_handed``); a setter that puts
one back records a restore, naming that line, and one that puts back the state the
stream holds records nothing (torch.compile's Dynamo does it at every compile).
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

from .._kinds import SEED
from .._paths import PACKAGE_DIR
from ._recorder import recorder
from ._source import library_of
from ._wrapping import Wrapper, named


def restore_wrapper(
    rec: Any,
    stream: str,
    api: str,
    original: Callable,
    current: Callable[[Any], bool],
    owner: object | None = None,
    digest: Callable[[Any], Any] | None = None,
) -> Callable:
    """Wrap a restore (``setstate``, ``set_rng_state``): recorded only where it changes the state.

    Frameworks save and restore a stream around work of their own (torch.compile's
    Dynamo restores ``random`` and torch at every compile): a restore of the state the
    stream already holds moves nothing, and is no seed of anybody's. ``current(state)``
    says whether ``state`` is the stream's state now; where it cannot tell (raises),
    the call is recorded. A state whose ``digest(state)`` a getter handed out during
    the trace (``getter_wrapper``) is put back: a restore event, not a seed.
    """
    skip = 1 if owner is not None else 0  # a method of the owner's: the state follows self
    fingerprint = rec.fingerprint(stream)
    lock = rec.stream_lock(stream)

    def restore(*args: Any, **kwargs: Any) -> Any:
        # The same state put back may still rewrite what the fingerprint reads (torch's
        # set_state rewrites its head): once the call returns, take the state as explained --
        # only where it was before, so a move nobody recorded is still reported.
        with lock:
            view, last = fingerprint.view, fingerprint.last
            clean = view is not None and last is not None and view.value == last
            result = original(*args, **kwargs)
            if clean:
                fingerprint.take()
        return result

    named(restore, original)

    def state_of(args: tuple, kwargs: dict) -> Any:
        return args[skip] if len(args) > skip else next(iter(kwargs.values()), None)

    def changes(args: tuple, kwargs: dict) -> bool:
        try:
            return not current(state_of(args, kwargs))
        except Exception:  # noqa: BLE001 (a state it cannot compare: the call says what it is)
            return True

    def restored(args: tuple, kwargs: dict) -> str | None:
        if digest is None:
            return None
        try:
            return rec.handed.restore_detail(stream, digest(state_of(args, kwargs)))
        except Exception:  # noqa: BLE001 (a state it cannot digest is recorded as the seed it may be)
            return None

    wrapper = recorder(rec, stream, SEED, api, restore, takes=changes, owner=owner, restored=restored)
    wrapper.__dict__["__wrapped__"] = original  # named, signed and pickled as the original, not ``restore``
    return wrapper


_CONTEXTLIB = contextlib.__file__


def getter_wrapper(
    rec: Any, original: Callable, stream_of: Callable[[tuple], str | None], digest: Callable[[Any], Any]
) -> Callable:
    """Wrap a state getter (``getstate``, ``get_rng_state``): remember the digest of each state it hands out.

    A state handed out and put back later is a restore, not a reseed (``restore_wrapper``).
    A digest, not a copy, and only while a trace records; ``stream_of(args)`` names the
    stream (None: not a global stream's getter, as another instance's ``getstate``). With
    it goes the line that asked for the state, raw: the first outside rngtrace and the
    stream's library (``fork_rng``'s caller, Lightning's ``seed.py``), which a restore names.
    """
    hot, hand_out = rec.hot, rec.handed.hand_out
    inside: dict[str, tuple[str, ...]] = {}  # stream -> the files its getters' own callers live in

    def get_state(*args: Any, **kwargs: Any) -> Any:
        state = original(*args, **kwargs)
        now = hot.now
        if now.active:
            try:
                stream = stream_of(args)
                if stream is not None:
                    skip = inside.get(stream)
                    if skip is None:
                        # A context manager's plumbing too: fork_rng's state was saved at its ``with``.
                        skip = inside[stream] = (*library_of(stream), PACKAGE_DIR, _CONTEXTLIB)
                    caller: FrameType | None = sys._getframe(1)
                    while caller is not None and caller.f_code.co_filename.startswith(skip):
                        caller = caller.f_back
                    if caller is None:
                        hand_out(stream, digest(state), None, 0, now.active)
                    else:
                        hand_out(stream, digest(state), caller.f_code, caller.f_lineno, now.active)
            except Exception:  # noqa: BLE001 (never failing the getter: an unknown state is then no restore)
                pass
        return state

    return Wrapper.make(get_state, original)
