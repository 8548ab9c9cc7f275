"""Compare two traces: where do two runs' draws part ways?

Each stream is aligned on its own, so a draw in another stream or a thread's
different interleaving does not shift it. An event is keyed by its kind, its
api, the line that called it and the user's lines on its stack (the same
library line reached from ``train()`` and from ``validate()`` is two calls); a
file is named by its path after site-packages or by its bare file name, so runs
from two checkouts or two virtualenvs in different places still align. An unattributed move has no line
(the call that noticed it did not make it): it is keyed by its kind and api
alone, so the line that happened to notice it never parts two runs. Within the
aligned calls, a draw of another number of values or a seed with another value
is a divergence too.
Two runs that made the same calls can still have drawn other numbers: a stream
never seeded, or seeded from OS entropy, starts from another state each run. A
saved log carries a digest of each stream's full state where it starts anew
(``RawStore.origins``: at the trace's start or first draw, after every seed, at a
fork); the first digest that differs between the runs is a ``StateDifference``.
Everything here is data; ``rngtrace.render.render_diff`` turns it into text.
"""

from __future__ import annotations

import bisect
import difflib
import functools
from dataclasses import dataclass
from typing import Any

from ._model import DRAW, ENTROPY, KINDS, SEED, Event, Frame
from ._paths import package_tail
from ._rows import per_stack
from ._store import RawStore
from ._yours import is_yours, library_import

#: origins made by a seed: the state a seed gave; every other origin is a state the stream came with
_SEEDED = "seed"

#: what a Divergence is: events only A made, only B made, other events in each run, or
#: the same call drawing another number of values / seeding another value
ONLY_A, ONLY_B, REPLACED, VALUES = "only A", "only B", "replaced", "values"


@dataclass(frozen=True)
class Divergence:
    """One place in one stream where the runs part."""

    kind: str  # ONLY_A, ONLY_B, REPLACED or VALUES
    stream: str
    a: tuple[Event, ...]  # A's events that B does not match (for VALUES: A's side of the pair)
    b: tuple[Event, ...]
    #: the next event both runs make after this place, as A and as B recorded it; None at the end
    next_a: Event | None
    next_b: Event | None
    #: where this happens in A's and in B's event order; the earliest is the first divergence
    position: tuple[int, int]


@dataclass(frozen=True)
class SiteDifference:
    """A call site that A and B called a different number of times, or drew a different number of values at."""

    stream: str
    kind: str
    api: str
    frame: Frame | None  # the calling line, as A recorded it where A has it
    a_calls: int
    b_calls: int
    a_values: int
    b_values: int


@dataclass(frozen=True)
class StateDifference:
    """A stream that drew from one state in A and another in B, with the events that show where."""

    stream: str
    #: the seed that set A's and B's state, where a seed did (None: the state the stream came with)
    seed_a: Event | None
    seed_b: Event | None
    #: the first draw from that state in each run
    draw_a: Event
    draw_b: Event

    @property
    def from_entropy(self) -> bool:
        """Whether both runs' states were set by a seed given no value (OS entropy)."""
        return all(s is not None and s.from_entropy for s in (self.seed_a, self.seed_b))

    @property
    def never_seeded(self) -> bool:
        return self.seed_a is None and self.seed_b is None


@dataclass(frozen=True)
class TraceDiff:
    """How two traces differ: every divergence, earliest first, and the call sites whose counts differ."""

    a: RawStore
    b: RawStore
    divergences: tuple[Divergence, ...]
    sites: tuple[SiteDifference, ...]  # largest difference in calls first
    #: streams that drew from another state in A than in B, first per stream
    states: tuple[StateDifference, ...] = ()
    #: the generators either run made from OS entropy, one per call site: they draw other numbers each run
    entropy: tuple[Event, ...] = ()

    @property
    def same(self) -> bool:
        """True when the runs made the same calls, in the same order per stream, from the same states.

        A run that made a generator from OS entropy never draws the same as another.
        """
        return not self.divergences and not self.sites and not self.states and not self.entropy

    @property
    def first(self) -> Divergence | None:
        """The earliest place where the runs part, or None."""
        return self.divergences[0] if self.divergences else None


