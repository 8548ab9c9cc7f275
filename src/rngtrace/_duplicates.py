"""The ``duplicate`` finding: two processes that drew from one stream starting at the same state.

Each process notes where its streams started anew (``RawStore.origins``: the
state at a fork, after each seed); matched with its first draw from there, two
processes whose first draws came from one state digest drew the same numbers.
"""

from __future__ import annotations

import bisect
import os
from typing import Any

from ._model import DRAW, Finding, Process
from ._store import RawStore
from .sources import stream as stream_info


def duplicates(trace: RawStore) -> list[Finding]:
    """Streams that two or more processes drew from starting at the same state.

    Each process's origins (the state at a fork, after each seed) are matched with
    its first draw from that stream before its next origin; two processes whose
    first draws came from one state digest drew the same numbers.
    """
    if not trace.origins:
        return []
    pids = trace.pids
    draws: dict[tuple[int, str], list[int]] = {}
    for i, raw in enumerate(trace.raw):
        if raw[1] == DRAW:
            draws.setdefault((pids.get(raw[5], trace.pid), raw[0]), []).append(i)
    origins: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for pid, stream, digest, _why, at in trace.origins:
        origins.setdefault((pid, stream), []).append((at, digest))
    groups: dict[tuple[str, str], dict[int, int]] = {}
    for (pid, stream), starts in origins.items():
        starts.sort(key=lambda o: o[0])
        made = draws.get((pid, stream), [])
        for j, (at, digest) in enumerate(starts):
            end = starts[j + 1][0] if j + 1 < len(starts) else len(trace.raw)
            k = bisect.bisect_left(made, at)
            if k < len(made) and made[k] < end:
                groups.setdefault((stream, digest), {}).setdefault(pid, made[k])
    found = []
    roles = {p.pid: p for p in trace.processes}
    events = trace.events
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
        found.append(
            Finding("duplicate", stream, tuple(pid for pid, _ in order), message, tuple(i for _, i in order), fix)
        )
    found.sort(key=lambda f: f.events)
    return found


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
