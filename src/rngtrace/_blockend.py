"""What the hub reads as a block ends: the moves no call made, and each library's settings.

The never-silent check: a stream's quick state (``Source.snapshot()``) at the start
of a block is compared with its state at the end; one that moved, where no event of
the block explains the move, gets an unattributed event, at the line that ended the
block. So a stream moved by a call no wrapper saw (a reference bound before tracing,
C code drawing) is never silent, even where the catch-all could not name the caller.
"""

from __future__ import annotations

import sys
from types import FrameType
from typing import Any

from ._hublock import call_if_free
from ._kinds import SEED
from ._store import RawStore
from .sources import Source, module_of, source_class
from .sources._base import same_state, unmoved


def check_moved(rec: Any, session: Any, frame: FrameType | None) -> None:
    """Record an unattributed event for each stream that moved with no recorded cause."""
    explained: set | None = None
    sources, fingerprints = rec.sources, rec.fingerprints
    for name, before in session.start_states.items():
        source = sources.get(name)
        if source is None:
            continue
        fingerprint = fingerprints.get(name)  # moved_since_recorded, inline: every block's end asks, per stream
        if (
            fingerprint is None
            or fingerprint.last is None
            or (view := fingerprint.view) is None
            or fingerprint.last == view.value
        ):
            now = source.snapshot()
            if unmoved(source, before, now):
                # Where nothing moved there is nothing to report, whatever another thread is
                # doing: only a stream that moved needs its lock to tell who moved it.
                continue
            if explained is None:  # the streams with an event: made only once one moved
                explained = session.trace.streams_with_events()
            if _all_in(now, explained):
                continue  # each sub-stream has an event, and none moved after its last one
        elif explained is None:
            explained = session.trace.streams_with_events()
        # Another thread inside a recorded call holds the stream's lock: its draw has moved
        # the stream and is about to be recorded. Comparing now would report that move as
        # unattributed, and waiting could deadlock (a wrapper may want the hub's lock), so
        # the stream is left to that call, which rebases the fingerprint when it is done.
        call_if_free(rec.stream_lock(name), _check_stream, rec, session, name, before, source, frame, explained)


def _check_stream(
    rec: Any, session: Any, name: str, before: dict, source: Any, frame: FrameType | None, explained: set
) -> None:
    """The end-of-block check for one stream (its lock held).

    Its notes end in ``trace.BLOCK_END``: a reader closes their windows at the block's end.
    """
    raws = session.trace.raw
    if moved_since_recorded(rec.fingerprints.get(name)):
        rec.unattributed(name, frame, "moved after the last recorded event; noticed when the block ended")
        explained.add(name)
    states = source.snapshot()  # again, now under the lock: the read without it only said "moved"
    for raw in raws:  # a loop, not any() over a generator: see sources._source.unmoved
        if raw[0] == name and raw[1] == SEED:
            # torch.manual_seed() is one event on "torch" and reseeds every CUDA device too
            explained.update(states)
            break
    for stream, state in states.items():
        old = before.get(stream)
        if stream in explained or (old is not None and same_state(source, old, state)):
            continue
        note = (
            "moved during the block with no recorded call; noticed when the block ended"
            if old is not None
            else "appeared during the block with no recorded call; noticed when the block ended"
        )
        # For this trace alone: another active trace compares its own start states.
        session.trace.add(rec.moved_event(stream, frame, note, session.trace.depth))
        rec.note_prebound(name, frame, [session.trace])


def moved_since_recorded(fingerprint: Any) -> bool:
    """Whether a stream's fingerprint moved after its last recorded call (False where it cannot tell)."""
    return (
        fingerprint is not None
        and fingerprint.view is not None
        and fingerprint.last is not None
        and fingerprint.last != fingerprint.view.value
    )


def _all_in(states: dict, streams: set) -> bool:
    # A loop, not all() over a generator: see sources._source.unmoved.
    for stream in states:
        if stream not in streams:
            return False
    return True


#: stream -> [the module whose import makes it exist, its source class's ``settings`` where it
#: overrides it, None where it does not (its library has no flags), _UNREAD until its library is
#: imported at a trace's end]; a declaration and a class never change within a process
_READERS: dict[str, list] = {}
_UNREAD = object()


def read_settings(trace: RawStore) -> None:
    """Each traced library's flags at the trace's end (torch's determinism), where it has an event."""
    if not trace.raw and not trace.overflow:
        return  # no event: no library to read (most decorated calls)
    touched: set[str] | None = None
    modules = sys.modules
    for name in trace.streams:
        entry = _READERS.get(name)
        if entry is None:
            # module_of: a stream never imported needs no declaration read (a traced child's end).
            entry = _READERS[name] = [module_of(name), _UNREAD]
        reader = entry[1]
        if reader is None or modules.get(entry[0]) is None:
            continue  # no flags (random, numpy: most traces stop here), or the library is not imported
        if reader is _UNREAD:
            cls = source_class(name)
            # Whose ``settings`` the class has: the base's reads nothing.
            owner = next(base for base in cls.__mro__ if "settings" in base.__dict__)
            reader = entry[1] = cls.settings if owner is not Source else None
            if reader is None:
                continue
        if touched is None:  # the libraries with an event, from one pass over the events (not one per stream)
            touched = {stream.split(".", 1)[0] for stream in trace.streams_with_events()}
        if name in touched:
            trace.settings.update(reader())
