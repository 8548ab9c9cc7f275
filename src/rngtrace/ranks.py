"""``rngtrace ranks DIR``: where do the ranks of a distributed run stop drawing alike?

``rng_trace(log_dir=DIR)`` saved one log per block and process (``_logdir``):
``rank-0.json``, ``rank-1.json``, and ``rank-0.2.json`` for a rank's second block.
This face gathers those logs and renders what the analysis finds in them: where
each stream parts and why is decided in ``_divergent`` (the ``divergent``
finding, in ``_findings.ACROSS_RUNS``); what is printed, with each side's stack,
is decided here.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ._cli_outputs import write
from ._divergent import RankLog, Split, compared_events, finding, in_block, nth, plural_events, ranks_named, splits
from ._errors import LogError
from ._findings import across_runs
from ._logdir import LOG_NAME
from ._paths import current_dir
from ._say import PROG, add_max_log_size, say
from ._yours import line_to_name, user_index
from .render.base import api_label, describe, plural, printable, stream_key
from .trace import DRAW, SEED, Event, Finding, Trace

#: frames printed per stack at a divergence; the rest are counted
_SHOWN_FRAMES = 8


# -- reading ---------------------------------------------------------------------------


def load_logs(folder: str | os.PathLike[str], *, max_size: int | None = None) -> tuple[list[RankLog], int]:
    """(the logs to compare, how many logs named by pid were left out) from ``folder``.

    Logs named by rank are compared when there are any, and the pid-named ones beside
    them left out (processes with no rank, such as workers); else every pid-named log
    is. Raise ``LogError`` in one line for a missing folder, fewer than two processes'
    logs, or a log that cannot be read.
    """
    shown = os.fspath(folder)
    if not os.path.isdir(folder):
        what = "is not a folder" if os.path.exists(folder) else "does not exist"
        raise LogError(f"{shown!r} {what}; give the log_dir the ranks saved their logs in")
    found = [(match, entry) for entry in sorted(os.listdir(folder)) if (match := LOG_NAME.fullmatch(entry))]
    by = "rank" if any(match.group(1) == "rank" for match, _ in found) else "pid"
    chosen = [(match, entry) for match, entry in found if match.group(1) == by]
    if len({match.group(2) for match, _ in chosen}) < 2:
        have = f"only {chosen[0][1]}" if chosen else "no rank-N.json or pid-N.json logs"
        raise LogError(f"{shown!r} holds {have}; run every rank with rng_trace(log_dir=...) into this folder")
    logs = [
        RankLog(
            os.path.join(shown, entry),
            by,
            int(match.group(2)),
            int(match.group(3) or 1),
            Trace.load(os.path.join(shown, entry), max_size=max_size),
        )
        for match, entry in chosen
    ]
    logs.sort(key=lambda log: (log.block, log.number))
    return logs, len(found) - len(chosen)


# -- finding ---------------------------------------------------------------------------


def findings(logs: Sequence[RankLog]) -> list[Finding]:
    """The findings across the ranks' logs: a ``divergent`` one for each stream whose draws part.

    ``pids`` holds each side's processes, rank 0's side first; ``events`` the index,
    in each of those processes' own trace, of its first divergent event (-1: none).
    """
    return across_runs(logs)


# -- the report ------------------------------------------------------------------------


def report(logs: Sequence[RankLog], found: Sequence[Split], left_out: int = 0) -> str:
    """The text ``rngtrace ranks`` prints: one line when all ranks drew alike, else each split with its stacks."""
    processes = sorted({(log.by, log.number) for log in logs})
    by = logs[0].by
    who = f"{len(processes)} {by}s" if by == "rank" else f"{len(processes)} processes"
    blocks = max(log.block for log in logs)
    lines = []
    if not found:
        first = min(processes)
        counts: dict[tuple[str, str], int] = {}
        for log in logs:
            if (log.by, log.number) == first:
                for stream, events in compared_events(log.trace).items():
                    for event in events:
                        counts[stream, event.kind] = counts.get((stream, event.kind), 0) + 1
        parts = [
            f"{stream}: "
            + ", ".join(plural(counts[stream, kind], kind) for kind in (SEED, DRAW) if (stream, kind) in counts)
            for stream in sorted({s for s, _ in counts}, key=stream_key)
        ]
        in_blocks = f" in {blocks} blocks" if blocks > 1 else ""
        lines.append(
            printable(
                f"{PROG} ranks: all {who} drew alike{in_blocks} — "
                + (" · ".join(parts) if parts else "no draws or seeds")
            )
        )
    else:
        lines.append(f"{PROG} ranks: the {who} stop drawing alike in {plural(len(found), 'stream')}")
        for split in found:
            lines += [""] + _split_lines(split)
    for log in logs:
        if log.trace.dropped:
            lines.append(
                f"({os.path.basename(log.path)} kept its first {len(log.trace.events):,} events of "
                f"{len(log.trace):,} (max_events): the rest were not compared)"
            )
    if left_out:
        lines.append(f"({plural(left_out, 'log')} named by pid left out: processes with no rank)")
    return "\n".join(lines)


def _split_lines(split: Split) -> list[str]:
    """The split's headline, then each side: its event with the ``#N`` its own log gives it, and its stack."""
    cwd = current_dir()
    last = f"; the last at {_where(split.before, cwd)}" if split.before is not None else ""
    lines = [
        printable(
            f"{split.stream}: the ranks part at their {nth(split)}{in_block(split)} "
            f"({split.position:,} alike before it{last})"
        )
    ]
    names = [ranks_named(side.ranks) for side in split.sides]
    numbers = [_numbers(side.indexes) for side in split.sides]
    width, number = max(len(n) for n in names), max(len(n) for n in numbers)
    for side, name, numbered in zip(split.sides, names, numbers):
        event = side.event
        head = f"  {name:<{width}}  {numbered:<{number}}  "
        if event is None:
            lines.append(printable(f"{head}made no more: {plural_events(side.total, split.stream)} in all"))
            continue
        lines.append(printable(f"{head}{event.kind} {api_label(event)}"))
        lines += [printable(f"{'':{len(head)}}{frame}") for frame in _stack(event, cwd)]
    lines.append(printable(f"  fix: {finding(split).fix}"))
    return lines


