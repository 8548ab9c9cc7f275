"""The raw store the hub writes while it records: raw tuples and interned stack ids.

Nothing here runs on the hot path except ``RawStore.add``. Frames are resolved
(code object + instruction offset -> file, line, function) once, when first
read. ``Trace`` (``trace.py``) is a RawStore with the readers, findings and
saved form on top.
"""

from __future__ import annotations

import collections
import itertools
import operator
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from . import _pids
from ._kinds import DRAW, NO_STACK, UNATTRIBUTED, RawEvent, used_stacks
from ._spool import FLUSH_MS

if TYPE_CHECKING:
    from ._model import Event, Frame, Process

_THREAD_OF = operator.itemgetter(5)  # a raw event's thread
_STREAM_OF = operator.itemgetter(0)  # a raw event's stream, or an overflow key's
_STREAM_KIND = operator.itemgetter(0, 1)  # a raw event's (stream, kind)
#: rows ``few_runs`` looks at first: more runs than an eighth of them, and the rows are counted one by one
_PROBE = 4096
_THREAD_KEYS = itertools.count(1)


def row_runs(raw: list[RawEvent]) -> list[tuple[RawEvent, int]]:
    """Each run of one row object kept again and again (a loop drawing on one line), as (row, its length), in order.

    A long log has many rows and few distinct ones: its readers count per run, not per row.
    The runs are found in C (rows grouped by identity); equal rows that are distinct
    objects make runs of their own.
    """
    return list(_each_run(raw))


def _each_run(raw: list[RawEvent]) -> Iterator[tuple[RawEvent, int]]:
    """``row_runs`` one at a time, each run counted without copying its rows."""
    for _id, rows in itertools.groupby(raw, key=id):
        first = next(rows)
        # A deque of length 1 over enumerate(...) counts the rest in C, keeping none of them.
        last = collections.deque(enumerate(rows, 2), maxlen=1)  # noqa: B031 (the rest of the run, read once)
        yield first, last[0][0] if last else 1


def new_thread_key() -> int:
    """A key no thread of this process has (a merged child's thread gets one too)."""
    return next(_THREAD_KEYS)


