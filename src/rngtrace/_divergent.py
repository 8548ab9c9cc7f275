"""The ``divergent`` finding: where the ranks of one job stop drawing alike, stream by stream.

Unlike the kinds in ``_findings.KINDS``, which read one trace, this one compares
the logs of several processes (``_findings.ACROSS_RUNS``): ``rngtrace ranks``
gathers them (``RankLog``, one per process and block) and renders what is found
here. Block k of each rank is compared with block k of the others, so a
divergence is named with the block it happened in and no earlier block's events
hide it; a rank with no log of a block made no events in it. Each rank's events
are lined up per stream: draws and seeds in order, compared by kind, api, count
and the calling line (its file by bare name or path after site-packages, so
ranks started from different folders still match; a seed's value is not
compared, since seeding by rank is right). Unattributed moves are left out
(which call notices one depends on timing), and so are events that child
processes (DataLoader workers) made, which interleave by timing too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ._fixes import line_of
from ._model import DRAW, SEED, Event, Finding
from ._store import RawStore
from ._words import api_label, printable, stream_key
from ._yours import line_to_name
from .diff import file_key  # the name two checkouts agree on, as rngtrace diff compares files
from .sources import stream as stream_info


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
    trace: RawStore

    @property
    def label(self) -> str:
        """``rank 0`` or ``pid 1234``."""
        return f"{self.by} {self.number}"


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


# -- comparing -------------------------------------------------------------------------


def compared_events(trace: RawStore) -> dict[str, list[Event]]:
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


# -- the finding -----------------------------------------------------------------------


def divergent(logs: Sequence[RankLog]) -> list[Finding]:
    """A ``divergent`` Finding for each stream whose draws part between the ranks.

    ``pids`` holds each side's processes, rank 0's side first; ``events`` the index,
    in each of those processes' own trace, of its first divergent event (-1: none).
    """
    return [finding(split) for split in splits(logs)]


def finding(split: Split) -> Finding:
    """The ``divergent`` Finding for one split: what each side made there, and the fix."""
    pids = tuple(pid for side in split.sides for pid in side.pids)
    events = tuple(index for side in split.sides for index in side.indexes)
    parts = [f"{ranks_named(side.ranks)} {_made(side, split.stream)}" for side in split.sides]
    message = (
        f"{split.stream}: the ranks stop drawing alike at their {nth(split)}"
        f"{in_block(split)}: " + "; ".join(parts) + "; so later draws differ between them"
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
    where = f" at {printable(line_of(frame))}" if frame is not None else ""
    verb = {DRAW: "drew", SEED: "seeded with"}.get(event.kind, "made")
    return f"{verb} {api_label(event)}{where}"


def nth(split: Split) -> str:
    """``4th torch draw or seed``: the place in its stream where the ranks part (a log's ``#N`` counts all streams)."""
    n = split.position + 1
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n:,}{suffix} {split.stream} draw or seed"


def ranks_named(labels: Sequence[str]) -> str:
    """``rank 0``, or ``ranks 1, 2 and 3``: the ranks of one side."""
    if len(labels) == 1:
        return labels[0]
    by = labels[0].split(" ", 1)[0]
    numbers = [label.split(" ", 1)[1] for label in labels]
    return f"{by}s {', '.join(numbers[:-1])} and {numbers[-1]}"


def in_block(split: Split) -> str:
    """`` in block 2`` for a split after the first block; nothing for the first."""
    return f" in block {split.block}" if split.block > 1 else ""


def plural_events(n: int, stream: str) -> str:
    """``3 random events``, ``1 numpy event``."""
    return f"{n:,} {stream} {'event' if n == 1 else 'events'}"
