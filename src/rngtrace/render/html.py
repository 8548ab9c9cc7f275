"""The HTML report: one self-contained page a person explores instead of reads.

Top to bottom: the text log's header; the findings, each lighting up its events;
a timeline with a lane per stream (per stream of each process, where child
processes drew too) where each event is a mark placed by its index and coloured
by the package that made it (hover or click shows its stack; where events are
denser than pixels, draws are binned per call site until zoomed in; a link
ending in ``#event=N`` opens with event N pinned); the processes; draws grouped by
call site; seeds and unattributed moves; the hints and notes. Nothing is fetched: the style and
script are inline, and the events travel as compact JSON (interned frames,
stacks and call sites) that the script draws on a canvas, so 100,000 events
make a page of a few megabytes that draws in a fraction of a second.
Only the Trace is read: nothing here knows how it was recorded.

A log is untrusted input (people open each other's): every value from it goes
through ``_h`` or script-safe JSON, and the page's Content-Security-Policy lets
only its own style and script run, so markup that slipped through runs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from html import escape as _escape
from typing import Any

from .._paths import current_dir, package_of, short_path
from .._version import __version__
from .._yours import is_yours
from ..sources import declared
from ..trace import DRAW, SEED, UNATTRIBUTED, Event, Frame, Trace
from . import _html_page
from .base import (
    EMPTY,
    api_label,
    describe,
    ended,
    header,
    hints,
    in_processes,
    plural,
    printable,
    processes_per_site,
    role_of,
    several_processes,
    started,
    stream_key,
    where_moved,
    your_code,
)

YOUR_CODE = "your code"
_KIND_CODES = {DRAW: 0, SEED: 1, UNATTRIBUTED: 2}
# Where the random APIs themselves live: a frame here is the stream's own code, not its caller.
_YOUR_CODE_COLOR = "#e8590c"
_OTHER_COLOR = "#a8a29e"
_PALETTE = ("#3b6fb6", "#2f9e44", "#9c36b5", "#0c8599", "#c29d0b", "#8d5a3b", "#e64980", "#5c7cfa")
# A swatch is coloured by a class, not a style attribute: the page's policy allows no inline style.
_SWATCH_CLASSES = {color: f"c{i}" for i, color in enumerate((_YOUR_CODE_COLOR, _OTHER_COLOR, *_PALETTE))}
_SWATCH_CSS = "\n".join(f".swatch.{name} {{ background:{color}; }}" for color, name in _SWATCH_CLASSES.items())
_MAX_SITE_ROWS = 200
_MAX_OTHER_ROWS = 200


def render(trace: Trace, *, title: str = "rngtrace report", max_marks: int = 100_000) -> str:
    """Return a self-contained HTML page for ``trace``; the first ``max_marks`` events get a mark."""
    cwd = current_dir()
    events = trace.events
    shown = events[: max(max_marks, 0)]
    stacks = _Stacks(cwd)
    several = several_processes(trace)
    sites, site_keys = _site_rows(trace, stacks)
    data = _timeline(trace, shown, stacks, site_keys, several)
    findings = trace.findings
    data["findings"] = [[i for i in f.events if i < len(shown)] for f in findings]
    colors = dict(data["packages"])
    body = "\n".join(
        [
            _top(trace, title, len(shown), len(events)),
            _findings_card(findings),  # the conclusions first; the timeline under them is the evidence
            _timeline_card(data, len(shown)),
            _processes_card(trace) if several else "",
            _sites_card(trace, sites, colors, processes_per_site(trace, cwd) if several else None),
            _others_card(events, stacks, colors, several),
            _hints_card(trace),
            (
                f"<footer>Made by rngtrace {_h(__version__)} · self-contained: this file loads nothing "
                "from the network.</footer>"
            ),
        ]
    )
    return _html_page.document(_h(title), body, _json_for_script(data), css=_SWATCH_CSS)


def _h(value: object) -> str:
    """``value`` as HTML text or attribute value: a log's names escaped, control characters shown as escapes."""
    return _escape(printable(str(value)))


# -- stacks, interned once ----------------------------------------------------------


class _Stacks:
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
            self._facts.append(
                (_origin(stack, self.cwd), describe(stack[0] if stack else None, self.cwd), your_code(stack, self.cwd))
            )
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


