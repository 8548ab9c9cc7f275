"""Judge several runs of one program: reproducible, or the first cause that makes them differ.

``rngtrace check`` runs a program N times, each traced as under ``rngtrace run``, and
hands each run's finished trace and standard output here. Run 1 is compared with each
other run (``diff.compare``: the draws and seeds of every global stream, and the state
each drew from), with the state each stream ended in, and with the output; the first run
that differs is explained by one cause, told apart in this order:

- ``unseeded``: a stream never seeded, or seeded from OS entropy at the user's line;
- ``library-entropy``: a library reseeds a stream from OS entropy;
- ``entropy``: a generator made from OS entropy (``np.random.default_rng()``): no global
  stream, but it draws other numbers in every run;
- ``seed-value``: a seed given another value each run (the time, the pid, ...);
- ``draw-count``: another number of draws (a branch on time, the environment or input);
- ``end-state``: the same draws, but a stream ended elsewhere (a move nothing recorded);
- ``output``: the same draws from the same states, but other output.

The last two kinds ask for a rerun with ``PYTHONHASHSEED`` fixed (``Verdict.ask_hash_seed``,
the face does it): when two such runs agree, ``hash_order`` says the order of a set or dict
of strings decides the result; when they still differ, ``outside`` says the cause lies
where no stream is involved. A risk (a draw that is reproducible as run) is never a cause.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._findings import findings
from ._fixes import line_of, own_generator
from ._model import DRAW, ENTROPY, SEED, Event, Finding
from ._rows import per_stack
from ._seeds import undone_by_restores
from ._yours import library_import, line_to_name
from .diff import ONLY_A, ONLY_B, VALUES, Divergence, SiteDifference, StateDifference, TraceDiff, compare, file_key
from .sources import rank
from .sources import stream as stream_info

#: each cause kind, in the order a run's differences are explained, and what it is in a few words
CAUSES = {
    "unseeded": "a stream drawn from before any seed, or seeded from OS entropy",
    "library-entropy": "a library reseeds a stream from OS entropy",
    "entropy": "a generator made from entropy",
    "seed-value": "a seed that takes another value each run",
    "draw-count": "another number of draws",
    "end-state": "a move no recorded call explains",
    "output": "other output from the same draws",
    "hash-order": "the order of a set or dict of strings (hash randomisation)",
    "outside": "something outside the global random streams",
}

#: origins a run notes at its end (``rngtrace run`` for ``check``): the state each stream ended in
END = "end"


@dataclass(frozen=True)
class Run:
    """One run of the program: its number (from 1), exit status, standard output and trace."""

    number: int
    status: int
    stdout: bytes
    trace: Any  # a finished Trace (a layer up): events, origins, pid


@dataclass(frozen=True)
class Cause:
    """Why two runs differ: the kind, one sentence, the fix, and the events that show it."""

    kind: str
    summary: str  # follows "not reproducible — " on the verdict line
    fix: str = ""
    #: the lines that make the case, after the summary (the seeds' values, the rerun's outcome)
    detail: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """What ``rngtrace check`` says of its runs."""

    runs: int
    draws: int  # draw events in run 1, every process
    streams: tuple[str, ...]  # the libraries drawn from, in their declared order
    cause: Cause | None  # None: reproducible
    #: run 1 against the first run that differs (None where the traces agree)
    diff: TraceDiff | None = None
    other: int = 0  # the number of the run that differs from run 1 (0: none)
    #: the face reruns the program with PYTHONHASHSEED fixed and asks ``hash_order``
    ask_hash_seed: bool = False
    ended_alike: bool = True
    notes: tuple[str, ...] = field(default=())

    @property
    def reproducible(self) -> bool:
        return self.cause is None


def judge(runs: Sequence[Run]) -> Verdict:
    """Compare run 1 with every other run; the verdict names the first cause found."""
    first = runs[0]
    draws = sum(1 for e in first.trace.events if e.kind == DRAW)
    streams = _libraries(first.trace.events)
    for other in runs[1:]:
        diff = compare(first.trace, other.trace)
        cause = _cause(first, other, diff)
        if cause is not None:
            ask = cause.kind in ("draw-count", "end-state", "output")
            return Verdict(len(runs), draws, streams, cause, diff, other.number, ask, cause.kind != "end-state")
    return Verdict(len(runs), draws, streams, None)


def hash_order(verdict: Verdict, fixed: Sequence[Run], seed: str) -> Verdict:
    """The verdict once two runs with ``PYTHONHASHSEED=seed`` were compared: hash order, or outside."""
    assert verdict.cause is not None
    same = bool(fixed) and judge(fixed).reproducible
    if fixed:
        rerun = f"rerun twice with PYTHONHASHSEED={seed}: the runs {'agree' if same else 'still differ'}"
    else:
        rerun = f"the runs already shared PYTHONHASHSEED={seed}: the order of sets of strings cannot tell them apart"
    was = verdict.cause
    if same:
        cause = Cause(
            "hash-order",
            f"{_lower(was.summary)}; with PYTHONHASHSEED fixed they agree: the order of a set or dict of strings "
            "decides the result",
            "iterate in a fixed order (sorted(...)) where the order matters, or set PYTHONHASHSEED=0 in the "
            "environment before Python starts",
            (*was.detail, rerun),
        )
    elif was.kind == "output":
        cause = Cause(
            "outside",
            f"{_lower(was.summary)}, also with PYTHONHASHSEED fixed: the difference lies outside the global random "
            "streams (threads, time, nondeterministic kernels), where rngtrace cannot see it",
            "",
            (*was.detail, rerun),
        )
    else:
        cause = Cause(was.kind, was.summary, was.fix, (*was.detail, rerun))
    return Verdict(
        verdict.runs, verdict.draws, verdict.streams, cause, verdict.diff, verdict.other, False, verdict.ended_alike
    )


def _lower(text: str) -> str:
    return text[:1].lower() + text[1:]


# -- causes ---------------------------------------------------------------------------


def _cause(a: Run, b: Run, diff: TraceDiff) -> Cause | None:
    """The first cause that tells run ``a`` from run ``b``, or None when they agree."""
    for state in sorted(diff.states, key=lambda s: s.draw_a.index):
        cause = _state_cause(a, b, state)
        if cause is not None:
            return cause
    if diff.entropy:
        return _entropy_cause(a, diff.entropy[0])
    # Draws a restore undid (a sanity check's, however many) changed nothing after it: no cause.
    undone = (undone_by_restores(a.trace.events), undone_by_restores(b.trace.events))
    first = next((d for d in diff.divergences if not _all_undone(d, undone)), None)
    if first is not None:
        return _divergence_cause(a, b, first)
    sites = [s for s in diff.sites if not _site_undone(s, (a, b), undone)]
    if sites:
        site = sites[0]
        where = line_of(site.frame) if site.frame is not None else "a line no stack names"
        return Cause(
            "draw-count",
            f"run {a.number} and run {b.number} drew {site.stream} a different number of times at {where}: "
            "something the program reads (time, environment, input) decides how many draws it makes",
            f"make the number of draws at {where} independent of time, environment and input",
        )
    ended = _end_differences(a.trace, b.trace)
    if ended:
        return Cause(
            "end-state",
            f"the runs made the same calls, but {_and(ended)} ended in another state in run {b.number}: "
            "something moved it that no recorded call explains",
            "run `rngtrace diff` on the two logs (--json DIR keeps them) and look for unattributed moves",
        )
    if a.stdout != b.stdout:
        return Cause(
            "output",
            f"the runs made the same draws from the same states, but run {a.number} and run {b.number} printed "
            "other output",
        )
    return None


def _all_undone(d: Divergence, undone: tuple[dict[int, int], dict[int, int]]) -> bool:
    """Whether every event of a divergence is a draw a restore undid, in its run."""
    return all(e.index in undone[0] for e in d.a) and all(e.index in undone[1] for e in d.b)


def _site_undone(site: SiteDifference, runs: tuple[Run, Run], undone: tuple[dict[int, int], dict[int, int]]) -> bool:
    """Whether every draw at a call site whose counts differ was undone by a restore, in both runs."""
    if site.frame is None:
        return False
    where = (file_key(site.frame.filename), site.frame.lineno)
    for run, gone in zip(runs, undone):
        for e in run.trace.events:
            frame = e.frame
            if e.kind != site.kind or e.api != site.api or e.stream != site.stream or frame is None:
                continue
            if (file_key(frame.filename), frame.lineno) == where and e.index not in gone:
                return False
    return True


def _state_cause(a: Run, b: Run, state: StateDifference) -> Cause | None:
    """A stream that drew from another state in the two runs, and why it did."""
    stream = state.stream
    draw = state.draw_a
    at = _line(draw)
    if state.never_seeded:
        found = _finding(a.trace, "unseeded", stream)
        fix = found.fix if found is not None else _seed_fix(stream, draw)
        return Cause(
            "unseeded",
            f"{stream} is never seeded, so each run draws other numbers from it, first at {at}",
            fix,
        )
    seed = state.seed_a
    if seed is not None and seed.from_entropy:
        where = _line(seed)
        if _in_library(seed):
            frame = seed.frame
            inside = line_of(frame) if frame is not None else where
            return Cause(
                "library-entropy",
                f"{seed.api}() inside {inside}, called at {where}, reseeds {stream} from OS entropy, so each run "
                f"draws other numbers after it, first at {at}",
                f"seed {stream} again after the call at {where}, or give that library a seed of its own",
            )
        return Cause(
            "unseeded",
            f"{seed.api}() at {where} seeds {stream} from OS entropy, so each run draws other numbers, first at {at}",
            f"give it a value: {seed.api}(0) at {where}",
        )
    return None  # seeded with another value: the seed's divergence says which


def _entropy_cause(a: Run, made: Event) -> Cause:
    """A generator made from OS entropy: each run draws other numbers from it, whatever else agrees."""
    where = _line(made)
    found = next((f for f in findings(a.trace) if f.kind == "unseeded" and made.index in f.events), None)
    frame = made.frame
    inside = f" at {where}"
    if frame is not None and _in_library(made):
        inside = f" inside {line_of(frame)}, called at {where},"
    return Cause(
        "entropy",
        f"{made.api}(){inside} makes a generator from OS entropy, so each run draws other numbers from it",
        found.fix if found is not None else f"give it a seed at {where}",
    )


def _divergence_cause(a: Run, b: Run, d: Divergence) -> Cause:
    """The cause a divergence of the events shows."""
    if d.kind == VALUES and d.a[0].kind == SEED:
        x, y = d.a[0], d.b[0]
        where = _line(x)
        return Cause(
            "seed-value",
            f"{x.api} at {where} seeds {d.stream} with another value each run "
            f"(run {a.number}: {x.detail}, run {b.number}: {y.detail})",
            f"seed with a constant at {where}: {x.api}(0), or read the value from the command line and log it",
        )
    if d.kind == VALUES:
        x, y = d.a[0], d.b[0]
        where = _line(x)
        return Cause(
            "draw-count",
            f"{x.api} at {where} draws {x.count:,} values in run {a.number} and {y.count:,} in run {b.number}: "
            "something the program reads (time, environment, input) decides how many",
            f"make the size drawn at {where} independent of time, environment and input",
        )
    extra, more, fewer = (d.b, b, a) if d.kind == ONLY_B else (d.a, a, b)
    first = extra[0]
    where = _line(first)
    if d.kind in (ONLY_A, ONLY_B):
        summary = (
            f"run {more.number} makes {len(extra):,} more {d.stream} {_noun(extra)} than run {fewer.number}, "
            f"the first at {where}: something the program reads (time, environment, input) decides how many draws "
            "it makes"
        )
    else:
        summary = (
            f"run {a.number} and run {b.number} draw {d.stream} at other lines from event #{first.index} on, "
            f"run {more.number}'s at {where}: something the program reads (time, environment, input) decides which"
        )
    return Cause("draw-count", summary, f"make the draws at {where} independent of time, environment and input")


# -- helpers ------------------------------------------------------------------------------


def _line(event: Event) -> str:
    """``train.py:14``: the user's line of an event, else its innermost recorded one."""
    frame = line_to_name(event)
    return line_of(frame) if frame is not None else "an unrecorded line"


