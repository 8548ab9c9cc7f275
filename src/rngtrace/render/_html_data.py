"""The HTML report's data: the events as compact columns the page's script draws from, and its tables' rows.

Frames and stacks are numbered once (``Stacks``), each stack with what it says
about its origin (the package that made it, or "your code"); the timeline's
columns hold a call site, a count and a thread per event, and the JSON that
carries them to the page can end no ``<script>`` element. ``html`` lays the
page out around them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from .._paths import package_of, short_path
from .._yours import is_yours
from ..sources import declared
from ..trace import DRAW, ENTROPY, RESTORE, SEED, UNATTRIBUTED, Event, Frame, Trace
from .base import EMPTY, called_at, printable, restore_note, role_of, stream_key, where_moved, your_code

YOUR_CODE = "your code"
_KIND_CODES = {DRAW: 0, SEED: 1, UNATTRIBUTED: 2, ENTROPY: 3, RESTORE: 4}
YOUR_CODE_COLOR = "#e8590c"
OTHER_COLOR = "#a8a29e"
PALETTE = ("#3b6fb6", "#2f9e44", "#9c36b5", "#0c8599", "#c29d0b", "#8d5a3b", "#e64980", "#5c7cfa")


class Stacks:
    """Frames and stacks numbered for the page's JSON, with what each stack says about its origin."""

    def __init__(self, cwd: str) -> None:
        self.cwd = cwd
        self.frames: list[list[Any]] = []
        self.stacks: list[list[int]] = []
        self._frame_ids: dict[Frame, int] = {}
        self._stack_ids: dict[tuple[Frame, ...], int] = {}
        # id(stack) -> (stack, number): events share stack tuples, and holding each one keeps its id unique
        self._by_identity: dict[int, tuple[tuple[Frame, ...], int]] = {}
        self._facts: list[tuple[str, str, str]] = []  # per stack: (origin, called at, your code)

    def number(self, stack: tuple[Frame, ...]) -> int:
        """The number of ``stack``, interning it and its frames on first sight."""
        seen = self._by_identity.get(id(stack))
        if seen is not None:
            return seen[1]
        sid = self._stack_ids.get(stack)
        if sid is None:
            sid = self._stack_ids[stack] = len(self.stacks)
            self.stacks.append([self._frame(f) for f in stack])
            self._facts.append((_origin(stack, self.cwd), called_at(stack, self.cwd), your_code(stack, self.cwd)))
        self._by_identity[id(stack)] = (stack, sid)
        return sid

    def facts(self, stack: tuple[Frame, ...]) -> tuple[str, str, str]:
        """(origin package, called at, your code) for ``stack``."""
        return self._facts[self.number(stack)]

    def _frame(self, frame: Frame) -> int:
        fid = self._frame_ids.get(frame)
        if fid is None:
            fid = self._frame_ids[frame] = len(self.frames)
            user = 1 if is_yours(frame) else 0
            self.frames.append(
                [
                    printable(short_path(frame.filename, self.cwd)),
                    frame.lineno,
                    printable(frame.function),
                    user,
                    printable(frame.filename),
                ]
            )
        return fid


def _origin(stack: tuple[Frame, ...], cwd: str) -> str:
    """The package of the innermost frame outside the random library itself, or "your code"."""
    for frame in stack:
        path = short_path(frame.filename, cwd)
        if path.startswith(_random_library()):
            continue
        if is_yours(frame):
            return YOUR_CODE
        return printable(package_of(frame.filename) or "other")
    return "unknown"


def _random_library() -> tuple[str, ...]:
    """The streams' own libraries' random files, as each declared them: never the code that called."""
    return tuple(path for info in declared().values() for path in info.library_files)


# -- the timeline's data ------------------------------------------------------------


def _lanes(trace: Trace, shown: Sequence[Event], several: bool) -> tuple[list[tuple[int, str]], list[list[Any]]]:
    """The timeline's lanes as (pid, stream), and the processes they belong to as [pid, label].

    One process: a lane per stream watched or drawn from (pid 0 for all). Several: a band per
    process with events, the traced one first, holding a lane per stream it drew from.
    """
    if not several:
        return [(0, s) for s in sorted({e.stream for e in shown} | set(trace.streams), key=stream_key)], []
    known = {p.pid: p for p in trace.processes}
    drawn: dict[int, set[str]] = {}
    for e in shown:
        drawn.setdefault(e.pid, set()).add(e.stream)
    order = [p.pid for p in trace.processes if p.pid in drawn] + sorted(set(drawn) - set(known))
    lanes, processes = [], []
    for pid in order:
        process = known.get(pid)
        role = role_of(process) if process is not None else EMPTY
        processes.append([pid, printable(f"pid {pid}" + (f" · {role}" if role != EMPTY else ""))])
        lanes += [(pid, s) for s in sorted(drawn[pid], key=stream_key)]
    return lanes, processes


