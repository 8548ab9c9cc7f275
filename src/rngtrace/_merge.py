"""Child processes in a Trace: merging what a child spooled, and the ``duplicate`` finding.

The data side of ``_processes``: a child's events arrive with their stacks
already resolved into frames and their threads named; here they become raw
events of the parent's trace, with stack ids below ``NO_STACK`` (so they never
meet the stack table's) and thread keys of their own that map to the child's pid.
"""

from __future__ import annotations

import bisect
import os
from typing import Any, Optional

from ._processes import BUSY_FLUSH_INTERVAL, FLUSH_INTERVAL
from ._threads import new_thread_key
from .trace import DRAW, NO_STACK, UNATTRIBUTED, Finding, Frame, Process, Trace

#: the most a killed child can have drawn since its last write
FLUSH_MS = round((BUSY_FLUSH_INTERVAL + FLUSH_INTERVAL) * 1000)
#: the fix a duplicate finding names, per library
_FIXES = {
    "random": "seed each process from its id (random.seed(base + worker_id)) or give each its own "
              "random.Random(seed + worker_id)",
    "numpy": "seed each process from its id (np.random.seed(base + worker_id)) or draw from "
             "np.random.default_rng(seed + worker_id) in each",
    "torch": "seed each process from its id (torch.manual_seed(base + worker_id)) or pass each a "
             "torch.Generator seeded from its id",
}


def merge_child(trace: Trace, log: Any) -> None:
    """Append a child's spooled events to ``trace`` (``_processes.ChildLog``), keeping its pid."""
    # The child's stack ids and thread keys, mapped once each to ids of this trace's own.
    stacks = {local: NO_STACK - 1 - len(trace._child_stacks) - i for i, local in enumerate(log.stacks)}
    for local, sid in stacks.items():
        frames = tuple(Frame(str(f), int(line), str(fn)) for f, line, fn in log.stacks[local])
        trace._child_stacks[sid] = frames
        if trace._unresolved is None:  # its stacks were read already: add these
            trace._stacks[sid] = frames
    threads: dict[int, int] = {}
    for local in {raw[5] for raw in log.events}:
        key = threads[local] = new_thread_key()
        trace._pids[key] = log.pid
        trace._threads[key] = str(log.threads.get(local, f"thread-{local}"))
    sid_of = stacks.get
    merged = [(s, k, a, c, sid_of(sid, NO_STACK), threads[t], d) for s, k, a, c, sid, t, d in log.events]
    if UNATTRIBUTED in {raw[1] for raw in merged}:  # the noticing call's stack travels in the detail
        merged = [raw if raw[6].__class__ is not tuple else (*raw[:4], NO_STACK, raw[5], (raw[6][0], sid_of(raw[6][1], NO_STACK)))
                  for raw in merged]
    base = len(trace._raw)
    kept = max(0, min(len(merged), trace.max_events - base))
    trace._raw += merged[:kept]
    for raw in merged[kept:]:
        _count_over(trace, (raw[0], raw[1], raw[2], raw[4]), 1, raw[3] or 0)
    for stream, kind, api, local_sid, calls, values in log.overflow:
        _count_over(trace, (stream, kind, api, sid_of(local_sid, NO_STACK)), calls, values)
    end = len(trace._raw)
    for stream, digest, why, at in log.origins:
        # The first event at or after ``at`` that was kept, in the merged order.
        trace._origins.append((log.pid, stream, digest, why, base + at if at < kept else end))
    events = len(log.events) + sum(row[4] for row in log.overflow)
    trace._children.append(Process(log.pid, log.ppid, log.start, log.role, log.exit, events))
    if log.abrupt:
        # How, where its status says (a signal, an exit code); a process reaped by someone else says no more.
        how = f" ({log.exit})" if log.exit and log.exit != "ended abruptly" else ""
        trace.notes.append(
            f"process {log.pid} ended abruptly{how} after spooling {events} event"
            f"{'' if events == 1 else 's'}: what it drew in its last {FLUSH_MS} ms is not in this log"
        )


def _count_over(trace: Trace, key: tuple, calls: int, values: int) -> None:
    trace.dropped += calls
    slot = trace._overflow.get(key)
    if slot is None:
        trace._overflow[key] = [calls, values]
    else:
        slot[0] += calls
        slot[1] += values


def duplicates(trace: Trace) -> list[Finding]:
    """Streams that two or more processes drew from starting at the same state.

    Each process's origins (the state at a fork, after each seed) are matched with
    its first draw from that stream before its next origin; two processes whose
    first draws came from one state digest drew the same numbers.
    """
    if not trace._origins:
        return []
    pids = trace._pids
    draws: dict[tuple[int, str], list[int]] = {}
    for i, raw in enumerate(trace._raw):
        if raw[1] == DRAW:
            draws.setdefault((pids.get(raw[5], trace.pid), raw[0]), []).append(i)
    origins: dict[tuple[int, str], list[tuple[int, str]]] = {}
    for pid, stream, digest, _why, at in trace._origins:
        origins.setdefault((pid, stream), []).append((at, digest))
    groups: dict[tuple[str, str], dict[int, int]] = {}
    for (pid, stream), starts in origins.items():
        starts.sort(key=lambda o: o[0])
        made = draws.get((pid, stream), [])
        for j, (at, digest) in enumerate(starts):
            end = starts[j + 1][0] if j + 1 < len(starts) else len(trace._raw)
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
        fix = _FIXES.get(stream.split(".", 1)[0], "seed each process from its id")
        message = (
            f"{len(order)} processes drew from the {stream} stream starting from the same state, so they drew "
            f"the same numbers: {who}; first draw{'s' if len(sites) > 1 else ''} at {_and(sites)}"
        )
        found.append(Finding("duplicate", stream, tuple(pid for pid, _ in order), message,
                             tuple(i for _, i in order), fix))
    found.sort(key=lambda f: f.events)
    return found


def _who(pid: int, process: Optional[Process], traced: int) -> str:
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
