"""The ``duplicate`` finding: two processes that drew from one stream starting at the same state.

Each process notes where its streams started anew (``RawStore.origins``: the
state at a fork, after each seed); matched with its first draw from there, two
processes whose first draws came from one state digest drew the same numbers.
Where that state was made by a seed each process ran (a constant seed in a
DataLoader's ``worker_init_fn``), the finding names that line and its fix.
Also here: how every finding names a process other than the traced one (``in_which``).
"""

from __future__ import annotations

import bisect
import os
from collections.abc import Sequence
from typing import Any

from ._model import DRAW, SEED, Event, Finding, Frame, Process
from ._paths import short_path
from ._rows import event_rows
from ._store import RawStore
from ._words import stream_base
from ._yours import call_of
from .sources import stream as stream_info

#: a DataLoader worker's own seed, which PyTorch makes differ per worker: what a worker seeds from
_WORKER_SEED = "torch.initial_seed() % 2**32"


def in_which(trace: RawStore, pids: tuple[int, ...]) -> str:
    """`` in python fold.py 0 (pid 31566)``: the processes a finding is about, "" for the traced one alone."""
    others = [pid for pid in dict.fromkeys(pids) if pid != trace.pid]
    if not others:
        return ""
    roles = {p.pid: p for p in trace.processes}
    names = [_name(pid, roles.get(pid), trace.pid) for pid in dict.fromkeys(pids)]
    more = len(names) - 2
    return " in " + _and(names[:2] + ([f"{more} more process{'es' * (more > 1)}"] if more > 0 else []))


def _name(pid: int, process: Process | None, traced: int) -> str:
    if pid == traced:
        return f"the traced process (pid {pid})"
    if process is not None and process.role:
        return f"{process.role} (pid {pid})"
    return f"pid {pid}"


def duplicates(trace: RawStore) -> list[Finding]:
    """Streams that two or more processes drew from starting at the same state.

    Each process's origins (the state at a fork, after each seed) are matched with
    its first draw from that stream before its next origin; two processes whose
    first draws came from one state digest drew the same numbers.
    """
    holders: dict[tuple[str, str], set[int]] = {}  # (stream, digest) -> the processes that started there
    for pid, stream, digest, _why, _at in trace.origins:
        holders.setdefault((stream, digest), set()).add(pid)
    shared = {state for state, held in holders.items() if len(held) > 1}
    if not shared:
        return []  # no state two processes started from: the rows need not be read
    pids = trace.pids
    needed = {stream for stream, _digest in shared}
    # (pid, stream) -> the first and last index of each run of its draws (a loop's draws are one run)
    draws: dict[tuple[int, str], tuple[list[int], list[int]]] = {}
    i = 0
    for raw, n in trace.runs():
        if raw[1] == DRAW and raw[0] in needed:
            firsts, lasts = draws.setdefault((pids.get(raw[5], trace.pid), raw[0]), ([], []))
            firsts.append(i)
            lasts.append(i + n - 1)
        i += n
    origins: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for pid, stream, digest, _why, at in trace.origins:
        origins.setdefault((pid, stream), []).append((at, digest))
    groups: dict[tuple[str, str], dict[int, int]] = {}
    for (pid, stream), starts in origins.items():
        starts.sort(key=lambda o: o[0])
        firsts, lasts = draws.get((pid, stream), ([], []))
        for j, (at, digest) in enumerate(starts):
            if (stream, digest) not in shared:
                continue  # its group would hold this process alone
            end = starts[j + 1][0] if j + 1 < len(starts) else len(trace.raw)
            k = bisect.bisect_left(lasts, at)  # the first run that reaches ``at``
            first = max(firsts[k], at) if k < len(firsts) else end
            if first < end:
                groups.setdefault((stream, digest), {}).setdefault(pid, first)
    return _findings(trace, groups)


def _findings(trace: RawStore, groups: dict[tuple[str, str], dict[int, int]]) -> list[Finding]:
    """One finding per stream and shared state that two or more processes drew from first."""
    found = []
    roles = {p.pid: p for p in trace.processes}
    events = event_rows(trace)
    for (stream, _digest), first in groups.items():
        if len(first) < 2:
            continue
        order = sorted(first.items(), key=lambda item: item[1])
        who = _and([_who(pid, roles.get(pid), trace.pid) for pid, _ in order])
        sites = sorted({_site(events[i]) for _, i in order})
        info = stream_info(stream)
        fix = (info.per_process_fix if info is not None else "") or "seed each process from its id"
        message = (
            f"{len(order)} processes drew from the {stream} stream starting from the same state, so they drew "
            f"the same numbers: {who}; first draw{'s' if len(sites) > 1 else ''} at {_and(sites)}"
        )
        seeds = [_seed_before(events, pid, stream, i) for pid, i in order]
        line = _shared_seed_line(seeds)
        if line is not None:
            message += f"; each started from the seed at {_site_of(line)}"
            fix = _seed_fix(stream, line, trace, [pid for pid, _ in order]) or fix
        used = [s.index for s in seeds if s is not None] if line is not None else []
        firsts = [i for _, i in order]
        found.append(
            Finding("duplicate", stream, tuple(pid for pid, _ in order), message, tuple(sorted([*used, *firsts])), fix)
        )
    found.sort(key=lambda f: f.events)
    return found


def _seed_before(events: Sequence[Event], pid: int, stream: str, first: int) -> Event | None:
    """The last seed of ``stream``'s library that process ``pid`` made before its draw ``first``, or None."""
    base = stream_base(stream)
    for e in map(events.__getitem__, range(first - 1, -1, -1)):
        if e.pid == pid and e.kind == SEED and stream_base(e.stream) == base:
            return e
    return None


def _shared_seed_line(seeds: list[Event | None]) -> Frame | None:
    """The line every process seeded at with one value (the user's ``seed_worker``), or None."""
    if any(s is None for s in seeds):
        return None
    lines = {(s.frame, s.detail) for s in seeds if s is not None}
    if len(lines) != 1:
        return None
    frame, _value = lines.pop()
    return frame


def _seed_fix(stream: str, line: Frame, trace: RawStore, pids: list[int]) -> str:
    """The seed at ``line`` made to differ per process: from the worker's own torch seed in a DataLoader worker."""
    info = stream_info(stream_base(stream))
    call = info.seed_call if info is not None else ""
    roles = {p.pid: p.role or "" for p in trace.processes}
    if not call.endswith("(0)") or not all(roles.get(pid, "").startswith("DataLoader worker") for pid in pids):
        return ""
    if call_of((line,)) is None:
        return ""  # a library's seed: not the user's line to change
    return f"{call[: -len('(0)')]}({_WORKER_SEED}) at {_site_of(line)}, which PyTorch makes differ per worker"


def _site_of(frame: Frame) -> str:
    return f"{short_path(frame.filename)}:{frame.lineno} in {frame.function}"


def _who(pid: int, process: Process | None, traced: int) -> str:
    if pid == traced:
        return f"pid {pid} (the traced process)"
    if process is not None and process.role:
        return f"pid {pid} ({process.role})"
    return f"pid {pid}"


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _site(event: Any) -> str:
    frame = event.frame
    if frame is None:
        return "an unknown line"
    path = frame.filename
    try:
        rel = os.path.relpath(path)
        if not rel.startswith(".."):
            path = rel
    except ValueError:
        pass
    return f"{path}:{frame.lineno} ({frame.function})"
