"""The draw log: a finished Trace as aligned text a person reads at a glance.

Top to bottom: a header with counts per stream and kind, and whether a cause was
found; the findings, each with its fix: the causes (what made the run
irreproducible) under their heading, then the risks (reproducible as run) under
theirs; where child processes drew too, the processes (pid, role, how each
started and ended); every event in order (the first ``max_lines`` of a long log)
with the frame that called the API (or the module being imported), the first
frame in the user's own code and, across processes, the pid that made it; draws
grouped by call site, always for all of them, saying in how many processes each
drew; hints naming the generator to draw from instead; the trace's notes.
Only the Trace is read: nothing here knows how it was recorded.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from .._paths import current_dir
from .._rows import event_rows, kind_count
from .._yours import is_yours
from ..trace import CAUSE, DRAW, RESTORE, RISK, SEED, UNATTRIBUTED, Event, Finding, Trace
from .base import (
    EMPTY,
    ENTROPY,
    Paint,
    Row,
    Table,
    api_label,
    called_at,
    ended,
    format_table,
    header,
    hints,
    in_processes,
    painter,
    plural,
    printable,
    processes_per_site,
    restore_note,
    role_of,
    several_processes,
    site_key,
    started,
    where_moved,
    your_code,
)

_TAIL = 3  # events shown from the end of a long log
_MAX_SITES = 20
_WIDTH = 100  # a finding's sentence is wrapped to this many columns
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
    several = several_processes(trace)
    events = _events(trace, paint, cwd, max(max_lines, 0), several)
    top = [paint(header(trace), "bold")]
    findings = _findings(trace, paint)
    if findings:  # the conclusions first; the events under them are the evidence
        events = [paint("Events:", "bold")] + events
    sections = [
        *(
            [top, findings, _processes(trace, paint) if several else [], events]
            if several or findings
            else [top + events]
        ),
        _sites(trace, paint, cwd, max_lines, several),
        hints(trace),
        _notes(trace),
    ]
    return "\n\n".join("\n".join(s) for s in sections if s)


# -- the events, in order -------------------------------------------------------


def _events(trace: Trace, paint: Paint, cwd: str, max_lines: int, several: bool) -> list[str]:
    """The event table, its elision line for a long log, and what was dropped."""
    events = event_rows(trace)  # only the events shown are made: a long log is not held as Events
    tail = _TAIL if max_lines >= 4 * _TAIL and len(events) > max_lines else 0
    head = list(events[: max_lines - tail] if len(events) > max_lines else events)
    shown = head + (list(events[-tail:]) if tail else [])
    hidden = len(events) - tail - len(head)
    lines: list[str] = []
    if shown:
        table = _event_table(shown, cwd, several)
        lines = format_table(table, paint)
        if hidden > 0:
            cut = 1 + sum(1 + bool(row.note) for row in table.rows[: len(head)])
            lines.insert(cut, paint(_elision(events, len(head), hidden), "dim"))
    elif hidden > 0:
        lines = [paint(_elision(events, len(head), hidden), "dim")]
    if trace.dropped:
        lines.append(
            f"  {trace.dropped:,} more events beyond max_events={trace.max_events:,} were counted "
            "but not kept; the counts and call sites include them."
        )
    if any(kind == UNATTRIBUTED for _s, kind in trace.counts()):
        lines += [paint(line, "warn") for line in _UNATTRIBUTED_WHY.splitlines()]
    return lines


def _elision(events: Sequence[Event], start: int, hidden: int) -> str:
    """The line that stands for the ``hidden`` events from ``start`` on."""
    odd = kind_count(events, UNATTRIBUTED, start, start + hidden)
    among = f", {odd:,} unattributed among them" if odd else ""
    return f"  … {hidden:,} more events not shown{among} (trace.events has them all)"


def _event_table(events: Sequence[Event], cwd: str, several: bool = False) -> Table:
    """Rows for ``events``; the pid column only across processes, the thread column only when more
    than one thread drew."""
    threads = len({(e.pid, e.thread) for e in events}) > len({e.pid for e in events})
    pid = ["pid"] if several else []
    titles = ["", "#", *pid, "stream", "kind", "api", "called at", "your code"] + (["thread"] if threads else [])
    table = Table(titles, "<>" + ">" * len(pid) + "<<<<<<", note_column=2 + len(pid))
    for e in events:
        odd = e.kind == UNATTRIBUTED
        called = called_at(e.stack, cwd)
        cells = [
            ("!" if odd else "", "alert"),
            (str(e.index), ""),
            *([(str(e.pid), "")] if several else []),
            (e.stream, ""),
            (e.kind, "warn" if odd else ""),
            (api_label(e), "warn" if odd else ""),
            (called, "" if is_yours(e.frame) else "dim"),
            (your_code(e.stack, cwd), "user"),
        ] + ([(e.thread, "dim")] if threads else [])
        if odd:
            table.rows.append(Row(cells, _moved(e, cwd), "warn"))
        else:
            # A seed's value is in its api label; any other detail (a call that raised) goes under it.
            note = e.detail if e.detail and e.kind != SEED else ""
            if e.from_entropy:
                note = ENTROPY
            elif e.kind == RESTORE:
                note = restore_note(e, cwd)
            table.rows.append(Row(cells, note, "dim"))
    return table


def _moved(event: Event, cwd: str) -> str:
    """The line under an unattributed move: the window it happened in."""
    return where_moved(event.window, cwd) if event.window is not None else event.detail or ""


# -- draws by call site ----------------------------------------------------------


def _sites(trace: Trace, paint: Paint, cwd: str, max_lines: int, several: bool = False) -> list[str]:
    """Every draw, dropped ones too, grouped by the calling line and the user's line, across processes."""
    groups: dict[tuple, list[int]] = {}
    for stat in trace.statistics("traceback"):
        key = site_key(stat, cwd)
        slot = groups.setdefault(key, [0, 0, is_yours(stat.frame)])
        slot[0] += stat.calls
        slot[1] += stat.values
    if not groups:
        return []
    ordered = sorted(groups.items(), key=lambda kv: (-kv[1][0], -kv[1][1], kv[0]))
    limit = min(_MAX_SITES, max(max_lines, 5))
    pids = processes_per_site(trace, cwd) if several else {}
    table = Table(["calls", "values", "stream", "api", "site", "your code", ""], ">><<<<<")
    for key, (calls, values, user) in ordered[:limit]:
        stream, api, site, mine = key
        cells = [
            (f"{calls:,}", ""),
            (f"{values:,}" if values else EMPTY, ""),
            (stream, ""),
            (api, ""),
            (site, "" if user else "dim"),
            (mine, "user"),
            (in_processes(pids.get(key)), "dim"),
        ]
        table.rows.append(Row(cells))
    total = sum(calls for calls, _v, _u in groups.values())
    lines = [paint(f"Draws by call site ({plural(total, DRAW)}, most calls first):", "bold")]
    lines += format_table(table, paint)
    if len(ordered) > limit:
        more = len(ordered) - limit
        lines.append(paint(f"  … {more:,} more call sites (trace.statistics() has them all)", "dim"))
    return lines


