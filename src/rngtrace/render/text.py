"""The draw log: a finished Trace as aligned text a person reads at a glance.

Top to bottom: a header with counts per stream and kind; every event in order
(the first ``max_lines`` of a long log) with the frame that called the API and
the first frame in the user's own code; draws grouped by call site, always for
all of them; hints naming the generator to draw from instead; the trace's notes.
Only the Trace is read: nothing here knows how it was recorded.
"""

from __future__ import annotations

from typing import Sequence

from .._paths import current_dir, is_user_file
from ..trace import DRAW, SEED, UNATTRIBUTED, Event, Trace
from .base import (
    EMPTY,
    Paint,
    Row,
    Table,
    api_label,
    describe,
    format_table,
    header,
    hints,
    painter,
    plural,
    printable,
    where_moved,
    your_code,
)

_TAIL = 3  # events shown from the end of a long log
_MAX_SITES = 20
_UNATTRIBUTED_WHY = (
    "! unattributed: no recorded call made the move; it happened in the window named under it, usually\n"
    "  through a reference bound before tracing (`from numpy.random import rand`) or in C code."
)


def render(trace: Trace, *, color: bool = False, max_lines: int = 60) -> str:
    """Return the draw log for ``trace``; ANSI colour only when ``color`` is true."""
    paint = painter(color)
    if len(trace) == 0:
        return "\n".join([paint(header(trace), "bold")] + _notes(trace))
    cwd = current_dir()
    sections = [
        [paint(header(trace), "bold")] + _events(trace, paint, cwd, max(max_lines, 0)),
        _sites(trace, paint, cwd, max_lines),
        hints(trace),
        _notes(trace),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s)


# -- the events, in order -------------------------------------------------------


def _events(trace: Trace, paint: Paint, cwd: str, max_lines: int) -> list[str]:
    """The event table, its elision line for a long log, and what was dropped."""
    events = trace.events
    tail = _TAIL if max_lines >= 4 * _TAIL and len(events) > max_lines else 0
    head = events[: max_lines - tail] if len(events) > max_lines else events
    shown = head + (events[-tail:] if tail else [])
    hidden = events[len(head) : len(events) - tail]
    lines: list[str] = []
    if shown:
        table = _event_table(shown, cwd)
        lines = format_table(table, paint)
        if hidden:
            cut = 1 + sum(1 + bool(row.note) for row in table.rows[: len(head)])
            lines.insert(cut, paint(_elision(hidden), "dim"))
    elif hidden:
        lines = [paint(_elision(hidden), "dim")]
    if trace.dropped:
        lines.append(
            f"  {trace.dropped:,} more events beyond max_events={trace.max_events:,} were counted "
            "but not kept; the counts and call sites include them."
        )
    if any(kind == UNATTRIBUTED for _s, kind in trace.counts()):
        lines += [paint(line, "warn") for line in _UNATTRIBUTED_WHY.splitlines()]
    return lines


def _elision(hidden: Sequence[Event]) -> str:
    odd = sum(e.kind == UNATTRIBUTED for e in hidden)
    among = f", {odd:,} unattributed among them" if odd else ""
    return f"  … {len(hidden):,} more events not shown{among} (trace.events has them all)"


def _event_table(events: Sequence[Event], cwd: str) -> Table:
    """Rows for ``events``; the thread column only when more than one thread drew."""
    threads = len({e.thread for e in events}) > 1
    titles = ["", "#", "stream", "kind", "api", "called at", "your code"] + (["thread"] if threads else [])
    table = Table(titles, "<><<<<<<", note_column=2)
    for e in events:
        odd = e.kind == UNATTRIBUTED
        called = describe(e.frame, cwd)
        cells = [
            ("!" if odd else "", "alert"),
            (str(e.index), ""),
            (e.stream, ""),
            (e.kind, "warn" if odd else ""),
            (api_label(e), "warn" if odd else ""),
            (called, "" if e.frame and is_user_file(e.frame.filename) else "dim"),
            (your_code(e.stack, cwd), "user"),
        ] + ([(e.thread, "dim")] if threads else [])
        if odd:
            table.rows.append(Row(cells, _moved(e, cwd), "warn"))
        else:
            # A seed's value is in its api label; any other detail (a call that raised) goes under it.
            note = e.detail if e.detail and e.kind != SEED else ""
            table.rows.append(Row(cells, note, "dim"))
    return table


def _moved(event: Event, cwd: str) -> str:
    """The line under an unattributed move: the window it happened in."""
    return where_moved(event.window, cwd) if event.window is not None else event.detail or ""


# -- draws by call site ----------------------------------------------------------


def _sites(trace: Trace, paint: Paint, cwd: str, max_lines: int) -> list[str]:
    """Every draw, dropped ones too, grouped by the calling line and the user's line."""
    groups: dict[tuple, list[int]] = {}
    for stat in trace.statistics("traceback"):
        key = (stat.stream, stat.api, describe(stat.frame, cwd), your_code(stat.stack, cwd))
        slot = groups.setdefault(key, [0, 0, bool(stat.frame and is_user_file(stat.frame.filename))])
        slot[0] += stat.calls
        slot[1] += stat.values
    if not groups:
        return []
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    limit = min(_MAX_SITES, max(max_lines, 5))
    table = Table(["calls", "values", "stream", "api", "site", "your code"], ">><<<<")
    for (stream, api, site, mine), (calls, values, user) in ordered[:limit]:
        cells = [(f"{calls:,}", ""), (f"{values:,}" if values else EMPTY, ""), (stream, ""),
                 (api, ""), (site, "" if user else "dim"), (mine, "user")]
        table.rows.append(Row(cells))
    total = sum(calls for calls, _v, _u in groups.values())
    lines = [paint(f"Draws by call site ({plural(total, DRAW)}, most calls first):", "bold")]
    lines += format_table(table, paint)
    if len(ordered) > limit:
        more = len(ordered) - limit
        lines.append(paint(f"  … {more:,} more call sites (trace.statistics() has them all)", "dim"))
    return lines


# -- notes ------------------------------------------------------------------------


def _notes(trace: Trace) -> list[str]:
    return [printable(f"Note: {note}") for note in trace.notes]
