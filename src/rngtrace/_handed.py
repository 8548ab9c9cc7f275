"""The states the streams' getters handed out while a trace recorded: putting one back is a restore.

A framework saves a stream's state and puts it back around work of its own (Lightning's
sanity check, ``torch.random.fork_rng``): the getter's wrapper remembers a digest of each
state it hands out (a hash, not a copy), the setter's wrapper asks here, and a match is
recorded as a restore rather than a reseed. Bounded per stream; forgotten once no trace
is active.

With each digest goes where it was saved, raw: the getter's calling code and line, and
how long each active trace's event list was then. Only a restore formats it (rare, where
getters are called at every compile): the line that saved the state, and how many of the
stream's events since then the restore undid (the findings leave those draws out).
"""

from __future__ import annotations

from itertools import islice
from types import CodeType
from typing import Any

from ._kinds import restore_detail

#: the digests kept per stream: a framework saves a few and puts them back
HANDED_LIMIT = 64

#: (the getter's calling code or None, its line, ((a trace's raw event list, its length then), ...))
Saved = tuple


class HandedStates:
    """stream -> the digests of the states its getters handed out, oldest first, the last HANDED_LIMIT."""

    def __init__(self) -> None:
        self._seen: dict[str, dict[Any, Saved]] = {}

    def hand_out(
        self, stream: str, digest: Any, code: CodeType | None = None, lineno: int = 0, active: tuple = ()
    ) -> None:
        """A getter called at ``code``'s ``lineno`` handed out ``stream``'s state with ``digest``.

        ``active``: the sessions recording now; their event lists' lengths mark the moment.
        """
        seen = self._seen.get(stream)
        if seen is None:
            seen = self._seen.setdefault(stream, {})
        seen.pop(digest, None)  # the newest last: the oldest goes first
        seen[digest] = (code, lineno, tuple((s.trace.raw, len(s.trace.raw)) for s in active))
        if len(seen) > HANDED_LIMIT:
            try:
                del seen[next(iter(seen))]
            except (KeyError, RuntimeError, StopIteration):  # another thread's hand_out got there first
                pass

    def was_handed(self, stream: str, digest: Any) -> bool:
        """Whether a getter handed out ``stream``'s state with ``digest`` since the traces began."""
        seen = self._seen.get(stream)
        return seen is not None and digest in seen

    def restore_detail(self, stream: str, digest: Any) -> str | None:
        """A restore's detail for putting back ``stream``'s state ``digest`` now; None: no getter handed it out.

        "" where the getter's line is unknown. Read before the restore is recorded: the
        events counted are the stream's since the state was saved, the longest count of
        any trace that was recording then.
        """
        seen = self._seen.get(stream)
        saved = seen.get(digest) if seen is not None else None
        if saved is None:
            return None
        code, lineno, marks = saved
        if code is None:
            return ""
        back = max((sum(1 for raw in islice(events, at, None) if raw[0] == stream) for events, at in marks), default=0)
        function = getattr(code, "co_qualname", code.co_name)  # 3.10 has no qualified names
        return restore_detail(back, code.co_filename, lineno, function)

    def forget(self) -> None:
        """No trace is active: the states handed out before belong to none."""
        self._seen = {}
