"""``rngtrace check``'s report: the verdict on its first line, then where the runs part, the cause and the fix."""

from __future__ import annotations

from collections.abc import Sequence

from .._paths import current_dir
from .._reproduce import CAUSES, Verdict
from ..diff import VALUES, Divergence
from .base import Paint, painter, printable
from .diff_text import divergence_rows


def render(verdict: Verdict, *, logs: Sequence[str] = (), color: bool = False) -> str:
    """Return the report as text; ``logs`` are the runs' saved logs, where they were kept."""
    paint = painter(color)
    sections = [[paint(printable(headline(verdict)), "bold")]]
    if verdict.cause is not None:
        sections.append(_where(verdict, paint))
        sections.append(_cause(verdict, paint))
    sections.append(_logs(verdict, logs))
    return "\n\n".join("\n".join(s) for s in sections if s)


def headline(verdict: Verdict) -> str:
    """The verdict line: ``rngtrace check: reproducible — ...`` or ``not reproducible — <the cause>``."""
    if verdict.cause is not None:
        return f"rngtrace check: not reproducible — {verdict.cause.summary}"
    runs = f"{verdict.runs:,} runs"
    if not verdict.draws:
        return f"rngtrace check: reproducible — {runs} drew nothing from a global random stream and printed the same"
    ended = " and ended in the same states" if verdict.ended_alike else ""
    draws = f"{verdict.draws:,} draw{'' if verdict.draws == 1 else 's'}"
    return f"rngtrace check: reproducible — {runs} made the same {draws} from {', '.join(verdict.streams)}{ended}"


def _where(verdict: Verdict, paint: Paint) -> list[str]:
    """Both runs' events where they part, with their stacks (nothing where only the output differs)."""
    diff = verdict.diff
    if diff is None:
        return []
    names = ("run 1", f"run {verdict.other}")
    cwd = current_dir()
    states = sorted(diff.states, key=lambda s: s.draw_a.index)
    if states and verdict.cause is not None and verdict.cause.kind in ("unseeded", "library-entropy"):
        s = states[0]
        if s.seed_a is not None and s.seed_b is not None:  # the seed that gave each run another state
            a, b = s.seed_a, s.seed_b
            title = f"Where {names[0]} and {names[1]} part: {a.api}() gives {s.stream} another state in each run"
        else:
            a, b = s.draw_a, s.draw_b
            title = f"Where {names[0]} and {names[1]} part: the first {s.stream} draw, from another state in each run"
        pair = Divergence(VALUES, s.stream, (a,), (b,), None, None, (a.index, b.index))
        return [paint(title, "bold"), *divergence_rows(pair, paint, cwd, names)]
    if diff.first is not None:
        title = f"Where {names[0]} and {names[1]} part ({diff.first.stream}):"
        return [paint(title, "bold"), *divergence_rows(diff.first, paint, cwd, names)]
    return []


def _cause(verdict: Verdict, paint: Paint) -> list[str]:
    cause = verdict.cause
    assert cause is not None
    lines = [paint("Cause: ", "bold") + printable(f"{cause.kind} — {CAUSES.get(cause.kind, cause.kind)}")]
    lines += [f"  {printable(line)}" for line in cause.detail]
    if cause.fix:
        lines.append("  " + paint("fix: ", "bold") + printable(cause.fix))
    return lines


def _logs(verdict: Verdict, logs: Sequence[str]) -> list[str]:
    if not logs:
        if verdict.cause is None:
            return []
        return ["The runs' logs were not kept: --json DIR keeps them for rngtrace show and rngtrace diff."]
    kept = [f"Logs: {printable(', '.join(logs))}"]
    if verdict.cause is not None and verdict.other and len(logs) >= verdict.other:
        kept.append(f"  rngtrace diff {printable(logs[0])} {printable(logs[verdict.other - 1])}")
    return kept
