"""The recorded data: Trace, Event, Frame, Statistic, and their JSON form.

The hub appends raw tuples to a Trace while it records; nothing here runs on the
hot path except ``Trace._add``. Frames are resolved (code object + instruction
offset -> file, line, function) once, when the trace is finished.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Iterable, Iterator

from ._errors import LogError

FORMAT = "rngtrace"
FORMAT_VERSION = 1

DRAW = "draw"
SEED = "seed"
UNATTRIBUTED = "unattributed"
KINDS = (DRAW, SEED, UNATTRIBUTED)


@dataclass(frozen=True)
class Frame:
    """One line of a stack: where a call was made."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"


@dataclass(frozen=True)
class Event:
    """One draw, reseed or unexplained move of a global stream."""

    index: int
    stream: str
    kind: str
    api: str
    count: int | None
    stack: tuple[Frame, ...]
    thread: str
    pid: int
    detail: str | None = None  # the seed value for a seed, where noticed for unattributed

    @property
    def frame(self) -> Frame | None:
        """The frame that called the random API (innermost), or None."""
        return self.stack[0] if self.stack else None


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


# Raw event: (stream, kind, api, count, stack_id, thread_ident, detail)
RawEvent = tuple


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
        #: events not kept individually because max_events was reached
        self.dropped = 0
        self.notes: list[str] = []  # what the tracer could not watch, said in the log
        self._raw: list[RawEvent] = []
        # (stream, kind, api, stack_id) -> [calls, values] for events beyond max_events
        self._overflow: dict[tuple, list[int]] = {}
        self._threads: dict[int, str] = {}
        self._stacks: dict[int, tuple[Frame, ...]] = {}
        self._events: list[Event] | None = None
        self._finished = False
        # While recording: the hub's (resolve_stack, thread_names), to read events mid-block.
        self._live: tuple | None = None

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
        used = {r[4] for r in raw}
        used.update(key[3] for key in self._overflow)
        self._stacks = {sid: resolve_stack(sid, self.depth) for sid in used} if resolve_stack else {}
        self._threads = {r[5]: thread_names.get(r[5], f"thread-{r[5]}") for r in raw}
        self._live = None
        self._events = None

    # -- reading ------------------------------------------------------------
    @property
    def events(self) -> list[Event]:
        """Every kept event, in the order it happened."""
        if not self._finished and self._live is not None:
            return self._snapshot()
        if self._events is None:
            stacks, threads, pid = self._stacks, self._threads, self.pid
            self._events = [
                Event(i, s, k, a, c, stacks.get(sid, ()), threads.get(t, str(t)), pid, d)
                for i, (s, k, a, c, sid, t, d) in enumerate(self._raw)
            ]
        return self._events

    def _stack_map(self) -> dict[int, tuple[Frame, ...]]:
        """Stack id -> frames; resolved on the spot while the block is still recording."""
        if self._finished or self._live is None:
            return self._stacks
        resolve = self._live[0]
        used = {raw[4] for raw in list(self._raw)} | {key[3] for key in list(self._overflow)}
        return {sid: resolve(sid, self.depth) for sid in used}

    def _snapshot(self) -> list[Event]:
        """Events so far, resolved now: the block is still recording."""
        names = self._live[1]  # type: ignore[index]
        stacks = self._stack_map()
        return [
            Event(i, s, k, a, c, stacks[sid], names.get(t, str(t)), self.pid, d)
            for i, (s, k, a, c, sid, t, d) in enumerate(list(self._raw))
        ]

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
        stack_ids = sorted(self._stacks)
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
            "events": [
                [s, k, a, c, index.get(sid, -1), t, d] for (s, k, a, c, sid, t, d) in self._raw
            ],
            "overflow": [
                [s, k, a, index.get(sid, -1), calls, values]
                for (s, k, a, sid), (calls, values) in self._overflow.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        """Rebuild a finished Trace from ``to_dict()`` output."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError("not an rngtrace log: expected a dict with \"format\": \"rngtrace\"")
        version = data.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise ValueError(
                f"rngtrace log version {version!r} is newer than this rngtrace reads "
                f"({FORMAT_VERSION}); upgrade rngtrace"
            )
        try:
            trace = cls(data["streams"], data["depth"], data["max_events"])
            trace.pid = data["pid"]
            trace.dropped = data["dropped"]
            trace.notes = list(data.get("notes", []))
            trace._stacks = {
                i: tuple(Frame(f, int(ln), fn) for f, ln, fn in stack)
                for i, stack in enumerate(data["stacks"])
            }
            trace._threads = {int(k): v for k, v in data["threads"].items()}
            trace._raw = [tuple(e) for e in data["events"]]
            trace._overflow = {(s, k, a, sid): [calls, values] for s, k, a, sid, calls, values in data["overflow"]}
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"truncated or damaged rngtrace log ({exc!r}); record it again") from None
        trace._finished = True
        return trace

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trace to ``path`` as a JSON log that ``Trace.load`` reads back."""
        if self._live is not None and not self._finished:
            raise RuntimeError("this trace is still recording; save it after its block ends")
        with open(path, "w", encoding="utf-8") as out:
            out.write(_dumps(self.to_dict()))

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Trace:
        """Read a log written by ``save``; raise ``LogError`` saying what to do if it cannot."""
        name = repr(os.fspath(path))
        data = _read_json(path, name)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise LogError(f"{name} is not an rngtrace log (no \"format\": \"rngtrace\"); {_PASS_A_LOG}")
        version = data.get("version")
        if isinstance(version, int) and not isinstance(version, bool) and version > FORMAT_VERSION:
            raise LogError(
                f"{name} was written by a newer rngtrace (log format version {version}, this one reads "
                f"up to {FORMAT_VERSION}); upgrade rngtrace: pip install -U rngtrace"
            )
        why = _damage(data)
        if why is None:
            try:
                trace = cls.from_dict(data)
                trace.statistics()  # resolve now, so a damaged log fails here, not in a renderer
                _ = trace.events
                return trace
            except (LookupError, TypeError, ValueError) as exc:
                why = f"{type(exc).__name__}: {exc}"
        raise LogError(f"{name} is a truncated or damaged rngtrace log ({why}); record it again")

    def __repr__(self) -> str:
        counts = ", ".join(f"{s} {k}: {n}" for (s, k), n in sorted(self.counts().items()))
        return f"<Trace {len(self)} events ({counts or 'none'})>"


# -- saved logs -------------------------------------------------------------------

_PASS_A_LOG = "pass a file written by `rngtrace run --json` or Trace.save()"
_FIELDS = ("version", "pid", "streams", "depth", "max_events", "dropped", "stacks", "threads", "events", "overflow")


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


def _read_json(path: str | os.PathLike[str], name: str) -> Any:
    """The parsed contents of ``path``, or a LogError saying why there are none."""
    try:
        with open(path, encoding="utf-8") as src:
            text = src.read()
    except FileNotFoundError:
        raise LogError(f"no such file: {name}; check the path") from None
    except IsADirectoryError:
        raise LogError(f"{name} is a directory; {_PASS_A_LOG}") from None
    except UnicodeDecodeError:
        raise LogError(f"{name} is not JSON (not UTF-8 text); {_PASS_A_LOG}") from None
    except OSError as exc:
        raise LogError(f"cannot read {name} ({exc.strerror}); check its permissions") from None
    if not text.strip():
        raise LogError(f"{name} is empty; record the log again")
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        if text.lstrip().startswith("{") and f'"{FORMAT}"' in text[:200]:
            raise LogError(f"{name} is a truncated or damaged rngtrace log ({where}); record it again") from None
        raise LogError(f"{name} is not JSON ({where}); {_PASS_A_LOG}") from None


def _damage(data: dict[str, Any]) -> str | None:
    """What is wrong with the shape of a log's fields, or None."""
    missing = [key for key in _FIELDS if key not in data]
    if missing:
        return "no " + ", ".join(repr(key) for key in missing) + " field" + ("s" if len(missing) > 1 else "")
    version = data["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        return f"version {version!r} is not a positive int"
    for key in ("stacks", "events", "overflow"):
        if not isinstance(data[key], list) or not all(isinstance(row, list) for row in data[key]):
            return f"{key!r} is not a list of lists"
    bad = next((row for row in data["events"] if len(row) != 7), None)
    if bad is not None:
        return f"an event has {len(bad)} fields, not 7"
    return None
