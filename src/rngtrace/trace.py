"""The public Trace: what one traced block or call recorded, its findings, and its JSON form.

A ``Trace`` is the hub's raw store (``_model.RawStore``) with what a user reads
on top: statistics by call site, the findings (worked out when first read) and
``save``/``load``.
"""

from __future__ import annotations

import json
import operator
import os
from collections import Counter
from typing import Any

from ._errors import LogError
from ._model import (  # noqa: F401 (the value classes are this module's public names too)
    CAUSE,
    DRAW,
    ENTROPY,
    FORMAT,
    FORMAT_VERSION,
    KINDS,
    NO_STACK,
    RESTORE,
    RISK,
    SEED,
    UNATTRIBUTED,
    Event,
    Finding,
    Frame,
    Process,
    RawEvent,
    Statistic,
    Window,
    moved_parts,
)
from ._store import RawStore

#: a raw event's (kind, stream, api, stack id, count): what ``_counted`` tallies per row
_COUNTED_KEY = operator.itemgetter(1, 0, 2, 4, 3)


class Trace(RawStore):
    """Everything one traced block or call recorded, in order."""

    def __init__(self, streams: Any = (), depth: int = 16, max_events: int = 100_000) -> None:
        RawStore.__init__(self, streams, depth, max_events)  # not super(): no proxy object at every trace's start
        self._findings: list[Finding] | None = None
        #: kind -> the kept events counted per (stream, api, stack id), once the trace is finished
        self._per_stack: dict[str, dict[tuple[str, str, int], list[int]]] = {}

    def _forget(self) -> None:
        super()._forget()
        self._findings = None
        self._per_stack = {}

    @property
    def findings(self) -> list[Finding]:
        """What made the run irreproducible and what to change, worked out when first read (see _findings)."""
        if not self.finished and self.live is not None:
            from ._findings import findings

            return findings(self)  # still recording: not kept
        if self._findings is None:
            from ._findings import findings

            self._findings = findings(self)
        return self._findings

    def statistics(self, key_type: str = "lineno", kind: str = DRAW) -> list[Statistic]:
        """Group events of one kind by call site, most calls first.

        ``key_type`` is ``"lineno"`` (the frame that called the API) or
        ``"traceback"`` (the whole recorded stack), as in tracemalloc. Events past
        ``max_events`` were counted with the call-site form of their stack (out to the
        first frame of the user's own code): their "traceback" rows hold that much.
        """
        if key_type not in ("lineno", "traceback"):
            raise ValueError(f"unknown key_type {key_type!r}; choose from 'lineno', 'traceback'")
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; choose from {', '.join(KINDS)}")
        groups: dict[tuple, list[Any]] = {}
        stacks = self.stack_map()

        def add(stream: str, api: str, stack: tuple[Frame, ...], calls: int, values: int) -> None:
            site = stack if key_type == "traceback" else stack[:1]
            slot = groups.setdefault((stream, api, site), [stack, 0, 0])
            slot[1] += calls
            slot[2] += values

        for (stream, api, sid), (calls, values) in self._counted(kind).items():
            add(stream, api, stacks.get(sid, ()), calls, values)
        for (stream, k, api, sid), (calls, values) in self.overflow.items():
            if k == kind:
                add(stream, api, stacks.get(sid, ()), calls, values)
        stats = [
            Statistic(stream, kind, api, stack if key_type == "traceback" else stack[:1], calls, values)
            for (stream, api, _site), (stack, calls, values) in groups.items()
        ]
        stats.sort(key=lambda s: (-s.calls, -s.values, s.stream, s.api))
        return stats

    def _counted(self, kind: str) -> dict[tuple[str, str, int], list[int]]:
        """(stream, api, stack id) -> [calls, values] of the kept events of ``kind``; kept once finished,
        since a log's text and HTML each group by line and by stack."""
        counted = self._per_stack.get(kind)
        if counted is not None:
            return counted
        # Counted per stack id first: a long log has few ids and many rows, and hashing an id is
        # cheaper than hashing its frames. Ids keep their first row's order, so the sites do too.
        # Per run of one row (a loop's draws are one row kept again and again), in order.
        runs = self.few_runs()
        if runs is None:
            return self._counted_per_row(kind)
        by_sid: dict[tuple[str, str, int], list[int]] = {}
        for raw, n in runs:
            if raw[1] == kind:
                slot = by_sid.get((raw[0], raw[2], raw[4]))
                if slot is None:
                    by_sid[raw[0], raw[2], raw[4]] = [n, (raw[3] or 0) * n]
                else:
                    slot[0] += n
                    slot[1] += (raw[3] or 0) * n
        if self.finished and self.live is None:
            self._per_stack[kind] = by_sid
        return by_sid

    def _counted_per_row(self, kind: str) -> dict[tuple[str, str, int], list[int]]:
        """``_counted`` of rows that are mostly runs of their own (a log read back), every kind at once.

        The rows are tallied in C by (kind, stream, api, stack id, count), then the few tallies
        grouped: in the same order as per run, each stack id where its first row is.
        """
        per_kind: dict[str, dict[tuple[str, str, int], list[int]]] = {}
        for (k, stream, api, sid, count), n in Counter(map(_COUNTED_KEY, self.raw)).items():
            by_sid = per_kind.get(k)
            if by_sid is None:
                by_sid = per_kind[k] = {}
            slot = by_sid.get((stream, api, sid))
            if slot is None:
                by_sid[stream, api, sid] = [n, (count or 0) * n]
            else:
                slot[0] += n
                slot[1] += (count or 0) * n
        if self.finished and self.live is None:
            self._per_stack.update(per_kind)
            self._per_stack.setdefault(kind, {})
        return per_kind.get(kind, {})

    # -- serialisation ------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict; ``Trace.from_dict`` reads it back."""
        stack_ids = sorted(self.resolved_stacks())
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
            "stacks": [[[f.filename, f.lineno, f.function] for f in self.resolved_stacks()[sid]] for sid in stack_ids],
            "threads": {str(k): v for k, v in self.threads.items()},
            "events": [_saved_event(raw, index) for raw in self.raw],
            "overflow": [
                [s, k, a, index.get(sid, -1), calls, values]
                for (s, k, a, sid), (calls, values) in self.overflow.items()
            ],
            # Version 2: the child processes merged in, their threads' pids, and where each
            # process's streams started anew (what the duplicate finding is drawn from).
            "ppid": self.ppid,
            "processes": [[p.pid, p.ppid, p.start, p.role, p.exit, p.events] for p in self.children],
            "pids": {str(k): v for k, v in self.pids.items()},
            "origins": [list(origin) for origin in self.origins],
            # Read by the findings: whether the trace saw the program start, torch's flags at its end.
            "from_start": self.from_start,
            "settings": dict(self.settings),
            "untraced": list(self.untraced),
            # Written for other readers (a CI step, jq); rngtrace works them out again when it reads a log,
            # so a log gets the findings of the rngtrace that reads it.
            "findings": [
                [f.kind, f.level, f.stream, list(f.pids), f.message, list(f.events), f.fix] for f in self.findings
            ],
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Trace:
        """Rebuild a finished Trace from ``to_dict()`` output; raise ``LogError`` naming the first bad field."""
        from ._logfields import LogDamage, check

        try:
            version = _newer_version(data)
        except LogError:
            raise LogError("not an rngtrace log: expected a dict with \"format\": \"rngtrace\"") from None
        if version is not None:
            raise LogError(
                f"rngtrace log version {version} is newer than this rngtrace reads ({FORMAT_VERSION}); upgrade rngtrace"
            )
        try:
            fields = check(data)
        except LogDamage as damage:
            raise LogError(f"truncated or damaged rngtrace log ({damage}); record it again") from None
        return cls._from_fields(fields)

    @classmethod
    def _from_fields(cls, fields: Any) -> Trace:
        """A finished Trace holding a log's checked fields (``_logfields.Fields``)."""
        trace = cls(fields.streams, fields.depth, fields.max_events)
        trace.load_fields(fields)
        return trace

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write the trace to ``path`` as a JSON log that ``Trace.load`` reads back."""
        if self.live is not None and not self.finished:
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
        from ._logfields import LogDamage, check
        from ._logfile import MAX_LOG_SIZE, PASS_A_LOG, read

        name = repr(os.fspath(path))
        data = read(path, name, MAX_LOG_SIZE if max_size is None else max_size)
        try:
            version = _newer_version(data)
        except LogError:
            raise LogError(f"{name} is not an rngtrace log (no \"format\": \"rngtrace\"); {PASS_A_LOG}") from None
        if version is not None:
            raise LogError(
                f"{name} was written by a newer rngtrace (log format version {version}, this one reads "
                f"up to {FORMAT_VERSION}); upgrade rngtrace: pip install -U rngtrace"
            )
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
        note, noticed = moved_parts(raw)
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
