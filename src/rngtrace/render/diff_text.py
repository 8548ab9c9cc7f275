"""A comparison of two runs as text: where they first part, then the call sites whose counts differ.

What a reader needs first is one sentence naming the line to look at ("B has 1
extra numpy draw at acc/devinit.py:10 in init, before the draw both runs make at
story.py:10 in <module>"), then both runs' stacks at that place. Where the runs
ran other processes, or only one run has a finding (two workers that drew the
same numbers), one line each says so under the header.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import cast

from .._paths import current_dir
from .._yours import is_yours, line_to_name, user_index
from ..diff import ONLY_A, ONLY_B, VALUES, Divergence, SiteDifference, TraceDiff, file_key
from ..trace import DRAW, SEED, UNATTRIBUTED, Event, Finding, Frame, Process, Trace
from .base import (
    EMPTY,
    Paint,
    Row,
    Table,
    api_label,
    between,
    describe,
    format_table,
    painter,
    plural,
    printable,
    where_moved,
)

_SHOWN = 3  # a side's divergent events shown with their stacks
_LATER = 5  # later divergences listed by their headline
_MAX_SITES = 20
_STACK = 8  # frames shown per stack


def render(diff: TraceDiff, *, names: tuple[str, str] = ("A", "B"), color: bool = False) -> str:
    """Return the comparison as text; ANSI colour only when ``color`` is true."""
    paint = painter(color)
    cwd = current_dir()
    sections = [
        [paint(printable(_header(diff, names)), "bold")],
        _processes(diff, paint),
        _states(diff, paint, cwd),
        _entropy(diff, paint, cwd),
    ]
    first = diff.first
    if first is not None:
        sections.append(_first(first, paint, cwd))
    sections.append(_findings(diff, paint, cwd))
    if first is not None:
        later = diff.divergences[1:]
        if later:
            sections.append(_later(later, paint, cwd))
    if diff.sites:
        sections.append(_sites(diff.sites, paint, cwd))
    sections.append(_notes(diff))
    return "\n\n".join("\n".join(s) for s in sections if s)


def _header(diff: TraceDiff, names: tuple[str, str]) -> str:
    a, b = ("A", "B") if names == ("A", "B") else (f"A = {names[0]}", f"B = {names[1]}")
    if diff.same:
        n = len(diff.a)
        return (
            f"rngtrace diff: {a} and {b} drew the same — {plural(n, 'event')} each, "
            "the same calls from the same lines in the same order"
        )
    sizes = f"{a} ({plural(len(diff.a), 'event')}) and {b} ({plural(len(diff.b), 'event')})"
    n = len(diff.divergences)
    if not n and not diff.sites and not diff.states:
        places = _and([describe(line_to_name(e), cwd=current_dir()) for e in diff.entropy[:3]])
        more = f" and {len(diff.entropy) - 3} more" if len(diff.entropy) > 3 else ""
        return (
            f"rngtrace diff: {a} and {b} made the same calls, but made generators from OS entropy at {places}{more}: "
            "they draw other numbers in every run"
        )
    if not n and not diff.sites:
        return (
            f"rngtrace diff: {a} and {b} made the same calls, but drew other numbers: "
            f"{_and([d.stream for d in diff.states])} started from a different state"
        )
    if not n:
        return f"rngtrace diff: {sizes} differ in how often they drew at some call sites"
    return f"rngtrace diff: {sizes} differ in {n:,} place{'' if n == 1 else 's'}"


# -- processes and findings ---------------------------------------------------------


def _processes(diff: TraceDiff, paint: Paint) -> list[str]:
    """A line when the runs ran other processes."""
    a, b = diff.a.processes, diff.b.processes
    if len(a) != len(b) or _roles(a) != _roles(b):
        return [paint("Processes differ: ", "warn") + printable(f"A ran {_ran(a)}, B ran {_ran(b)}")]
    return []


def _states(diff: TraceDiff, paint: Paint, cwd: str) -> list[str]:
    """A line per stream that drew from another state in A than in B: other numbers from the same calls."""
    lines = []
    for d in diff.states:
        if d.never_seeded:
            why = "never seeded in either run"
        elif d.from_entropy and d.seed_a is not None:
            why = f"seeded from OS entropy in both runs, at {describe(line_to_name(d.seed_a), cwd)}"
        else:
            why = f"first draw from it at {describe(line_to_name(d.draw_a), cwd)}"
        lines.append(
            paint("States differ: ", "alert")
            + printable(
                f"{d.stream} started from a different state in A and B ({why}), so the same calls drew other numbers"
            )
        )
    return lines


def _entropy(diff: TraceDiff, paint: Paint, cwd: str) -> list[str]:
    """A line per generator made from OS entropy: whatever else matched, it drew other numbers in each run."""
    return [
        paint("From entropy: ", "alert")
        + printable(
            f"{e.api}() at {describe(line_to_name(e), cwd)} made a generator from OS entropy, so it draws other "
            "numbers in every run"
        )
        for e in diff.entropy
    ]


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _findings(diff: TraceDiff, paint: Paint, cwd: str) -> list[str]:
    """A line per finding only one run has: the other run has none of its kind and stream naming the same lines."""
    lines = []
    found = {
        side: [(f, _finding_lines(f, trace)) for f in trace.findings]
        for side, trace in (("A", cast(Trace, diff.a)), ("B", cast(Trace, diff.b)))
    }
    for side, other in (("A", "B"), ("B", "A")):
        for f, named in found[side]:
            if not any(_same_finding(f, named, g, theirs) for g, theirs in found[other]):
                lines.append(paint(f"Only in {side}: ", "alert") + printable(f"{f.kind}: {f.message}"))
    return lines


def _roles(processes: Sequence[Process]) -> list[tuple[str, str]]:
    return sorted((p.start, p.role or "") for p in processes)


def _ran(processes: Sequence[Process]) -> str:
    """``3 processes (traced, DataLoader worker ×2)``: how many, and what they were."""
    kinds = Counter(
        "traced"
        if p.start == "traced" and not p.role
        else re.sub(r" \d+$", "", p.role)
        if p.role
        else f"{p.start} child"
        for p in processes
    )
    what = ", ".join(name + (f" ×{n}" if n > 1 else "") for name, n in kinds.items())
    return f"{len(processes):,} process{'' if len(processes) == 1 else 'es'} ({what})"


def _finding_lines(f: Finding, trace: Trace) -> frozenset:
    """The lines a finding's events name, as both runs can name them (the user's line, else the calling one)."""
    events = trace.events
    named = (line_to_name(events[i]) for i in f.events if 0 <= i < len(events))
    return frozenset((file_key(line.filename), line.lineno) if line is not None else None for line in named)


def _same_finding(f: Finding, lines: frozenset, g: Finding, theirs: frozenset) -> bool:
    """Whether two runs' findings are one: same kind and stream, and one's lines all among the other's.

    A run that made more of the same draws (another epoch, a validation pass) names more lines or events
    in the same finding; pids and counts differ between runs and are not compared. A finding with no
    events (a setting) is the same where its sentence is.
    """
    if (f.kind, f.stream) != (g.kind, g.stream):
        return False
    if not lines or not theirs:
        return not lines and not theirs and f.message == g.message
    return lines <= theirs or theirs <= lines


# -- the first divergence ----------------------------------------------------------


def _headline(d: Divergence, cwd: str) -> str:
    """One sentence saying where the runs part and what each did there."""
    if d.kind == VALUES:
        x, y = d.a[0], d.b[0]
        where = f"the {x.stream} {x.kind} {_at([x], cwd)} differs"
        if x.kind == SEED:
            return f"{where}: A seeded {_seed(x)}, B {_seed(y)}"
        return f"{where}: A drew {x.count:,} value{'' if x.count == 1 else 's'}, B {y.count:,}"
    if d.kind == ONLY_A:
        text = f"A has {_count(d.a)} {_at(d.a, cwd)} that B lacks"
    elif d.kind == ONLY_B:
        text = f"B has {_count(d.b, 'extra ')} {_at(d.b, cwd)}"
    else:
        text = f"A has {_count(d.a)} {_at(d.a, cwd)} where B has {_count(d.b)} {_at(d.b, cwd)}"
    shared = d.next_b if d.kind == ONLY_B else d.next_a  # in the timeline the sentence is about
    if shared is not None:
        return f"{text}, before the {_noun([shared])} both runs make {_at([shared], cwd, library=False)}"
    return f"{text}, at the end of the {d.stream} stream"


def _seed(event: Event) -> str:
    return str(event.detail) if event.detail is not None else "without a value"


def _count(events: Sequence[Event], extra: str = "") -> str:
    """``1 extra numpy draw``, ``3 numpy draws``, ``2 torch events`` (mixed kinds)."""
    n = len(events)
    return f"{n:,} {extra}{events[0].stream} {_noun(events)}{'' if n == 1 else 's'}"


def _noun(events: Sequence[Event]) -> str:
    kinds = {e.kind for e in events}
    kind = kinds.pop() if len(kinds) == 1 else "event"
    return "unattributed move" if kind == UNATTRIBUTED else kind


def _at(events: Sequence[Event], cwd: str, *, library: bool = True) -> str:
    """``at train_val.py:20 in validate (in torch/utils/data/dataloader.py:692 in ...)``: the user's line, then the
    library's (where ``library``).

    The user's line is the innermost one of the user's frames every event came through (for one event, its first
    user frame): the place to change. ``starting at`` where they share none. An unattributed move has no line of
    its own: it is placed by its window (``between #3 story.py:9 and #5 story.py:10``), never at the call that
    noticed it.
    """
    first = events[0]
    if first.window is not None:
        where = between(first.window, cwd)
        return where if len(events) == 1 else f"starting {where}"
    yours = _shared_user_frame(events)
    line = yours or line_to_name(first)
    if line is None:
        return "at a line no stack recorded"
    same = yours is not None or all(line_to_name(e) == line for e in events)
    where = f"{'at' if same else 'starting at'} {describe(line, cwd)}"
    inner = first.frame
    if library and inner is not None and inner != line and not is_yours(inner):
        drew = "in" if all(e.frame == inner for e in events) else "starting in"
        where += f" ({drew} {describe(inner, cwd)})"
    return where


def _shared_user_frame(events: Sequence[Event]) -> Frame | None:
    """The innermost of the first event's user frames that every event's stack holds, or None."""
    rest = [set(e.stack) for e in events[1:]]
    return next((f for f in events[0].stack if is_yours(f) and all(f in stack for stack in rest)), None)


def _first(d: Divergence, paint: Paint, cwd: str) -> list[str]:
    """The headline, then each run's events at that place with their stacks."""
    return [paint("First divergence: ", "bold") + printable(_headline(d, cwd)), *divergence_rows(d, paint, cwd)]


def divergence_rows(d: Divergence, paint: Paint, cwd: str, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """Each run's events where they part, with their stacks; ``names`` label the runs (``run 1``)."""
    rows = {name: _side_rows(d, side, name) for side, name in zip(("A", "B"), names)}
    width = max(len(api_label(e)) for side in rows.values() for e, _tag, _stack in side if e is not None)
    number = max(len(f"#{e.index}") for side in rows.values() for e, _tag, _stack in side if e is not None)
    lines = []
    for side, side_rows in rows.items():
        label = side
        for event, tag, stack in side_rows:
            if event is None:
                lines.append(f"  {label}  {paint(tag, 'dim')}")
            else:
                text = f"  {label}  {'#' + str(event.index):<{number}}  {api_label(event):<{width}}  "
                lines.append(text + paint(tag, "warn" if tag.startswith(("only", "differs")) else "dim"))
                indent = " " * (6 + len(label) + number)  # under the api
                lines += [f"{indent}{paint(frame, style)}" for frame, style in (_stack(event, cwd) if stack else [])]
            label = " " * len(side)
    return lines


def _side_rows(d: Divergence, side: str, name: str) -> list[tuple[Event | None, str, bool]]:
    """(event, tag, show its stack) for run ``side`` (``name``): its own events here, then the next shared one."""
    own, nxt = (d.a, d.next_a) if side == "A" else (d.b, d.next_b)
    if d.kind == VALUES:
        return [(own[0], "differs", True)]  # the api column already shows the count or the seed
    rows: list[tuple[Event | None, str, bool]] = [(e, f"only in {name}", True) for e in own[:_SHOWN]]
    if len(own) > _SHOWN:
        rows.append((None, f"… {len(own) - _SHOWN:,} more only in {name}", False))
    if nxt is not None:
        rows.append((nxt, "next in both runs", not own))
    elif not own:
        rows.append((None, f"(no more {d.stream} events)", False))
    return rows


def _stack(event: Event, cwd: str) -> list[tuple[str, str]]:
    """The event's frames, innermost first, down to the outermost one in the user's code."""
    if event.window is not None:  # no stack: where it happened is all there is to show
        return [(where_moved(event.window, cwd), "warn")]
    frames: Sequence[Frame] = event.stack
    outermost = user_index(frames[::-1])
    if outermost is not None:
        frames = frames[: len(frames) - outermost]
    limit = max(_STACK, (user_index(frames) or 0) + 1)  # never cut above the user's first frame
    shown = [(describe(f, cwd), "" if is_yours(f) else "dim") for f in frames[:limit]]
    if len(frames) > limit:
        shown.append((f"… {plural(len(frames) - limit, 'more frame')}", "dim"))
    return shown


def _later(later: Sequence[Divergence], paint: Paint, cwd: str) -> list[str]:
    lines = [paint(f"Then {len(later):,} more place{'' if len(later) == 1 else 's'} where the runs part:", "bold")]
    said: dict[str, int] = {}  # the same sentence for several places is said once, with a count
    for d in later:
        text = printable(_headline(d, cwd))
        said[text] = said.get(text, 0) + 1
    lines += [f"  - {text}" + (f" (×{n})" if n > 1 else "") for text, n in list(said.items())[:_LATER]]
    if len(said) > _LATER:
        lines.append(paint(f"  … {len(said) - _LATER:,} more (rngtrace.diff.compare(a, b).divergences)", "dim"))
    return lines


# -- call sites whose counts differ -------------------------------------------------


def _sites(sites: Sequence[SiteDifference], paint: Paint, cwd: str) -> list[str]:
    titles = ["calls A", "calls B", "values A", "values B", "stream", "kind", "api", "site"]
    table = Table(titles, ">>>><<<<")
    for s in sites[:_MAX_SITES]:
        counted = s.kind == DRAW and (s.a_values or s.b_values)  # else: seeds, or counts unknown
        values = [f"{v:,}" if counted else EMPTY for v in (s.a_values, s.b_values)]
        user = is_yours(s.frame)
        table.rows.append(
            Row(
                [
                    (f"{s.a_calls:,}", ""),
                    (f"{s.b_calls:,}", ""),
                    (values[0], ""),
                    (values[1], ""),
                    (s.stream, ""),
                    (s.kind, ""),
                    (s.api, ""),
                    (describe(s.frame, cwd), "" if user else "dim"),
                ]
            )
        )
    lines = [paint("Call sites whose counts differ:", "bold")] + format_table(table, paint)
    if len(sites) > _MAX_SITES:
        lines.append(paint(f"  … {len(sites) - _MAX_SITES:,} more call sites", "dim"))
    return lines


def _notes(diff: TraceDiff) -> list[str]:
    return [
        f"Note: {side} counted {plural(trace.dropped, 'event')} past max_events={trace.max_events:,} "
        "without keeping them; only kept events are aligned, the call-site counts include them all."
        for side, trace in (("A", diff.a), ("B", diff.b))
        if trace.dropped
    ]
