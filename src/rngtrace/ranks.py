"""``rngtrace ranks DIR``: where do the ranks of a distributed run stop drawing alike?

``rng_trace(log_dir=DIR)`` saved one log per block and process (``_logdir``):
``rank-0.json``, ``rank-1.json``, and ``rank-0.2.json`` for a rank's second block.
Block k of each rank is compared with block k of the others, so a divergence is
named with the block it happened in and no earlier block's events hide it; a
rank with no log of a block made no events in it. Each rank's events are lined up per stream: draws and seeds in order,
compared by kind, api, count and the calling line (its file by bare name or path
after site-packages, so ranks started from different folders still match; a
seed's value is not compared, since seeding by rank is right). Unattributed moves
are left out (which call notices one depends on timing), and so are events that
child processes (DataLoader workers) made, which interleave by timing too.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from ._errors import LogError
from ._logdir import LOG_NAME
from ._paths import current_dir, short_path
from ._say import PROG, add_max_log_size, say
from ._yours import line_to_name
from .diff import file_key  # the name two checkouts agree on, as rngtrace diff compares files
from .render.base import api_label, describe, plural, printable, stream_key
from .sources import stream as stream_info
from .trace import DRAW, SEED, Event, Finding, Frame, Trace

#: frames printed per stack at a divergence; the rest are counted
_SHOWN_FRAMES = 8


# -- reading ---------------------------------------------------------------------------


@dataclass(frozen=True)
class RankLog:
    """One process's log of one block, as found in a log folder."""

    path: str
    #: "rank" or "pid": what the file is named by
    by: str
    #: the rank or the pid
    number: int
    #: 1 for rank-0.json, k for rank-0.k.json
    block: int
    trace: Trace

    @property
    def label(self) -> str:
        """``rank 0`` or ``pid 1234``."""
        return f"{self.by} {self.number}"


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


# -- comparing -------------------------------------------------------------------------


@dataclass(frozen=True)
class Side:
    """The ranks that made one same event (or none) where a stream parts."""

    ranks: tuple[str, ...]
    pids: tuple[int, ...]
    #: the event they made there, as the first of them recorded it; None: their stream had ended
    event: Event | None
    #: each one's index of that event in its own trace (-1: none)
    indexes: tuple[int, ...]
    #: how many compared events of the stream the first of them made in all
    total: int


@dataclass(frozen=True)
class Split:
    """Where one stream's draws and seeds first part between the ranks, in one block."""

    block: int
    stream: str
    #: how many events of the stream every rank made alike before it
    position: int
    #: the event all ranks made just before it (None at the start)
    before: Event | None
    #: one side per different event, rank 0's first
    sides: tuple[Side, ...]


def compared_events(trace: Trace) -> dict[str, list[Event]]:
    """stream -> the draws and seeds the traced process itself made, in order."""
    out: dict[str, list[Event]] = {}
    for event in trace.events:
        if event.kind in (DRAW, SEED) and event.pid == trace.pid:
            out.setdefault(event.stream, []).append(event)
    return out


def splits(logs: Sequence[RankLog]) -> list[Split]:
    """Every stream, in every block, whose events part between the ranks; earliest block first."""
    pids = {(log.by, log.number): log.trace.pid for log in logs}
    processes = sorted(pids, key=lambda p: p[1])
    found = []
    for block in sorted({log.block for log in logs}):
        here = {(log.by, log.number): log.trace for log in logs if log.block == block}
        # A rank that has no log of this block made no event in it: it is compared as empty.
        events = {p: compared_events(here[p]) if p in here else {} for p in processes}
        dropped = {p: here[p].dropped if p in here else 0 for p in processes}
        for stream in sorted({s for per in events.values() for s in per}, key=stream_key):
            rows = {p: events[p].get(stream, []) for p in processes}
            split = _first_split(block, stream, rows, pids, dropped)
            if split is not None:
                found.append(split)
    return found


