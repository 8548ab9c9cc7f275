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
Only the Trace is read: nothing here knows how it was recorded. The events'
columns and the tables' rows are made in ``_html_data``; the page's fixed style
and script are ``_html_page``'s; this module lays out the sections.

A log is untrusted input (people open each other's): every value from it goes
through ``_h`` or script-safe JSON, and the page's Content-Security-Policy lets
only its own style and script run, so markup that slipped through runs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape as _escape
from typing import Any

from .._paths import current_dir
from .._rows import event_rows, walk
from .._version import __version__
from ..trace import CAUSE, DRAW, ENTROPY, KINDS, RISK, SEED, UNATTRIBUTED, Event, Trace
from . import _html_page
from ._html_data import (
    OTHER_COLOR,
    PALETTE,
    YOUR_CODE,
    YOUR_CODE_COLOR,
    Stacks,
    json_for_script,
    site_rows,
    timeline,
)
from .base import (
    EMPTY,
    api_label,
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
)

# A swatch is coloured by a class, not a style attribute: the page's policy allows no inline style.
_SWATCH_CLASSES = {color: f"c{i}" for i, color in enumerate((YOUR_CODE_COLOR, OTHER_COLOR, *PALETTE))}
_SWATCH_CSS = "\n".join(f".swatch.{name} {{ background:{color}; }}" for color, name in _SWATCH_CLASSES.items())
_MAX_SITE_ROWS = 200
_MAX_OTHER_ROWS = 200
#: the kinds the table under the timeline lists
_NOT_DRAWS = frozenset(KINDS) - {DRAW}


def render(trace: Trace, *, title: str = "rngtrace report", max_marks: int = 100_000) -> str:
    """Return a self-contained HTML page for ``trace``; the first ``max_marks`` events get a mark."""
    cwd = current_dir()
    events = event_rows(trace)  # an Event made for each row marked or listed, not one held per row
    shown = list(events[: max(max_marks, 0)])
    stacks = Stacks(cwd)
    several = several_processes(trace)
    sites, site_keys = site_rows(trace, stacks)
    data = timeline(trace, shown, stacks, site_keys, several)
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
    return _html_page.document(_h(title), body, json_for_script(data), css=_SWATCH_CSS)


def _h(value: object) -> str:
    """``value`` as HTML text or attribute value: a log's names escaped, control characters shown as escapes."""
    return _escape(printable(str(value)))


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
        '<span class="shape seed"></span>seed<span class="shape odd"></span>unattributed'
        '<span class="shape entropy"></span>generator from entropy</span></div>'
        '<div class="timeline-row">'
        f'<div id="chart" data-events="{shown}" data-lanes="{len(data["lanes"])}" role="img" '
        f'aria-label="timeline of {shown:,} events"><canvas></canvas><div id="tip" hidden></div>'
        "<noscript>The timeline is drawn by JavaScript; the tables below need none.</noscript></div>"
        '<aside id="detail"><p class="placeholder">Hover a mark to see the stack that made it; '
        "click to keep it here.</p></aside></div></section>"
    )


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


def _others_card(events: Sequence[Event], stacks: Stacks, colors: dict[str, str], several: bool = False) -> str:
    """Every seed, unattributed move and generator from entropy, in order: the events that explain a changed number."""
    others = [events[i] for i, _e in walk(events, _NOT_DRAWS)]
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
        "Seeds, unattributed moves and generators from entropy"
        if any(e.kind == ENTROPY for e in others)
        else "Seeds and unattributed moves",
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


#: each level's heading in the findings panel, in the order it lists them
_LEVELS = ((CAUSE, "Causes"), (RISK, "Risks: reproducible as run, but a change before them moves your numbers"))


def _findings_card(findings: Sequence[Any]) -> str:
    """The causes, then the risks: each finding's sentence and fix; clicking one lights up its events."""
    if not findings:
        return ""
    groups = []
    for level, title in _LEVELS:
        items = "".join(_finding_item(i, f) for i, f in enumerate(findings) if f.level == level)
        if items:
            groups.append(f'<h3 class="level-{_h(level)}">{_h(title)}</h3><ul class="findings">{items}</ul>')
    causes = sum(f.level == CAUSE for f in findings)
    said = f"{causes:,} cause{'s' * (causes != 1)}" if causes else "no cause found in this run"
    return (
        '<section class="card" id="findings"><div class="card-head"><h2>Findings</h2>'
        f'<span class="help">{_h(said)} · click one to light up its events on the timeline.</span></div>'
        f"{''.join(groups)}</section>"
    )


def _finding_item(i: int, f: Any) -> str:
    risk = ' class="risk"' if f.level == RISK else ""
    return (
        f'<li data-finding="{i}"{risk}><span class="f-kind">{_h(f.kind)}</span> {_h(f.message)}'
        + (f'<div class="fix"><b>fix:</b> {_h(f.fix)}</div>' if f.fix else "")
        + (
            f'<div class="f-events">events {_h(", ".join(f"#{n}" for n in f.events[:20]))}'
            f'{", …" if len(f.events) > 20 else ""}</div>'
            if f.events
            else ""
        )
        + "</li>"
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
    color = colors.get(origin, OTHER_COLOR)
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