def compare(a: RawStore, b: RawStore) -> TraceDiff:
    """Align ``a`` and ``b`` stream by stream and say where they part."""
    events_a, events_b = a.events, b.events
    found: list[Divergence] = []
    for stream in sorted({e.stream for e in events_a} | {e.stream for e in events_b}):
        xs = [e for e in events_a if e.stream == stream]
        ys = [e for e in events_b if e.stream == stream]
        found += _align(stream, xs, ys, (len(events_a), len(events_b)))
    found.sort(key=lambda d: (min(d.position), d.position))
    return TraceDiff(a, b, tuple(found), _site_differences(a, b), _state_differences(a, b), _entropy_sites(a, b))


def _entropy_sites(a: RawStore, b: RawStore) -> tuple[Event, ...]:
    """The generators made from OS entropy in either run, one per call (A's where both made it)."""
    sites: dict[tuple, Event] = {}
    for e in (*a.events, *b.events):
        if e.kind == ENTROPY:
            sites.setdefault(_key(e), e)
    return tuple(sites.values())


def _align(stream: str, xs: list[Event], ys: list[Event], ends: tuple[int, int]) -> list[Divergence]:
    """The divergences between one stream's events in A (``xs``) and in B (``ys``)."""
    matcher = difflib.SequenceMatcher(None, [_key(e) for e in xs], [_key(e) for e in ys], autojunk=False)
    out = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [
                Divergence(VALUES, stream, (x,), (y,), None, None, (x.index, y.index))
                for x, y in zip(xs[i1:i2], ys[j1:j2], strict=True)
                if _values_differ(x, y)
            ]
            continue
        # Between two matched blocks there is exactly one other opcode, so what follows is shared.
        next_a = xs[i2] if i2 < len(xs) else None
        next_b = ys[j2] if j2 < len(ys) else None
        kind = {"delete": ONLY_A, "insert": ONLY_B}.get(tag, REPLACED)
        position = (
            _position(xs, i1, i2, ends[0]),
            _position(ys, j1, j2, ends[1]),
        )
        out.append(Divergence(kind, stream, tuple(xs[i1:i2]), tuple(ys[j1:j2]), next_a, next_b, position))
    return out


def _position(events: list[Event], start: int, stop: int, end: int) -> int:
    """Where events[start:stop] sit in their run; for none, where they would have been."""
    if start < len(events):
        return events[start].index
    return events[start - 1].index + 1 if start else end


def _key(event: Event) -> tuple:
    """What makes two events the same call: kind, api, the calling line, and the user's lines that led there.

    The user's lines tell apart one library line reached from two places (a DataLoader iterated in
    ``train()`` and in ``validate()``, a model called from each), which would otherwise align crosswise.
    """
    frame = event.frame
    if frame is None:
        return (event.kind, event.api, None, ())
    yours = tuple((file_key(f.filename), f.lineno) for f in event.stack if is_yours(f))
    return (event.kind, event.api, (file_key(frame.filename), frame.lineno), yours)


@functools.lru_cache(maxsize=4096)
def file_key(filename: str) -> str:
    """A file's name as two runs from different places agree on it."""
    tail = package_tail(filename)
    if tail is not None or filename.startswith("<"):
        return tail or filename
    return filename.replace("\\", "/").rsplit("/", 1)[-1]


def _values_differ(x: Event, y: Event) -> bool:
    """Same call, other values: a seed to another value, or a draw of another number of values."""
    if x.kind == SEED:
        return x.detail != y.detail
    if x.kind == DRAW:
        return x.count is not None and y.count is not None and x.count != y.count
    return False


