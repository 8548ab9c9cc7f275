"""A session: one active trace as the hub sees it, and the checks of what a face asks for.

A face makes a ``Session`` (``Hub.session``) and starts it; a child process makes
one of its own (``child_session``) that only logs, whatever its parents asked, and
writes what it records to their spool.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

from ._digests import state_digests
from ._store import RawStore
from .sources import declared

ON_DRAW = ("log", "warn", "raise")

#: the streams of each set of streams in install order (sorted: the same whichever trace installs them)
_ORDER: dict[frozenset, tuple[str, ...]] = {}
_TOKENS = itertools.count(1)


def install_order(streams: frozenset) -> tuple[str, ...]:
    """``streams`` sorted, made once per set of streams."""
    return _ORDER.get(streams) or _ORDER.setdefault(streams, tuple(sorted(streams)))


class Session:
    """One active trace and what the hub needs to know about it."""

    __slots__ = ("trace", "streams", "order", "on_draw", "start_states", "token", "tags", "origins", "compared", "gone")

    def __init__(self, trace: RawStore, streams: frozenset, on_draw: str, tags: tuple = ()) -> None:
        self.trace = trace
        #: names this session in its children's spool files
        self.token = next(_TOKENS)
        #: the sessions a child's events are merged into: its own, or (in a child) its parent's
        self.tags = tags or (self.token,)
        #: (sub-stream, digest of its full state, why, index of the next event): where it starts
        #: from anew, at a fork or a seed (two processes drawing from one digest draw alike)
        self.origins: list[tuple[str, str, str, int]] = []
        self.streams = streams
        #: the streams in install order (sorted: the same order whichever trace installs them)
        self.order = _ORDER.get(streams) or install_order(streams)  # (install_order's usual case inline)
        self.on_draw = on_draw
        #: stream -> the quick states (``Source.snapshot()``) of its sub-streams at the start
        self.start_states: dict[str, dict[str, Any]] = {}
        #: its log is meant to be compared with other runs' (rngtrace run, log_dir=): the full state
        #: each stream starts from is noted, and after each seed (see ``Hub.compare_states``)
        self.compared = False
        #: None, or whether the code that would end it is gone without having done so (the hub's ``_end_gone``)
        self.gone: Callable[[], bool] | None = None


def child_session(streams: tuple[str, ...], depth: int, max_events: int, tags: tuple[int, ...]) -> Session:
    """A child process's own session (``_spawned.child_spec``): it only logs, whatever its parents asked."""
    return Session(RawStore(streams, depth, max_events), frozenset(streams), "log", tags)


def note_origins(sessions: Sequence[Session], source: Any, why: str) -> None:
    """Note the digest of each of ``source``'s sub-streams, read once, as where ``sessions`` start anew."""
    try:
        digests = state_digests(source)
    except Exception:  # noqa: BLE001 (a state that cannot be read is no finding, never an error)
        return
    fixed = source.starts_fixed() if why == "start" else None
    for session in sessions:
        at = len(session.trace.raw)
        session.origins.extend((sub, digest, why, at) for sub, digest in digests.items())
        if fixed is not None:  # the findings ask: does a draw before any seed repeat run to run?
            session.trace.settings[f"{source.name}.starts_fixed"] = fixed


def validate_streams(streams: Any) -> frozenset:
    """Check a ``streams=`` argument; None means every stream."""
    if streams is None:
        return frozenset(declared())
    if isinstance(streams, str):
        streams = [streams]
    names = list(streams)
    for name in names:
        if name not in declared():
            raise ValueError(f"unknown stream {name!r}; choose from {', '.join(declared())}")
    if not names:
        raise ValueError(f"streams is empty; choose from {', '.join(declared())}, or None for all")
    return frozenset(names)


def validate_on_draw(on_draw: Any) -> str:
    """Check an ``on_draw=`` argument."""
    if on_draw not in ON_DRAW:
        raise ValueError(f"unknown on_draw {on_draw!r}; choose from {', '.join(ON_DRAW)}")
    return on_draw