def _timeline(
    trace: Trace, shown: Sequence[Event], stacks: _Stacks, site_keys: dict, several: bool = False
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
    out, palette = [], iter(_PALETTE)
    for name, n in ordered:
        if name == YOUR_CODE:
            color = _YOUR_CODE_COLOR
        elif name in ("other", "unknown", "stdlib"):
            color = _OTHER_COLOR
        else:
            color = next(palette, _OTHER_COLOR)
        out.append((name, color, n))
    return out


def _json_for_script(data: dict[str, Any]) -> str:
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


# -- the page's sections --------------------------------------------------------------


def _top(trace: Trace, title: str, shown: int, kept: int) -> str:
    """The title, the text log's header line, a chip per stream, and what the page leaves out."""
    summary = header(trace)
    counts = trace.counts()
    chips = []
    for stream in sorted({s for s, _k in counts}, key=stream_key):
        kinds = [k for k in (SEED, DRAW, UNATTRIBUTED) if (stream, k) in counts]
        words = " · ".join(f'<span class="k-{_h(k)}">{_h(plural(counts[stream, k], k))}</span>' for k in kinds)
        chips.append(f'<div class="chip"><b>{_h(stream)}</b> {words}</div>')
    limits = []
    if trace.dropped:
        limits.append(
            f"{trace.dropped:,} events beyond max_events={trace.max_events:,} were counted but "
            "not kept: they have no mark, and the call-site table includes them."
        )
    if shown < kept:
        limits.append(
            f"The timeline shows the first {shown:,} of {kept:,} kept events (max_marks); the tables cover them all."
        )
    watched = ", ".join(trace.streams) or EMPTY
    return (
        f'<header class="top"><div class="brand">rngtrace</div><h1>{_h(title)}</h1>'
        f'<p class="summary">{_h(summary)}</p><div class="chips">{"".join(chips)}</div>'
        f'<p class="meta">watched: {_h(watched)} · depth {_h(trace.depth)} · pid {_h(trace.pid)}</p>'
        + "".join(f'<p class="limit">{_h(line)}</p>' for line in limits)
        + "</header>"
    )


def _timeline_card(data: dict[str, Any], shown: int) -> str:
    legend = "".join(
        f'<button type="button" class="pkg" data-package="{i}"><span class="swatch {_SWATCH_CLASSES[color]}">'
        f'</span>{_h(name)} <span class="n">{n:,}</span></button>'
        for i, ((name, color), n) in enumerate(zip(data["packages"], data["packageCounts"]))
        if n
    )
    return (
        '<section class="card" id="timeline"><div class="card-head"><h2>Timeline</h2>'
        '<span class="help">One mark per event, left to right in the order they happened, a lane per '
        f'{"stream of each process" if data["processes"] else "stream"}; where events are denser than the '
        "pixels, a lane's draws are binned by call site, a row each, and zooming in brings the single marks back. "
        "Hover or click a mark for its stack · scroll to zoom · drag to pan · double-click or "
        '<kbd>Esc</kbd> to reset · <kbd>←</kbd> <kbd>→</kbd> step through events · '
        '<code>#event=N</code> at the end of this page\'s address opens it with event N pinned.</span></div>'
        f'<div class="legend"><span class="legend-title">made by</span>{legend}'
        '<span class="shapes"><span class="shape draw"></span>draw (height: values drawn, log scale)'
        '<span class="shape seed"></span>seed<span class="shape odd"></span>unattributed</span></div>'
        '<div class="timeline-row">'
        f'<div id="chart" data-events="{shown}" data-lanes="{len(data["lanes"])}" role="img" '
        f'aria-label="timeline of {shown:,} events"><canvas></canvas><div id="tip" hidden></div>'
        "<noscript>The timeline is drawn by JavaScript; the tables below need none.</noscript></div>"
        '<aside id="detail"><p class="placeholder">Hover a mark to see the stack that made it; '
        "click to keep it here.</p></aside></div></section>"
    )


def _site_rows(trace: Trace, stacks: _Stacks) -> tuple[list[list[Any]], dict[tuple, int]]:
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


def _sites_card(
    trace: Trace, rows: list[list[Any]], colors: dict[str, str], pids: dict[tuple, set[int]] | None = None
) -> str:
    """Draws by call site; ``pids`` (across processes): the processes each site drew in."""
    if not rows:
        return ""
    total = sum(row[4] for row in rows)
    body = []
    for i, (stream, api, site, mine, calls, values, user, origin) in enumerate(rows[:_MAX_SITE_ROWS]):
        cells = [
            f'<td class="num">{_h(f"{calls:,}")}</td>',
            f'<td class="num">{_h(f"{values:,}" if values else EMPTY)}</td>',
            f"<td>{_h(stream)}</td>",
            f"<td><code>{_h(api)}</code></td>",
            f'<td class="{"user" if user else "lib"}">{_swatch(origin, colors)}<code>{_h(site)}</code></td>',
        ]
        if pids is not None:
            cells.append(f'<td class="procs">{_h(in_processes(pids.get((stream, api, site, mine))))}</td>')
        body.append((f'data-row="{i}"', cells, mine))
    more = len(rows) - _MAX_SITE_ROWS
    return _card_table(
        "sites",
        "Draws by call site",
        f"{plural(total, DRAW)}, most calls first. Click a row to light up its marks.",
        ["calls", "values", "stream", "api", "site"] + (["processes"] if pids is not None else []),
        body,
        f"… {more:,} more call sites (trace.statistics() has them all)" if more > 0 else "",
    )


def _others_card(events: Sequence[Event], stacks: _Stacks, colors: dict[str, str], several: bool = False) -> str:
    """Every seed and unattributed move, in order: the events that explain a changed number."""
    others = [e for e in events if e.kind != DRAW]
    if not others:
        return ""
    body = []
    for e in others[:_MAX_OTHER_ROWS]:
        origin, called, mine = stacks.facts(e.stack)
        moved = where_moved(e.window, stacks.cwd) if e.window is not None else e.detail or ""
        note = f'<div class="note">{_h(moved)}</div>' if e.kind == UNATTRIBUTED else ""
        pid = [f"<td>{_h(e.pid)}</td>"] if several else []
        cells = [
            f'<td class="num">{_h(e.index)}</td>',
            *pid,
            f"<td>{_h(e.stream)}</td>",
            f"<td>{_h(e.kind)}</td>",
            f"<td><code>{_h(api_label(e))}</code>{note}</td>",
            f"<td>{_swatch(origin, colors)}<code>{_h(called)}</code></td>",
        ]
        body.append((f'data-index="{_h(e.index)}" class="k-{_h(e.kind)}"', cells, mine))
    more = len(others) - _MAX_OTHER_ROWS
    return _card_table(
        "others",
        "Seeds and unattributed moves",
        "Click a row to find it on the timeline.",
        ["#", *(["pid"] if several else []), "stream", "kind", "api", "called at"],
        body,
        f"… {more:,} more (trace.events has them all)" if more > 0 else "",
    )


def _card_table(
    section: str, title: str, help_text: str, titles: list[str], rows: list[tuple[str, list[str], str]], more: str
) -> str:
    """A card holding a table; rows are (tr attributes, td cells, your code), the last column only if filled."""
    mine = any(row[2] for row in rows)
    head = "".join(f"<th>{_h(t)}</th>" for t in titles + (["your code"] if mine else []))
    body = "".join(
        f"<tr {attrs}>{''.join(cells)}"
        + (f'<td class="user"><code>{_h(user_line)}</code></td>' if mine else "")
        + "</tr>"
        for attrs, cells, user_line in rows
    )
    tail = f'<p class="more">{_h(more)}</p>' if more else ""
    return (
        f'<section class="card" id="{_h(section)}"><div class="card-head"><h2>{_h(title)}</h2>'
        f'<span class="help">{_h(help_text)}</span></div><table><thead><tr>{head}</tr></thead>'
        f"<tbody>{body}</tbody></table>{tail}</section>"
    )


def _findings_card(findings: Sequence[Any]) -> str:
    """Each finding's sentence and fix; clicking one lights up the events it rests on."""
    if not findings:
        return ""
    items = "".join(
        f'<li data-finding="{i}"><span class="f-kind">{_h(f.kind)}</span> {_h(f.message)}'
        + (f'<div class="fix"><b>fix:</b> {_h(f.fix)}</div>' if f.fix else "")
        + (
            f'<div class="f-events">events {_h(", ".join(f"#{n}" for n in f.events[:20]))}'
            f'{", …" if len(f.events) > 20 else ""}</div>'
            if f.events
            else ""
        )
        + "</li>"
        for i, f in enumerate(findings)
    )
    return (
        '<section class="card" id="findings"><div class="card-head"><h2>Findings</h2>'
        f'<span class="help">{_h(len(findings))} · click one to light up its events on the timeline.</span></div>'
        f'<ul class="findings">{items}</ul></section>'
    )


def _processes_card(trace: Trace) -> str:
    """Every process the trace saw, the traced one first; clicking one lights up its events."""
    body = []
    for p in trace.processes:
        cells = [
            f"<td>{_h(p.pid)}</td>",
            f"<td>{_h(role_of(p))}</td>",
            f"<td>{_h(started(p))}</td>",
            f'<td class="{"" if p.exit in (None, "normal") else "odd"}">{_h(ended(p))}</td>',
            f'<td class="num">{_h(f"{p.events:,}")}</td>',
        ]
        body.append((f'data-pid="{_h(p.pid)}"', cells, ""))
    return _card_table(
        "processes",
        "Processes",
        "The traced process first, then each child whose events were merged in. Click a row to light up its marks.",
        ["pid", "role", "started", "exit", "events"],
        body,
        "",
    )


def _swatch(origin: str, colors: dict[str, str]) -> str:
    color = colors.get(origin, _OTHER_COLOR)
    return f'<span class="swatch {_SWATCH_CLASSES[color]}" title="{_h(origin)}"></span>'


def _hints_card(trace: Trace) -> str:
    hint = hints(trace)
    notes = [f"<li>{_h(note)}</li>" for note in trace.notes]
    if not hint and not notes:
        return ""
    parts = ['<section class="card" id="hints">']
    if hint:
        parts.append(f'<h2>{_h(hint[0].rstrip(":"))}</h2><pre>{chr(10).join(_h(line) for line in hint[1:])}</pre>')
    if notes:
        parts.append(f'<h2>Notes</h2><ul class="notes">{"".join(notes)}</ul>')
    parts.append("</section>")
    return "".join(parts)


__all__ = ["YOUR_CODE", "render"]