def _site_differences(a: RawStore, b: RawStore) -> tuple[SiteDifference, ...]:
    """Every call site whose calls or values differ between the runs, dropped events counted."""
    counts_a, counts_b = _site_counts(a), _site_counts(b)
    rows = []
    for key in counts_a.keys() | counts_b.keys():
        frame_a, calls_a, values_a = counts_a.get(key, (None, 0, 0))
        frame_b, calls_b, values_b = counts_b.get(key, (None, 0, 0))
        if (calls_a, values_a) != (calls_b, values_b):
            stream, kind, api, _site = key
            rows.append(SiteDifference(stream, kind, api, frame_a or frame_b, calls_a, calls_b, values_a, values_b))
    # Ties in full, down to the line: the keys came from a set, whose order changes with PYTHONHASHSEED.
    rows.sort(
        key=lambda r: (
            -abs(r.a_calls - r.b_calls),
            -abs(r.a_values - r.b_values),
            r.stream,
            r.api,
            r.kind,
            (r.frame.filename, r.frame.lineno) if r.frame is not None else ("", 0),
        )
    )
    return tuple(rows)


def _site_counts(trace: Any) -> dict[tuple, tuple[Frame | None, int, int]]:
    """(stream, kind, api, site key) -> (a frame there, calls, values) of a Trace (a layer up: read by its methods)."""
    out: dict[tuple, tuple[Frame | None, int, int]] = {}
    for kind in KINDS:
        for stat in trace.statistics("lineno", kind):
            frame = stat.frame
            key = (stat.stream, kind, stat.api, (file_key(frame.filename), frame.lineno) if frame else None)
            seen, calls, values = out.get(key, (frame, 0, 0))
            out[key] = (seen, calls + stat.calls, values + stat.values)
    return out


# -- states ------------------------------------------------------------------------------


def _state_differences(a: RawStore, b: RawStore) -> tuple[StateDifference, ...]:
    """Per stream, the first state both runs drew from whose digests differ."""
    starts_a, starts_b = _starts(a), _starts(b)
    out = []
    for stream in sorted(starts_a.keys() & starts_b.keys()):
        for (digest_a, seed_a, draw_a), (digest_b, seed_b, draw_b) in zip(starts_a[stream], starts_b[stream]):
            if digest_a != digest_b:
                out.append(StateDifference(stream, seed_a, seed_b, draw_a, draw_b))
                break
    return tuple(out)


def _starts(trace: RawStore) -> dict[str, list[tuple[str, Event | None, Event]]]:
    """stream -> (digest, the seed that set it or None, the first draw from it), for each state drawn from.

    Only the traced process's: a child's streams are compared by the duplicate finding.
    """
    events = trace.events
    origins = sorted((o for o in trace.origins if o[0] == trace.pid), key=lambda o: o[4])
    by_stream: dict[str, list[tuple[int, str, str]]] = {}
    for _pid, stream, digest, why, at in origins:
        by_stream.setdefault(stream, []).append((at, digest, why))
    out: dict[str, list[tuple[str, Event | None, Event]]] = {}
    # A library's draw as it is imported is no number of the program's (sklearn imports rich, whose import
    # draws from an unseeded ``random``): the same rule as the findings'; a later draw from that state counts.
    imported = per_stack(library_import)
    for stream, starts in by_stream.items():
        draws = [
            e.index
            for e in events
            if e.stream == stream and e.kind == DRAW and e.pid == trace.pid and imported(e) is None
        ]
        for j, (at, digest, why) in enumerate(starts):
            end = starts[j + 1][0] if j + 1 < len(starts) else len(events)
            k = bisect.bisect_left(draws, at)
            if k == len(draws) or draws[k] >= end:
                continue  # a state nothing drew from: no number came of it
            first = events[draws[k]]
            seed = _seed_before(events, stream, at) if why == _SEEDED else None
            out.setdefault(stream, []).append((digest, seed, first))
    return out


def _seed_before(events: list[Event], stream: str, at: int) -> Event | None:
    """The seed of ``stream``'s library that made the state noted before event ``at``."""
    base = stream.split(".", 1)[0]
    for e in reversed(events[:at]):
        if e.kind == SEED and e.stream.split(".", 1)[0] == base:
            return e
    return None