# -- processes and findings ------------------------------------------------------


def _processes(trace: Trace, paint: Paint) -> list[str]:
    """Every process the trace saw, the traced one first: what it was, how it started and ended."""
    processes = trace.processes
    table = Table(["pid", "role", "started", "exit", "events"], "><<<>")
    for p in processes:
        exit_style = "dim" if p.exit in (None, "normal") else "warn"
        table.rows.append(
            Row(
                [
                    (str(p.pid), ""),
                    (role_of(p), "" if p.role or p.start == "traced" else "dim"),
                    (started(p), "dim"),
                    (ended(p), exit_style),
                    (f"{p.events:,}", ""),
                ]
            )
        )
    return [paint(f"Processes ({len(processes):,}):", "bold")] + format_table(table, paint)


#: each level's heading, in the order the log lists them
_LEVELS = (
    (CAUSE, "Causes", ""),
    (RISK, "Risks", "reproducible as run, but a change before them moves your numbers"),
)


def _findings(trace: Trace, paint: Paint) -> list[str]:
    """The causes, then the risks: each finding's kind and sentence, the line to change, its events."""
    lines: list[str] = []
    for level, title, about in _LEVELS:
        found = [f for f in trace.findings if f.level == level]
        if not found:
            continue
        if lines:
            lines.append("")
        lines.append(paint(f"{title} ({len(found):,}):", "bold") + (paint(f" {about}", "dim") if about else ""))
        for f in found:
            lines += _finding(f, paint)
    return lines


def _finding(f: Finding, paint: Paint) -> list[str]:
    kind = printable(f.kind)
    first, *rest = _wrap(f"{kind}: {printable(f.message)}", "  ! ", "    ")
    lines = ["  " + paint("!", "alert") + " " + paint(kind, "alert") + first[4 + len(kind) :]] + rest
    if f.fix:
        # Each alternative on a line of its own: "fix: A" then "     or B".
        first, *others = printable(f.fix).split(", or ")
        fix = _wrap(f"fix: {first}", "    ", "         ")
        for other in others:
            fix += _wrap(f"or {other}", "         ", "            ")
        lines += [fix[0].replace("fix:", paint("fix:", "bold"), 1)] + fix[1:]
    if f.events:
        shown = ", ".join(f"#{i}" for i in f.events[:10]) + (", …" if len(f.events) > 10 else "")
        lines.append(paint(f"    events {shown}", "dim"))
    return lines


def _wrap(text: str, first: str, later: str) -> list[str]:
    """``text`` wrapped at spaces only (never inside a path), first line after ``first``."""
    return textwrap.wrap(
        text, _WIDTH, initial_indent=first, subsequent_indent=later, break_long_words=False, break_on_hyphens=False
    ) or [first.rstrip()]


# -- notes ------------------------------------------------------------------------


def _notes(trace: Trace) -> list[str]:
    return [printable(f"Note: {note}") for note in trace.notes]