class RawStore:
    """What one traced block or call recorded, as the hub wrote it: raw tuples, interned stacks.

    The hub, the child-process spool and the analysis read and write it through
    these public methods; ``Trace`` adds what a user reads on top.
    """

    # What every trace starts with and few change, as class attributes: a store is made at every
    # traced call and block, and each assignment in __init__ is time that call pays.
    #: events not kept individually because max_events was reached
    dropped = 0
    #: the stack table's resolve, until the finished trace's stacks are first read
    _unresolved: Any = None
    _events: list[Event] | None = None
    #: ((the rows, their number), row_runs of them), once found for a finished trace
    _runs: tuple[tuple[list, int], list[tuple[RawEvent, int]]] | None = None
    #: (the rows, their number) where ``few_runs`` found most rows runs of their own
    _many_runs: tuple[list, int] | None = None
    #: ((the rows, their number), ``counts()``), once found for a finished trace
    _counts: tuple[tuple[list, int], dict[tuple[str, str], int]] | None = None
    #: set once by ``finish``; a late draw of another thread is dropped after it
    finished = False
    #: while recording: the hub's (resolve_stack, thread_names), to read events mid-block
    live: tuple | None = None
    _from_start = False

    def __init__(
        self,
        streams: Iterable[str] = (),
        depth: int = 16,
        max_events: int = 100_000,
    ) -> None:
        self.streams: tuple[str, ...] = tuple(streams)
        self.depth = depth
        self.max_events = max_events
        self.pid = _pids.pid()
        #: the traced process's parent (0 where a saved log did not say)
        self.ppid = _pids.ppid()
        self.notes: list[str] = []  # what the tracer could not watch, said in the log
        #: the pids of child processes already running when the trace began, which it cannot follow
        self.untraced: list[int] = []
        #: the kept raw events, in order (see ``RawEvent``)
        self.raw: list[RawEvent] = []
        #: (stream, kind, api, stack_id) -> [calls, values] for events beyond max_events; the stack is
        #: only the call-site form of the event's (``StackTable.capture_site``)
        self.overflow: dict[tuple, list[int]] = {}
        #: thread key -> thread name
        self.threads: dict[int, str] = {}
        self._stacks: dict[int, tuple[Frame, ...]] = {}
        # Child processes merged in (``merge_child``): their threads' pids, their stacks (ids below
        # NO_STACK, already resolved), the processes themselves, and where each process's
        # streams started anew: (pid, sub-stream, state digest, why, index of the next event).
        #: thread key -> pid, for the threads of merged child processes
        self.pids: dict[int, int] = {}
        self._child_stacks: dict[int, tuple[Frame, ...]] = {}
        #: the child processes merged in
        self.children: list[Process] = []
        #: (pid, sub-stream, state digest, why, index of the next event): where a process's streams started anew
        self.origins: list[tuple[int, str, str, str, int]] = []
        #: torch's determinism flags when the trace ended (read by the hub from the torch source); {} without torch
        self.settings: dict[str, bool] = {}

    # -- hot path ---------------------------------------------------------
    def add(self, raw: RawEvent) -> None:
        """Keep one raw event, or count it past ``max_events``."""
        if self.finished:
            return  # another thread's draw that overlapped the end of the block
        if len(self.raw) < self.max_events:
            self.raw.append(raw)
            return
        self.dropped += 1
        key = (raw[0], raw[1], raw[2], raw[4])
        slot = self.overflow.get(key)
        if slot is None:
            self.overflow[key] = [1, raw[3] or 0]
        else:
            slot[0] += 1
            slot[1] += raw[3] or 0

    def full(self) -> bool:
        """Whether an event now is only counted: past ``max_events``, with its stack's call-site form."""
        return len(self.raw) >= self.max_events

    def go_live(self, resolve_stack: Any, thread_names: dict[int, str]) -> None:
        """Let readers resolve events mid-block through the hub's stack table."""
        self.live = (resolve_stack, thread_names)

    # -- finishing (called by the hub once) -------------------------------
    def finish(self, resolve_stack: Any, thread_names: dict[int, str]) -> None:
        """Resolve interned stacks and thread idents into values.

        Another thread may still be appending (a draw that overlapped the block's
        end): the events are copied first, and a late one is dropped, never
        given a stack from another table.
        """
        self.finished = True
        # Copies made in C, in one step: the fast path's appends go to the old list.
        self.raw = raw = list(self.raw)
        self.overflow = dict(self.overflow)
        # Stacks are resolved into Frames when first read, not here: a decorated call whose
        # trace nobody reads (print=False) pays nothing for it. The table stays whole (it is
        # replaced, never cleared), so resolving later gives what resolving now would.
        self._unresolved = resolve_stack
        if raw:
            # The distinct threads first, in C: a long trace has few threads and many events. A loop,
            # not a comprehension: no frame of its own (3.10 and 3.11 make one per comprehension).
            threads: dict[int, str] = {}
            for t in set(map(_THREAD_OF, raw)):
                threads[t] = thread_names.get(t, f"thread-{t}")
            self.threads = threads
        self.live = None
        self._events = None

    def streams_with_events(self) -> set[str]:
        """The (sub-)streams this store has an event of."""
        found = set(map(_STREAM_OF, self.raw))  # in C: every block's end that saw a stream move asks
        if self.overflow:
            found.update(map(_STREAM_OF, self.overflow))
        return found

    # -- reading ------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        """Every kept event, in the order it happened."""
        if not self.finished and self.live is not None:
            return self._snapshot()
        if self._events is None:
            from ._model import build_events  # the value classes: made when read, never at a child's start

            self._events = build_events(self.raw, self.resolved_stacks(), self.threads, self.pid, self.pids)
        return self._events

    def resolved_stacks(self) -> dict[int, tuple[Frame, ...]]:
        """The finished trace's stacks as Frames, resolved on first use."""
        resolve = self._unresolved
        if resolve is not None:
            used = used_stacks(self.raw)
            used.update(key[3] for key in self.overflow)
            used.difference_update(self._child_stacks)
            self._stacks = {sid: resolve(sid, self.depth) for sid in used}
            self._stacks.update(self._child_stacks)
            self._unresolved = None
        return self._stacks

    def stack_map(self) -> dict[int, tuple[Frame, ...]]:
        """Stack id -> frames; resolved on the spot while the block is still recording."""
        if self.finished or self.live is None:
            return self.resolved_stacks()
        resolve = self.live[0]
        used = used_stacks(list(self.raw)) | {key[3] for key in list(self.overflow)}
        return {sid: resolve(sid, self.depth) for sid in used if sid >= 0}

    def _snapshot(self) -> list[Event]:
        """Events so far, resolved now: the block is still recording."""
        from ._model import build_events

        names = self.live[1]  # type: ignore[index]
        raws = list(self.raw)
        stacks = self.stack_map()
        return build_events(raws, stacks, names, self.pid)

    def load_fields(self, fields: Any) -> None:
        """Hold a saved log's checked fields (``_logfields.Fields``), as a finished store."""
        self.pid = fields.pid
        self.dropped = fields.dropped
        self.notes = fields.notes
        self._stacks = fields.stacks
        self.threads = fields.threads
        self.raw = fields.raw
        self.overflow = fields.overflow
        self.ppid = fields.ppid
        self.children = fields.children
        self.pids = fields.pids
        self.origins = fields.origins
        self.from_start = fields.from_start
        self.settings = fields.settings
        self.untraced = fields.untraced
        self.finished = True

    @property
    def processes(self) -> list[Process]:
        """Every process seen: the one that traced first, then each child merged in."""
        from ._model import Process

        mine = len(self) - sum(child.events for child in self.children)
        here = Process(self.pid, self.ppid, "traced", None, None, mine)
        return [here, *self.children]

    @property
    def from_start(self) -> bool:
        """Whether the trace saw the program from its start (``rngtrace run``): only then is a stream
        drawn from before any seed known to be unseeded."""
        return self._from_start

    @from_start.setter
    def from_start(self, value: bool) -> None:
        self._from_start = bool(value)
        self._forget()  # what is worked out from it is worked out again when next read

    def _forget(self) -> None:
        """Drop what was worked out from the events (a subclass drops its own too)."""
        self._events = None
        self._counts = None

    @property
    def draws(self) -> list[Event]:
        """The kept events of kind "draw"."""
        return [e for e in self.events if e.kind == DRAW]

    def __len__(self) -> int:
        return len(self.raw) + self.dropped

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def runs(self) -> Iterable[tuple[RawEvent, int]]:
        """``row_runs`` of the kept events; kept once found for a finished trace, which its readers ask several times.

        Kept only while the runs are few beside the rows: a log read back from a file has a
        row object per line, and a list of a million runs of one would double its memory;
        such a log's rows are walked again by each reader instead.
        """
        raw = self.raw
        key = (raw, len(raw))
        if self._runs is not None and self._rows_are(self._runs[0]):
            return self._runs[1]
        each = _each_run(raw)
        runs: list[tuple[RawEvent, int]] = []
        limit = len(raw) // 8 + 64
        for run in each:
            runs.append(run)
            if len(runs) > limit:
                return itertools.chain(runs, each)
        if self.finished and self.live is None:
            self._runs = (key, runs)
        return runs

    def _rows_are(self, key: tuple[list, int]) -> bool:
        """Whether the kept rows are still those of ``key`` (the list, its length), which something was worked out of.

        Rows are only ever appended (a child merged) or the list replaced.
        """
        return key[0] is self.raw and key[1] == len(self.raw)

    def few_runs(self) -> list[tuple[RawEvent, int]] | None:
        """``runs()`` where the kept events make few runs beside their rows; None where most rows are runs of their own.

        A log read back from a file has a row object per line, so a loop over 32 call sites is
        a run per row: its readers count the rows in C (``collections.Counter`` over an
        ``itemgetter``) rather than walk a million runs in Python, each reader again.
        """
        raw = self.raw
        if self._many_runs is not None and self._rows_are(self._many_runs):
            return None
        if self._runs is None or not self._rows_are(self._runs[0]):
            # Its first rows tell, before runs() walks an eighth of a million-row log to find out.
            head = raw[:_PROBE]
            if len(head) == _PROBE and sum(1 for _run in itertools.groupby(head, key=id)) > _PROBE // 8:
                self._many_runs = (raw, len(raw))
                return None
        runs = self.runs()
        if isinstance(runs, list):
            return runs
        self._many_runs = (raw, len(raw))
        return None

    def counts(self) -> dict[tuple[str, str], int]:
        """Events per (stream, kind), dropped ones included."""
        # Per run of one row: a log of 100,000 rows is read for its header and again for its elision line.
        key = (self.raw, len(self.raw))
        if self._counts is not None and self._rows_are(self._counts[0]):
            return dict(self._counts[1])
        runs = self.few_runs()
        out: dict[tuple[str, str], int]
        if runs is None:
            out = dict(collections.Counter(map(_STREAM_KIND, self.raw)))
        else:
            out = {}
            for raw, n in runs:
                out[raw[0], raw[1]] = out.get((raw[0], raw[1]), 0) + n
        for (stream, kind, _api, _sid), (calls, _values) in self.overflow.items():
            out[stream, kind] = out.get((stream, kind), 0) + calls
        if self.finished and self.live is None:  # nothing is added to a finished trace but a merged child's rows
            self._counts = (key, dict(out))
        return out

    # -- child processes ------------------------------------------------------
    def merge_child(self, log: Any) -> None:
        """Append a child's spooled events (``_childlogs.ChildLog``), keeping its pid.

        A child's events arrive with their stacks already resolved into frames and
        their threads named; here they become raw events with stack ids below
        ``NO_STACK`` (so they never meet the stack table's) and thread keys of their
        own that map to the child's pid.
        """
        from ._model import Frame, Process

        # The child's stack ids and thread keys, mapped once each to ids of this store's own.
        stacks = {local: NO_STACK - 1 - len(self._child_stacks) - i for i, local in enumerate(log.stacks)}
        for local, sid in stacks.items():
            frames = tuple(Frame(str(f), int(line), str(fn)) for f, line, fn in log.stacks[local])
            self._child_stacks[sid] = frames
            if self._unresolved is None:  # its stacks were read already: add these
                self._stacks[sid] = frames
        threads: dict[int, int] = {}
        for local in {raw[5] for raw in log.events}:
            key = threads[local] = new_thread_key()
            self.pids[key] = log.pid
            self.threads[key] = str(log.threads.get(local, f"thread-{local}"))
        sid_of = stacks.get
        merged = [(s, k, a, c, sid_of(sid, NO_STACK), threads[t], d) for s, k, a, c, sid, t, d in log.events]
        if UNATTRIBUTED in {raw[1] for raw in merged}:  # the noticing call's stack travels in the detail
            merged = [
                raw
                if raw[6].__class__ is not tuple
                else (*raw[:4], NO_STACK, raw[5], (raw[6][0], sid_of(raw[6][1], NO_STACK)))
                for raw in merged
            ]
        base = len(self.raw)
        kept = max(0, min(len(merged), self.max_events - base))
        self.raw += merged[:kept]
        for raw in merged[kept:]:
            self._count_over((raw[0], raw[1], raw[2], raw[4]), 1, raw[3] or 0)
        for stream, kind, api, local_sid, calls, values in log.overflow:
            self._count_over((stream, kind, api, sid_of(local_sid, NO_STACK)), calls, values)
        end = len(self.raw)
        for stream, digest, why, at in log.origins:
            # The first event at or after ``at`` that was kept, in the merged order.
            self.origins.append((log.pid, stream, digest, why, base + at if at < kept else end))
        events = len(log.events) + sum(row[4] for row in log.overflow)
        self.children.append(Process(log.pid, log.ppid, log.start, log.role, log.exit, events))
        if log.abrupt:
            # How, where its status says (a signal, an exit code); a process reaped by someone else says no more.
            how = f" ({log.exit})" if log.exit and log.exit != "ended abruptly" else ""
            self.notes.append(
                f"process {log.pid} ended abruptly{how} after spooling {events} event"
                f"{'' if events == 1 else 's'}: what it drew in its last {FLUSH_MS} ms is not in this log"
            )
        self._forget()

    def _count_over(self, key: tuple, calls: int, values: int) -> None:
        self.dropped += calls
        slot = self.overflow.get(key)
        if slot is None:
            self.overflow[key] = [calls, values]
        else:
            slot[0] += calls
            slot[1] += values
