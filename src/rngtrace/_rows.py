"""A finished store's events read row by row: an Event made for each row read, never one held per row.

``trace.events`` holds an Event for every kept row; a log of millions read that way
is held several times over. The findings and the renderers read ``EventRows``
instead: ``walk`` gives each row's index with one Event shared by rows alike (a
loop's draws), ``alike`` one Event per distinct row, and ``per_stack`` works out
what depends only on a call's stack once per stack. Each also takes a plain list of
Events (a trace still recording), with the same results.
"""

from __future__ import annotations

import bisect
import collections
import itertools
import operator
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, overload

from ._model import DRAW, UNATTRIBUTED, Event, Frame, RawEvent, Window, move_windows

_KIND_OF = operator.itemgetter(1)
_THREAD_OF = operator.itemgetter(5)
#: the most distinct rows ``EventRows`` keeps an Event for (each far smaller than the rows it stands for)
_ALIKE = 1 << 18


class EventRows(Sequence[Event]):
    """A finished store's events, each made when it is read: a log of millions is never held as Events.

    ``trace.events`` (``build_events``) holds every Event; the findings and the renderers read this
    instead, where they walk every row (``rows``) or read a few by index.
    """

    def __init__(
        self,
        raws: list[RawEvent],
        stacks: dict[int, tuple[Frame, ...]],
        threads: dict[int, str],
        pid: int,
        pids: dict[int, int] | None = None,
    ) -> None:
        self.raws = raws
        self.stacks = stacks
        self.threads = threads
        self.pid = pid
        self.pids = pids or {}
        self._windows: dict[int, Window] | None = None
        #: row -> the Event that stands for it and every row alike, shared by every walk of ``rows``
        self._alike: dict[RawEvent, Event] = {}
        #: the indexes of the rows that are no draw (seeds, moves: few), found on the first walk that wants them
        self._not_draws: list[int] | None = None
        self._first: dict[Any, int] | None = None

    def __len__(self) -> int:
        return len(self.raws)

    @overload
    def __getitem__(self, i: int) -> Event: ...
    @overload
    def __getitem__(self, i: slice) -> list[Event]: ...
    def __getitem__(self, i: int | slice) -> Event | list[Event]:
        if isinstance(i, slice):
            return [self.event(j) for j in range(*i.indices(len(self.raws)))]
        if i < 0:
            i += len(self.raws)
        if not 0 <= i < len(self.raws):
            raise IndexError("event index out of range")
        return self.event(i)

    def __iter__(self) -> Iterator[Event]:
        return map(self.event, range(len(self.raws)))

    def event(self, i: int) -> Event:
        """The Event of row ``i``, as ``build_events`` makes it."""
        s, k, a, c, sid, t, d = self.raws[i]
        p = self.pids.get(t, self.pid)
        if k == UNATTRIBUTED:
            if self._windows is None:
                self._windows = move_windows(self.raws, self.stacks, self.pids)
            window = self._windows.get(i)
            if window is not None:
                return Event(i, s, k, a, c, (), self.threads.get(t, str(t)), p, str(window), window)
        return Event(i, s, k, a, c, self.stacks.get(sid, ()), self.threads.get(t, str(t)), p, d)

    def first_rows(self) -> dict[Any, int]:
        """Each distinct row -> the index of its first occurrence, in that order (worked out once)."""
        if self._first is None:
            first: dict[Any, int] = {}
            try:
                collections.deque(map(first.setdefault, self.raws, itertools.count()), maxlen=0)  # in C
            except TypeError:  # a row with a part that cannot be hashed (none a recorder writes): each its own
                first = {}
                for i, raw in enumerate(self.raws):
                    try:
                        first.setdefault(raw, i)
                    except TypeError:
                        first[i] = i
            self._first = first
        return self._first

    def rows(self, kinds: Any = None, start: int = 0) -> Iterator[tuple[int, Event]]:
        """(index, an Event for the row) for every row from ``start`` on, or every such row of ``kinds``.

        Rows alike (a loop's draws) share one Event, whose ``index`` is the first such row's:
        read the index from the pair, and ``self[index]`` for an Event to keep.
        """
        alike = self._alike
        indexes: Iterable[int] = range(start, len(self.raws))
        if kinds is not None and DRAW not in kinds:  # seeds and moves only: the draws, most rows, are skipped
            if self._not_draws is None:
                self._not_draws = [i for i, kind in enumerate(map(_KIND_OF, self.raws)) if kind != DRAW]
            indexes = self._not_draws[bisect.bisect_left(self._not_draws, start) :]
        raws = self.raws
        for i in indexes:
            raw = raws[i]
            kind = raw[1]
            if kinds is not None and kind not in kinds:
                continue
            try:
                e = alike.get(raw) if kind != UNATTRIBUTED else None  # a move's window is its own
                if e is None:
                    e = self.event(i)
                    if kind != UNATTRIBUTED and len(alike) < _ALIKE:
                        alike[raw] = e
            except TypeError:  # a row with a part that cannot be hashed (none a recorder writes): its own Event
                e = self.event(i)
            yield i, e


def alike(events: Sequence[Event], kinds: Any = None) -> Iterator[Event]:
    """One Event for each distinct row of ``events`` (of ``kinds``), in the order they first occur:
    for what depends on a row's contents, never on its index or how often it occurs."""
    if not isinstance(events, EventRows):
        return (e for e in events if kinds is None or e.kind in kinds)
    first = events.first_rows()
    return (events.event(i) for i in first.values() if kinds is None or events.raws[i][1] in kinds)


def kind_count(events: Sequence[Event], kind: str, start: int, stop: int) -> int:
    """How many of ``events[start:stop]`` are of ``kind``, no Event made for them."""
    if not isinstance(events, EventRows):
        return sum(e.kind == kind for e in events[start:stop])
    return sum(map(kind.__eq__, map(_KIND_OF, itertools.islice(events.raws, start, stop))))


def event_pids(events: Sequence[Event]) -> set[int]:
    """The pids that made ``events``."""
    if not isinstance(events, EventRows):
        return {e.pid for e in events}
    return {events.pids.get(t, events.pid) for t in set(map(_THREAD_OF, events.raws))}


def walk(events: Sequence[Event], kinds: Any = None, start: int = 0) -> Iterator[tuple[int, Event]]:
    """(index, event) for every event of ``events`` from ``start`` on (of ``kinds``): ``EventRows.rows``,
    or the events of a list."""
    if isinstance(events, EventRows):
        return events.rows(kinds, start)
    return ((e.index, e) for e in itertools.islice(events, start, None) if kinds is None or e.kind in kinds)


def per_stack(work: Any) -> Any:
    """``work(event)`` for a ``work`` that reads only an event's stack, api and stream: worked out once for
    each, not once per row (a loop's draws share their stack)."""
    memo: dict[
        tuple, tuple[tuple, Any]
    ] = {}  # (id(stack), api, stream) -> (the stack, kept so its id stays its own; value)

    def once(event: Event) -> Any:
        stack = event.stack
        key = (id(stack), event.api, event.stream)
        hit = memo.get(key)
        if hit is not None and hit[0] is stack:
            return hit[1]
        value = work(event)
        memo[key] = (stack, value)
        return value

    return once


def event_rows(store: Any) -> Sequence[Event]:
    """A store's events for reading row by row: an ``EventRows`` once finished, its ``events`` while it records."""
    if not store.finished and store.live is not None:
        return store.events
    return EventRows(store.raw, store.resolved_stacks(), store.threads, store.pid, store.pids)