def _numbers(indexes: Sequence[int]) -> str:
    """``#5``, or ``#5, #7`` where the ranks of one side numbered it differently in their logs; "" for none."""
    shown = list(dict.fromkeys(f"#{i}" for i in indexes if i >= 0))
    return ", ".join(shown)


def _where(event: Event, cwd: str) -> str:
    """``train.py:7 in <module>``: the user's line an event came from, else the line that called."""
    line = line_to_name(event)
    return describe(line, cwd) if line is not None else "a line no stack recorded"


def _stack(event: Event, cwd: str) -> list[str]:
    """The event's frames, innermost first: at least ``_SHOWN_FRAMES``, never cut above the user's first frame."""
    frames = event.stack
    limit = max(_SHOWN_FRAMES, (user_index(frames) or 0) + 1)
    shown = [describe(frame, cwd) for frame in frames[:limit]]
    if len(frames) > limit:
        shown.append(f"… {plural(len(frames) - limit, 'more frame')}")
    return shown


# -- the command -----------------------------------------------------------------------

DESCRIPTION = (
    "Compare the logs that rng_trace(log_dir=DIR) saved for each rank of a distributed run, "
    "stream by stream, and print the first event where the ranks stop drawing alike, with each "
    "rank's stack. Exit status 0: all ranks drew alike; 1: they diverge; 2: no logs to compare."
)


def add_parser(subcommands: Any) -> argparse.ArgumentParser:
    """Add ``ranks`` to the CLI's subcommands; its handler is ``command``."""
    parser = subcommands.add_parser(
        "ranks", help="say where the ranks of a distributed run stop drawing alike", description=DESCRIPTION
    )
    _arguments(parser)
    return parser


def _arguments(parser: argparse.ArgumentParser) -> None:

    parser.add_argument("folder", metavar="DIR", help="the log_dir every rank saved its log in")
    add_max_log_size(parser)
    parser.set_defaults(handler=command)


def command(args: argparse.Namespace) -> int:
    """Run ``rngtrace ranks`` with parsed ``args``; return 0 (alike), 1 (diverge) or 2 (no logs to compare)."""
    try:
        logs, left_out = load_logs(args.folder, max_size=getattr(args, "max_log_size", None))
    except LogError as error:
        say(f"{PROG}: error: {error}")
        return 2
    found = splits(logs)
    write(sys.stdout, report(logs, found, left_out) + "\n")  # an ASCII terminal: what it lacks as escapes
    sys.stdout.flush()
    return 1 if found else 0


class _Usage(Exception):
    pass


def main(argv: Iterable[str] | None = None) -> int:
    """``rngtrace ranks DIR`` on its own: parse ``argv`` (default ``sys.argv[1:]``) and run it."""

    class Parser(argparse.ArgumentParser):
        def error(self, message: str) -> Any:
            raise _Usage(message)  # one line through main, not usage text and exit

    parser = Parser(prog=f"{PROG} ranks", description=DESCRIPTION)
    _arguments(parser)
    try:
        args = parser.parse_args(sys.argv[1:] if argv is None else list(argv))
    except _Usage as error:
        say(f"{PROG}: error: {error}; see `{PROG} ranks --help`")
        return 2
    return command(args)
