"""The states the streams' getters handed out while a trace recorded: putting one back is a restore.

A framework saves a stream's state and puts it back around work of its own (Lightning's
sanity check, ``torch.random.fork_rng``): the getter's wrapper remembers a digest of each
state it hands out (a hash, not a copy), the setter's wrapper asks here, and a match is
recorded as a restore rather than a reseed. Bounded per stream; forgotten once no trace
is active.
"""

from __future__ import annotations

from typing import Any

#: the digests kept per stream: a framework saves a few and puts them back
HANDED_LIMIT = 64


class HandedStates:
    """stream -> the digests of the states its getters handed out, oldest first, the last HANDED_LIMIT."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[Any, None]] = {}

    def hand_out(self, stream: str, digest: Any) -> None:
        """A getter handed out ``stream``'s state with ``digest``: putting it back later is a restore."""
        seen = self._seen.get(stream)
        if seen is None:
            seen = self._seen.setdefault(stream, {})
        seen.pop(digest, None)  # the newest last: the oldest goes first
        seen[digest] = None
        if len(seen) > HANDED_LIMIT:
            try:
                del seen[next(iter(seen))]
            except (KeyError, RuntimeError, StopIteration):  # another thread's hand_out got there first
                pass

    def was_handed(self, stream: str, digest: Any) -> bool:
        """Whether a getter handed out ``stream``'s state with ``digest`` since the traces began."""
        seen = self._seen.get(stream)
        return seen is not None and digest in seen

    def forget(self) -> None:
        """No trace is active: the states handed out before belong to none."""
        self._seen = {}