def _in_library(event: Event) -> bool:
    """Whether the event's own call was made inside other code than the user's."""
    frame = event.frame
    return frame is not None and line_to_name(event) != frame


def _noun(events: Sequence[Event]) -> str:
    kinds = {e.kind for e in events}
    kind = kinds.pop() if len(kinds) == 1 else "event"
    return f"{kind}{'' if len(events) == 1 else 's'}"


def _finding(trace: Any, kind: str, stream: str) -> Finding | None:
    base = stream.split(".", 1)[0]
    for f in findings(trace):
        if f.kind == kind and f.stream.split(".", 1)[0] == base:
            return f
    return None


def _seed_fix(stream: str, draw: Event) -> str:
    """Seed the stream where the program starts, or draw from a generator of one's own."""
    info = stream_info(stream.split(".", 1)[0])
    ways = [f"{info.seed_call} at the program's start"] if info is not None and info.seed_call else []
    own = own_generator(draw, "0")
    if own:
        ways.append(f"{own} at {_line(draw)}")
    return " or ".join(ways)


def _end_differences(a: Any, b: Any) -> list[str]:
    """The streams either run used whose state at the end differs between the runs (where both noted it)."""
    ends_a, ends_b = _ends(a), _ends(b)
    return [s for s in sorted(ends_a.keys() & ends_b.keys()) if ends_a[s] != ends_b[s]]


def _ends(trace: Any) -> dict[str, str]:
    """stream -> the digest of the state it ended in, in the traced process, for the streams it used.

    A stream no event touched is left out: ``random`` starts from OS entropy in every
    process, so its end differs between any two runs that never use it, and nothing came of it;
    a stream only libraries drew from as they were imported is left out for the same reason.
    """
    # A generator made from OS entropy is no use of the global stream, nor a library's draw as it is imported
    # (rich's id counter, imported by scikit-learn): no number of the program's came of either.
    imported = per_stack(library_import)
    used = {
        e.stream.split(".", 1)[0]
        for e in trace.events
        if e.pid == trace.pid and e.kind != ENTROPY and not (e.kind == DRAW and imported(e) is not None)
    }
    return {
        stream: digest
        for pid, stream, digest, why, _at in trace.origins
        if why == END and pid == trace.pid and stream.split(".", 1)[0] in used
    }


def _libraries(events: Sequence[Event]) -> tuple[str, ...]:
    """The libraries drawn from or seeded, in their declared order."""
    used = {e.stream.split(".", 1)[0] for e in events if e.kind in (DRAW, SEED)}
    return tuple(sorted(used, key=lambda s: (rank(s), s)))


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]