def _first_split(
    block: int,
    stream: str,
    rows: dict[tuple[str, int], list[Event]],
    pids: dict[tuple[str, int], int],
    dropped: dict[tuple[str, int], int],
) -> Split | None:
    keys = {p: [_key(e) for e in row] for p, row in rows.items()}
    for i in range(max(len(k) for k in keys.values())):
        at = {p: k[i] if i < len(k) else None for p, k in keys.items()}
        if len(set(at.values())) == 1:
            continue
        if any(key is None and dropped[p] for p, key in at.items()):
            return None  # a rank whose kept events ran out here drew on unseen: no telling (report says so)
        groups: dict[Any, list[tuple[str, int]]] = {}
        for p, key in at.items():
            groups.setdefault(key, []).append(p)
        sides = tuple(
            Side(
                tuple(f"{by} {n}" for by, n in members),
                tuple(pids[m] for m in members),
                rows[members[0]][i] if key is not None else None,
                tuple(rows[m][i].index if key is not None else -1 for m in members),
                len(rows[members[0]]),
            )
            for key, members in groups.items()
        )
        before = next(iter(rows.values()))[i - 1] if i else None
        return Split(block, stream, i, before, sides)
    return None


def _key(event: Event) -> tuple:
    frame = event.frame
    site = (file_key(frame.filename), frame.lineno) if frame is not None else None
    return (event.kind, event.api, event.count, site)


# -- findings --------------------------------------------------------------------------


def findings(logs: Sequence[RankLog]) -> list[Finding]:
    """A ``divergent`` Finding for each stream whose draws part between the ranks.

    ``pids`` holds each side's processes, rank 0's side first; ``events`` the index,
    in each of those processes' own trace, of its first divergent event (-1: none).
    """
    return [_finding(split) for split in splits(logs)]


def _finding(split: Split) -> Finding:
    pids = tuple(pid for side in split.sides for pid in side.pids)
    events = tuple(index for side in split.sides for index in side.indexes)
    parts = [f"{_ranks(side.ranks)} {_made(side, split.stream)}" for side in split.sides]
    message = (
        f"{split.stream}: the ranks stop drawing alike at its event {split.position + 1}"
        f"{_in_block(split)}: " + "; ".join(parts) + "; so later draws differ between them"
    )
    info = stream_info(split.stream)
    generator = f" ({info.own_generator})" if info is not None and info.own_generator else ""
    fix = (
        f"make every rank draw alike from {split.stream}: make this draw on every rank, "
        f"or give the draw that only some ranks make a generator of its own{generator}"
    )
    return Finding("divergent", split.stream, pids, message, events, fix)


def _made(side: Side, stream: str) -> str:
    event = side.event
    if event is None:
        return f"made no more ({plural_events(side.total, stream)} in all)"
    frame = line_to_name(event)
    where = f" at {printable(_place(frame))}" if frame is not None else ""
    verb = {DRAW: "drew", SEED: "seeded with"}.get(event.kind, "made")
    return f"{verb} {api_label(event)}{where}"


def _place(frame: Frame) -> str:
    return f"{short_path(frame.filename)}:{frame.lineno}"


def _ranks(labels: Sequence[str]) -> str:
    if len(labels) == 1:
        return labels[0]
    by = labels[0].split(" ", 1)[0]
    numbers = [label.split(" ", 1)[1] for label in labels]
    return f"{by}s {', '.join(numbers[:-1])} and {numbers[-1]}"


def _in_block(split: Split) -> str:
    return f" in block {split.block}" if split.block > 1 else ""


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
    cwd = current_dir()
    event_n = f"event {split.position + 1}"
    last = f"; the last at {describe(split.before.frame, cwd)}" if split.before is not None else ""
    lines = [
        printable(
            f"{split.stream}: the ranks part at its {event_n}{_in_block(split)} "
            f"({split.position} alike before it{last})"
        )
    ]
    width = max(len(_ranks(side.ranks)) for side in split.sides)
    for side in split.sides:
        name = _ranks(side.ranks).ljust(width)
        event = side.event
        if event is None:
            lines.append(printable(f"  {name}  no {event_n}: {plural_events(side.total, split.stream)} in all"))
            continue
        lines.append(f"  {name}  {event.kind} {api_label(event)}")
        lines += [f"  {'':{width}}    {describe(frame, cwd)}" for frame in event.stack[:_SHOWN_FRAMES]]
        if len(event.stack) > _SHOWN_FRAMES:
            lines.append(f"  {'':{width}}    … {len(event.stack) - _SHOWN_FRAMES} more frames")
    lines.append(printable(f"  fix: {_finding(split).fix}"))
    return lines


def plural_events(n: int, stream: str) -> str:
    """``3 random events``, ``1 numpy event``."""
    return f"{n:,} {stream} {'event' if n == 1 else 'events'}"


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
    text = report(logs, found, left_out) + "\n"
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:  # an ASCII terminal: characters it lacks as escapes
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
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