def timeline(
    trace: Trace, shown: Sequence[Event], stacks: Stacks, site_keys: dict, several: bool = False
) -> dict[str, Any]:
    """Columns of event data for the script: per event a call site, a count and a thread."""
    lanes, processes = _lanes(trace, shown, several)
    lane_ids = {lane: i for i, lane in enumerate(lanes)}
    band = {pid: i for i, (pid, _label) in enumerate(processes)}
    sites: dict[tuple, int] = {}
    site_cols: list[list[Any]] = []
    threads: dict[str, int] = {}
    ev_site, ev_count, ev_thread = [], [], []
    details: dict[str, str] = {}
    origins: dict[str, int] = {}
    for e in shown:
        sid = stacks.number(e.stack)
        lane = (e.pid if several else 0, e.stream)
        key = (lane, e.kind, e.api, sid)
        site = sites.get(key)
        if site is None:
            origin, called, mine = stacks.facts(e.stack)
            row = site_keys.get((e.stream, e.api, called, mine), -1) if e.kind == DRAW else -1
            site = sites[key] = len(site_cols)
            site_cols.append([lane_ids[lane], _KIND_CODES.get(e.kind, 0), printable(e.api), sid, origin, row])
        ev_site.append(site)
        ev_count.append(e.count)
        ev_thread.append(threads.setdefault(e.thread, len(threads)))
        if e.window is not None:
            details[str(e.index)] = where_moved(e.window, stacks.cwd)
        elif e.kind == RESTORE:
            details[str(e.index)] = restore_note(e, stacks.cwd)
        elif e.detail is not None:
            details[str(e.index)] = printable(e.detail)
        origin = site_cols[site][4]
        if e.kind == UNATTRIBUTED:  # drawn as a warning ring: no package made it
            origins.setdefault(origin, 0)
        else:
            origins[origin] = origins.get(origin, 0) + 1
    packages = _colors(origins)
    package_ids = {name: i for i, (name, _color, _n) in enumerate(packages)}
    for col in site_cols:
        col[4] = package_ids[col[4]]
    return {
        "lanes": [printable(stream) for _pid, stream in lanes],
        "laneProcess": [band[pid] for pid, _stream in lanes] if several else [],
        "processes": processes,
        "packages": [[name, color] for name, color, _n in packages],
        "packageCounts": [n for _name, _color, n in packages],
        "frames": stacks.frames,
        "stacks": stacks.stacks,
        "threads": [printable(name) for name in threads],
        "sites": site_cols,
        "site": ev_site,
        "count": ev_count,
        "thread": ev_thread if len(threads) > 1 else [],
        "detail": details,
    }


def _colors(origins: dict[str, int]) -> list[tuple[str, str, int]]:
    """(package, colour, events) most events first; "your code" always orange, the rest from the palette."""
    ordered = sorted(origins.items(), key=lambda kv: (kv[0] != YOUR_CODE, -kv[1], kv[0]))
    out, palette = [], iter(PALETTE)
    for name, n in ordered:
        if name == YOUR_CODE:
            color = YOUR_CODE_COLOR
        elif name in ("other", "unknown", "stdlib"):
            color = OTHER_COLOR
        else:
            color = next(palette, OTHER_COLOR)
        out.append((name, color, n))
    return out


def json_for_script(data: dict[str, Any]) -> str:
    """JSON that cannot end its <script> element or open a comment, whatever the frame names hold."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    for raw, safe in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(raw, safe)
    return text


def site_rows(trace: Trace, stacks: Stacks) -> tuple[list[list[Any]], dict[tuple, int]]:
    """Draws grouped by (stream, api, calling line, user line) as in the text log, dropped ones included."""
    groups: dict[tuple, list[Any]] = {}
    for stat in trace.statistics("traceback"):
        origin, called, mine = stacks.facts(stat.stack)
        key = (stat.stream, stat.api, called, mine)
        slot = groups.setdefault(key, [0, 0, is_yours(stat.frame), origin])
        slot[0] += stat.calls
        slot[1] += stat.values
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    rows = [[*key, *slot] for key, slot in ordered]
    return rows, {key: i for i, (key, _slot) in enumerate(ordered)}
