"""The recorded data: Trace, Event, Frame, Statistic, and their JSON form.

The hub appends raw tuples to a Trace while it records; nothing here runs on the
hot path except ``Trace._add``. Frames are resolved (code object + instruction
offset -> file, line, function) once, when the trace is finished.
"""

from __future__ import annotations

import json
import operator
import os
import sys
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ._errors import LogError

FORMAT = "rngtrace"
FORMAT_VERSION = 2  # 2: the processes a trace saw (1 still loads)

DRAW = "draw"
SEED = "seed"
UNATTRIBUTED = "unattributed"
KINDS = (DRAW, SEED, UNATTRIBUTED)

#: the stack id of an event with no stack (an unattributed move: no recorded call made it)
NO_STACK = -1
#: how the end-of-block check's notes end: the window then closes at the block's end, not at a call
#: the seeding functions that draw their seed from OS entropy when given none
ENTROPY_SEEDERS = frozenset({"seed", "seed_all"})
_THREAD_OF = operator.itemgetter(5)  # a raw event's thread
BLOCK_END = "noticed when the block ended"


@dataclass(frozen=True)
class Frame:
    """One line of a stack: where a call was made."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"


@dataclass(frozen=True)
class Window:
    """Where an unattributed move happened: after one event of its stream, before the call that noticed it.

    Nothing recorded the move, so no line is blamed: the window is bounded by the
    stream's last event before it and by the call (or the block's end) that found
    the stream moved. Events are named by index, so a window never holds another
    Event and a long run of moves stays a flat list.
    """

    #: the index of the stream's last event before the move; None: none since the trace began
    after: int | None
    #: that event's calling line (for an unattributed one: where it was noticed)
    after_frame: Frame | None
    #: the index of the event the noticing call made; None where it made none (the block's end)
    noticed_by: int | None
    #: the stack of the call, or of the block's end, where the move was noticed
    noticed: tuple[Frame, ...]
    #: how the move was noticed, as recorded ("moved since the previous recorded event; noticed before ...")
    note: str | None

    @property
    def at_end(self) -> bool:
        """Whether the end-of-block check noticed the move, rather than a recorded call."""
        return self.note is not None and self.note.endswith(BLOCK_END)

    @property
    def appeared(self) -> bool:
        """Whether the stream itself appeared (a CUDA device's generator) rather than moved."""
        return self.note is not None and self.note.startswith("appeared")

    def __str__(self) -> str:
        start = "the start of the trace" if self.after is None else _place(self.after, self.after_frame)
        noticed = self.noticed[0] if self.noticed else None
        if self.noticed_by is not None:
            end = _place(self.noticed_by, noticed)
        elif self.at_end:
            end = f"the end of the block ({noticed})" if noticed else "the end of the block"
        else:
            end = f"the call at {noticed}" if noticed else "a call from C code"
        return f"between {start} and {end}" + (f": {self.note}" if self.note else "")


def _place(index: int, frame: Frame | None) -> str:
    return f"#{index} ({frame})" if frame is not None else f"#{index}"


@dataclass(frozen=True)
class Event:
    """One draw, reseed or unexplained move of a global stream."""

    index: int
    stream: str
    kind: str
    api: str
    count: int | None
    stack: tuple[Frame, ...]  # empty for an unattributed move: no recorded call made it
    thread: str
    pid: int
    #: the seed value for a seed; for an unattributed move, its window in words
    detail: str | None = None
    #: for an unattributed move: the events and lines around it (``detail`` says the same in words)
    window: Window | None = None

    @property
    def frame(self) -> Frame | None:
        """The frame that called the random API (innermost), or None."""
        return self.stack[0] if self.stack else None

    @property
    def compiled(self) -> bool:
        """Whether the call was made by code torch.compile compiled (Inductor's seeds, say), not by a line of Python."""
        return any(
            # The wrapper torch.compile puts around what it compiles (not a disabled region's);
            # 3.10 records no qualified names.
            (f.function.startswith("_TorchDynamoContext.__call__") or f.function == "compile_wrapper")
            and f.filename.replace("\\", "/").endswith("torch/_dynamo/eval_frame.py")
            for f in self.stack
        )

    @property
    def from_entropy(self) -> bool:
        """A seed given no value by a function that then seeds from OS entropy (``random.seed()``).

        Only the ``seed`` functions do: a restore (``set_state``, ``setstate``) or
        ``manual_seed`` the catch-all recorded without its argument is no entropy seed.
        """
        return (self.kind == SEED and self.detail in (None, "None")
                and self.api.rsplit(".", 1)[-1] in ENTROPY_SEEDERS)


@dataclass(frozen=True)
class Statistic:
    """Events grouped by call site: how many calls, how many values drawn."""

    stream: str
    kind: str
    api: str
    stack: tuple[Frame, ...]
    calls: int
    values: int

    @property
    def frame(self) -> Frame | None:
        return self.stack[0] if self.stack else None


@dataclass(frozen=True)
class Process:
    """One process a trace saw: the one that traced, and each child whose events were merged in."""

    pid: int
    ppid: int
    #: how it started: "traced" (the process that ran the block), "fork", "spawn", ...
    start: str
    #: what it was, where a library says so ("DataLoader worker 1", "pool worker"), else None
    role: str | None
    #: how it ended: "normal", "exit code N", "killed by signal N", "ended abruptly"; None while running
    exit: str | None
    #: its events, dropped ones included
    events: int


@dataclass(frozen=True)
class Finding:
    """A conclusion drawn from the events: what made the run irreproducible, and what to change."""

    kind: str
    stream: str
    pids: tuple[int, ...]
    message: str
    #: indexes into ``trace.events`` of the events it rests on
    events: tuple[int, ...]
    fix: str = ""


# Raw event: (stream, kind, api, count, stack_id, thread_ident, detail). An unattributed
# move's stack_id is NO_STACK and its detail (note, stack id of the call that noticed it);
# the window's other end, the stream's previous event, is found in the order when read.
RawEvent = tuple


def _moved_parts(raw: RawEvent) -> tuple[str | None, int]:
    """(note, noticing stack id) of an unattributed raw event.

    A detail that is not a pair comes from code that still records the move the old
    way, with the noticing call's stack as the event's own: it is read the same way.
    """
    detail = raw[6]
    if detail.__class__ is tuple:
        return detail
    return detail, raw[4]


def _used_stacks(raws: Iterable[RawEvent]) -> set[int]:
    """Every stack id the raw events refer to, the calls that noticed a move included."""
    used = {raw[4] for raw in raws}
    used.update(_moved_parts(raw)[1] for raw in raws if raw[1] == UNATTRIBUTED)
    used.discard(NO_STACK)
    return used


def _build_events(raws: list[RawEvent], stacks: dict[int, tuple[Frame, ...]], threads: dict[int, str],
                  pid: int, pids: dict[int, int] | None = None) -> list[Event]:
    """Events from raw tuples; each unattributed move gets its window, from the order around it.

    ``pids``: thread key -> pid for the threads of merged child processes (the rest are ``pid``'s).
    """
    pids = pids or {}
    windows = _windows(raws, stacks, pids)
    events = []
    for i, (s, k, a, c, sid, t, d) in enumerate(raws):
        window = windows.get(i)
        p = pids.get(t, pid)
        if window is not None:
            events.append(Event(i, s, k, a, c, (), threads.get(t, str(t)), p, str(window), window))
        else:
            events.append(Event(i, s, k, a, c, stacks.get(sid, ()), threads.get(t, str(t)), p, d))
    return events


def _windows(raws: list[RawEvent], stacks: dict[int, tuple[Frame, ...]],
             pids: dict[int, int] | None = None) -> dict[int, Window]:
    """raw index -> Window, for every unattributed move in ``raws``.

    A window opens at the last event of the move's stream before it (a seed of its
    library counts: torch.manual_seed reseeds every device). It closes at the
    event the noticing call made, the next one its thread recorded when that has
    the noticing stack; a call that made none (the block's end) closes it by line.
    """
    if not any(raw[1] == UNATTRIBUTED for raw in raws):
        return {}
    found: dict[int, list[Any]] = {}  # index -> [after, its line, noticing stack, note, noticing event]
    last: dict[str, int] = {}  # stream -> index of its latest event so far
    last_seed: dict[str, int] = {}  # library -> index of its latest seed so far
    waiting: dict[Any, list[int]] = {}  # thread -> its moves whose noticing call's event may come next
    lines: list[Frame | None] = []  # per index: the line that stands for that event in a later window
    for i, raw in enumerate(raws):
        stream, kind, thread = raw[0], raw[1], raw[5]
        if pids and thread in pids:
            stream = (pids[thread], stream)  # a child's stream moves apart from the parent's
        if kind == UNATTRIBUTED:
            note, noticed = _moved_parts(raw)
            frames = stacks.get(noticed, ())
            base = _base_of(stream)
            after = max(last.get(stream, -1), last_seed.get(base, -1) if base != stream else -1)
            found[i] = [after, lines[after] if after >= 0 else None, frames, note, None]
            waiting.setdefault(thread, []).append(i)
        else:
            frames = stacks.get(raw[4], ())
            # The thread's next event is the noticing call's own when it was made at the noticing stack.
            for j in waiting.pop(thread, ()):
                if frames and found[j][2] == frames:
                    found[j][4] = i
            if kind == SEED:
                last_seed[stream] = i  # type: ignore[index]
        lines.append(frames[0] if frames else None)
        last[stream] = i
    return {
        i: Window(after if after >= 0 else None, line, noticed_by, frames, note)
        for i, (after, line, frames, note, noticed_by) in found.items()
    }


def _base_of(stream: Any) -> Any:
    """The library stream of a (sub-)stream name, or of a (pid, name) pair."""
    if stream.__class__ is tuple:
        return (stream[0], stream[1].split(".", 1)[0])
    return stream.split(".", 1)[0]


class Trace:
    """Everything one traced block or call recorded, in order."""

    def __init__(
        self,
        streams: Iterable[str] = (),
        depth: int = 16,
        max_events: int = 100_000,
    ) -> None:
        self.streams: tuple[str, ...] = tuple(streams)
        self.depth = depth
        self.max_events = max_events
        self.pid = os.getpid()
        #: the traced process's parent (0 where a saved log did not say)
        self.ppid = os.getppid()
        #: events not kept individually because max_events was reached
        self.dropped = 0
        self.notes: list[str] = []  # what the tracer could not watch, said in the log
        #: the pids of child processes already running when the trace began, which it cannot follow
        self.untraced: list[int] = []
        self._raw: list[RawEvent] = []
        # (stream, kind, api, stack_id) -> [calls, values] for events beyond max_events
        self._overflow: dict[tuple, list[int]] = {}
        self._threads: dict[int, str] = {}
        self._stacks: dict[int, tuple[Frame, ...]] = {}
        #: the stack table's resolve, until the finished trace's stacks are first read
        self._unresolved: Any = None
        self._events: list[Event] | None = None
        self._finished = False
        # While recording: the hub's (resolve_stack, thread_names), to read events mid-block.
        self._live: tuple | None = None
        # Child processes merged in (see _merge): their threads' pids, their stacks (ids below
        # NO_STACK, already resolved), the processes themselves, and where each process's
        # streams started anew: (pid, sub-stream, state digest, why, index of the next event).
        self._pids: dict[int, int] = {}
        self._child_stacks: dict[int, tuple[Frame, ...]] = {}
        self._children: list[Process] = []
        self._origins: list[tuple[int, str, str, str, int]] = []
        self._from_start = False
        #: torch's determinism flags when the trace ended (``_findings.read_settings``); {} without torch
        self.settings: dict[str, bool] = {}
        self._findings: list[Finding] | None = None

    # -- hot path ---------------------------------------------------------
    def _add(self, raw: RawEvent) -> None:
        if self._finished:
            return  # another thread's draw that overlapped the end of the block
        if len(self._raw) < self.max_events:
            self._raw.append(raw)
            return
        self.dropped += 1
        key = (raw[0], raw[1], raw[2], raw[4])
        slot = self._overflow.get(key)
        if slot is None:
            self._overflow[key] = [1, raw[3] or 0]
        else:
            slot[0] += 1
            slot[1] += raw[3] or 0

    # -- finishing (called by the hub once) -------------------------------
    def _finish(self, resolve_stack, thread_names: dict[int, str]) -> None:
        """Resolve interned stacks and thread idents into values.

        Another thread may still be appending (a draw that overlapped the block's
        end): the events are copied first, and a late one is dropped, never
        given a stack from another table.
        """
        self._finished = True
        # Copies made in C, in one step: the fast path's appends go to the old list.
        self._raw = raw = list(self._raw)
        self._overflow = dict(self._overflow)
        # Stacks are resolved into Frames when first read, not here: a decorated call whose
        # trace nobody reads (print=False) pays nothing for it. The table stays whole (it is
        # replaced, never cleared), so resolving later gives what resolving now would.
        self._unresolved = resolve_stack
        if raw:
            # The distinct threads first, in C: a long trace has few threads and many events.
            self._threads = {t: thread_names.get(t, f"thread-{t}") for t in set(map(_THREAD_OF, raw))}
        self._live = None
        self._events = None
        # torch's determinism flags, read once here and only where torch drew or was seeded.
        if (raw or self._overflow) and "torch" in self.streams and "torch" in sys.modules and (
                any(r[0][:5] == "torch" for r in raw) or any(k[0][:5] == "torch" for k in self._overflow)):
            from ._findings import read_settings

            self.settings = read_settings()

    # -- reading ------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        """Every kept event, in the order it happened."""
        if not self._finished and self._live is not None:
            return self._snapshot()
        if self._events is None:
            self._events = _build_events(self._raw, self._resolved(), self._threads, self.pid, self._pids)
        return self._events

    def _resolved(self) -> dict[int, tuple[Frame, ...]]:
        """The finished trace's stacks as Frames, resolved on first use."""
        resolve = self._unresolved
        if resolve is not None:
            used = _used_stacks(self._raw)
            used.update(key[3] for key in self._overflow)
            used.difference_update(self._child_stacks)
            self._stacks = {sid: resolve(sid, self.depth) for sid in used}
            self._stacks.update(self._child_stacks)
            self._unresolved = None
        return self._stacks

    def _stack_map(self) -> dict[int, tuple[Frame, ...]]:
        """Stack id -> frames; resolved on the spot while the block is still recording."""
        if self._finished or self._live is None:
            return self._resolved()
        resolve = self._live[0]
        used = _used_stacks(list(self._raw)) | {key[3] for key in list(self._overflow)}
        return {sid: resolve(sid, self.depth) for sid in used if sid >= 0}

    def _snapshot(self) -> list[Event]:
        """Events so far, resolved now: the block is still recording."""
        names = self._live[1]  # type: ignore[index]
        raws = list(self._raw)
        stacks = self._stack_map()
        return _build_events(raws, stacks, names, self.pid)

    @property
    def processes(self) -> list[Process]:
        """Every process seen: the one that traced first, then each child merged in."""
        mine = len(self) - sum(child.events for child in self._children)
        here = Process(self.pid, self.ppid, "traced", None, None, mine)
        return [here, *self._children]

    @property
    def from_start(self) -> bool:
        """Whether the trace saw the program from its start (``rngtrace run``): only then is a stream
        drawn from before any seed known to be unseeded."""
        return self._from_start

    @from_start.setter
    def from_start(self, value: bool) -> None:
        self._from_start = bool(value)
        self._findings = None  # worked out again when next read

    @property
    def findings(self) -> list[Finding]:
        """What made the run irreproducible and what to change, worked out when first read (see _findings)."""
        if not self._finished and self._live is not None:
            from ._findings import findings

            return findings(self)  # still recording: not kept
        if self._findings is None:
            from ._findings import findings

            self._findings = findings(self)
        return self._findings

    def _merge_child(self, log: Any) -> None:
        """Add a child process's spooled events (``_processes.ChildLog``), keeping its pid."""
        from ._merge import merge_child

        merge_child(self, log)
        self._events = None
        self._findings = None

    @property
    def draws(self) -> list[Event]:
        """The kept events of kind "draw"."""
        return [e for e in self.events if e.kind == DRAW]

    def __len__(self) -> int:
        return len(self._raw) + self.dropped

    def __iter__(self) -> Iterator[Event]:
        return iter(self.events)

    def counts(self) -> dict[tuple[str, str], int]:
        """Events per (stream, kind), dropped ones included."""
        out: dict[tuple[str, str], int] = {}
        for raw in self._raw:
            out[raw[0], raw[1]] = out.get((raw[0], raw[1]), 0) + 1
        for (stream, kind, _api, _sid), (calls, _values) in self._overflow.items():
            out[stream, kind] = out.get((stream, kind), 0) + calls
        return out

    def statistics(self, key_type: str = "lineno", kind: str = DRAW) -> list[Statistic]:
        """Group events of one kind by call site, most calls first.

        ``key_type`` is ``"lineno"`` (the frame that called the API) or
        ``"traceback"`` (the whole recorded stack), as in tracemalloc.
        """
        if key_type not in ("lineno", "traceback"):
            raise ValueError(f"unknown key_type {key_type!r}; choose from 'lineno', 'traceback'")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        groups: dict[tuple, list[Any]] = {}
        stacks = self._stack_map()

        def add(stream: str, api: str, stack: tuple[Frame, ...], calls: int, values: int) -> None:
            site = stack if key_type == "traceback" else stack[:1]
            slot = groups.setdefault((stream, api, site), [stack, 0, 0])
            slot[1] += calls
            slot[2] += values

        for raw in self._raw:
            if raw[1] == kind:
                add(raw[0], raw[2], stacks.get(raw[4], ()), 1, raw[3] or 0)
        for (stream, k, api, sid), (calls, values) in self._overflow.items():
            if k == kind:
                add(stream, api, stacks.get(sid, ()), calls, values)
        stats = [
            Statistic(stream, kind, api, stack if key_type == "traceback" else stack[:1], calls, values)
            for (stream, api, _site), (stack, calls, values) in groups.items()
        ]
        stats.sort(key=lambda s: (-s.calls, -s.values, s.stream, s.api))
        return stats

    # -- serialisation ------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict; ``Trace.from_dict`` reads it back."""
        stack_ids = sorted(self._resolved())
        index = {sid: i for i, sid in enumerate(stack_ids)}
        return {
            "format": FORMAT,
            "version": FORMAT_VERSION,
            "pid": self.pid,
            "streams": list(self.streams),
            "depth": self.depth,
            "max_events": self.max_events,
            "dropped": self.dropped,
            "notes": list(self.notes),
            "stacks": [
                [[f.filename, f.lineno, f.function] for f in self._stacks[sid]] for sid in stack_ids
            ],
            "threads": {str(k): v for k, v in self._threads.items()},
            "events": [_saved_event(raw, index) for raw in self._raw],
            "overflow": [
                [s, k, a, index.get(sid, -1), calls, values]
                for (s, k, a, sid), (calls, values) in self._overflow.items()
            ],
            # Version 2: the child processes merged in, their threads' pids, and where each
            # process's streams started anew (what the duplicate finding is drawn from).
            "ppid": self.ppid,
            "processes": [[p.pid, p.ppid, p.start, p.role, p.exit, p.events] for p in self._children],
            "pids": {str(k): v for k, v in self._pids.items()},
            "origins": [list(origin) for origin in self._origins],
            # Read by the findings: whether the trace saw the program start, torch's flags at its end.
            "from_start": self.from_start,
            "settings": dict(self.settings),
            "untraced": list(self.untraced),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        """Rebuild a finished Trace from ``to_dict()`` output; raise ``LogError`` naming the first bad field."""
        from ._logfile import LogDamage, check

        try:
            version = _newer_version(data)
        except LogError:
            raise LogError("not an rngtrace log: expected a dict with \"format\": \"rngtrace\"") from None
        if version is not None:
            raise LogError(f"rngtrace log version {version} is newer than this rngtrace reads ({FORMAT_VERSION}); "
                           "upgrade rngtrace")
        try:
            fields = check(data)
        except LogDamage as damage:
            raise LogError(f"truncated or damaged rngtrace log ({damage}); record it again") from None
        return cls._from_fields(fields)

    @classmethod
    def _from_fields(cls, fields: Any) -> Trace:
        """A finished Trace holding a log's checked fields (``_logfile.Fields``)."""
        trace = cls(fields.streams, fields.depth, fields.max_events)
        trace.pid = fields.pid
        trace.dropped = fields.dropped
        trace.notes = fields.notes
        trace._stacks = fields.stacks
        trace._threads = fields.threads
        trace._raw = fields.raw
        trace._overflow = fields.overflow
        trace.ppid = fields.ppid
        trace._children = fields.children
        trace._pids = fields.pids
        trace._origins = fields.origins
        trace.from_start = fields.from_start
        trace.settings = fields.settings
        trace.untraced = fields.untraced
        trace._finished = True
        return trace

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trace to ``path`` as a JSON log that ``Trace.load`` reads back."""
        if self._live is not None and not self._finished:
            raise RuntimeError("this trace is still recording; save it after its block ends")
        # backslashreplace: a lone surrogate (a file name that is not UTF-8) is written as its JSON escape.
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
            out.write(_dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, max_size: int | None = None) -> Trace:
        """Read a log written by ``save``; raise ``LogError`` saying what to do if it cannot.

        Every field is checked, so a loaded trace renders without error. A file larger
        than ``max_size`` bytes (default 256 MiB) is refused before it is read.
        """
        from ._logfile import MAX_LOG_SIZE, PASS_A_LOG, LogDamage, check, read

        name = repr(os.fspath(path))
        data = read(path, name, MAX_LOG_SIZE if max_size is None else max_size)
        try:
            version = _newer_version(data)
        except LogError:
            raise LogError(f"{name} is not an rngtrace log (no \"format\": \"rngtrace\"); {PASS_A_LOG}") from None
        if version is not None:
            raise LogError(f"{name} was written by a newer rngtrace (log format version {version}, this one reads "
                           f"up to {FORMAT_VERSION}); upgrade rngtrace: pip install -U rngtrace")
        try:
            fields = check(data)
        except LogDamage as damage:
            raise LogError(f"{name} is a truncated or damaged rngtrace log ({damage}); record it again") from None
        return cls._from_fields(fields)

    def __repr__(self) -> str:
        counts = ", ".join(f"{s} {k}: {n}" for (s, k), n in sorted(self.counts().items()))
        return f"<Trace {len(self)} events ({counts or 'none'})>"


# -- saved logs -------------------------------------------------------------------


def _saved_event(raw: RawEvent, index: dict[int, int]) -> list[Any]:
    """The JSON row of a raw event; an unattributed move keeps its noticing call in ``stack``.

    That is where version 1 has always kept it, so logs from before windows and
    after read alike: the reader takes it as the window's end, never as the event's stack.
    """
    s, k, a, c, sid, t, d = raw
    if k == UNATTRIBUTED:
        note, noticed = _moved_parts(raw)
        return [s, k, a, c, index.get(noticed, -1), t, note]
    return [s, k, a, c, index.get(sid, -1), t, d]


def _dumps(data: dict[str, Any]) -> str:
    """JSON with one top-level field, event or stack a line: small, and readable in a diff."""
    lines = []
    for key, value in data.items():
        if isinstance(value, list) and value and isinstance(value[0], list):
            items = ",\n".join("    " + json.dumps(item, ensure_ascii=False) for item in value)
            text = f"[\n{items}\n  ]"
        else:
            text = json.dumps(value, ensure_ascii=False)
        lines.append(f"  {json.dumps(key)}: {text}")
    return "{\n" + ",\n".join(lines) + "\n}\n"


def _newer_version(data: Any) -> int | None:
    """The version of a log too new for this rngtrace, or None; LogError when ``data`` is no rngtrace log."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise LogError("not an rngtrace log")
    version = data.get("version")
    return version if version.__class__ is int and version > FORMAT_VERSION else None
