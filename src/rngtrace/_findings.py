"""Findings: what made a run irreproducible, and the line to change. Every kind is listed here.

Computed once, when ``trace.findings`` is first read, from the finished events:
nothing here runs while a trace records. Each kind is a function in the analysis
layer, listed in one of two ordered registries, and docs/findings.md lists them
in the same order (a test checks it):

- ``KINDS``: the kinds read from one trace (every process it merged), in the
  order a log lists them, most telling first: this order is the ranking.
  ``interleaved`` and ``reseeded`` are ``_seed_findings``'; ``at-import`` and
  ``unseeded`` ``_start_findings``'; ``global-generator`` and ``settings``
  ``_call_findings``'; ``duplicate`` (processes that drew the same numbers)
  ``_duplicates``'.
- ``ACROSS_RUNS``: the kinds that compare the logs of several runs rather than
  read one: ``divergent`` (``_divergent``), where the ranks of one job stop
  drawing alike, which ``rngtrace ranks`` reports.

Each kind has a level: ``cause`` (this run's numbers depend on something the
user's seeds do not govern) or ``risk`` (reproducible as run, but any change
before it moves the numbers: ``global-generator``). A log lists every cause
before any risk, and says in its first line whether it found a cause.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from ._call_findings import global_generator, named_lines, settings
from ._divergent import RankLog, divergent
from ._duplicates import duplicates
from ._model import CAUSE, LEVELS, RISK, Event, Finding
from ._rows import event_rows
from ._seed_findings import interleaved, reseeded
from ._start_findings import at_import, entropy_generators, unseeded
from ._store import RawStore


@dataclass(frozen=True)
class Kind:
    """One kind of finding: its name, what it says, and the function that finds it."""

    name: str
    #: one line for the findings reference (docs/findings.md lists the same)
    about: str
    #: (trace, its events, what the kinds before it found) -> the findings of this kind
    find: Callable[[RawStore, Sequence[Event], list[Finding]], list[Finding]]
    #: ``cause`` or ``risk``: what every finding of this kind is
    level: str = CAUSE


@dataclass(frozen=True)
class AcrossRuns:
    """One kind of finding that compares the logs of several runs (a job's ranks) instead of reading one."""

    name: str
    #: one line for the findings reference (docs/findings.md lists the same)
    about: str
    #: (the runs' logs, each a process's log of one block) -> the findings of this kind
    find: Callable[[Sequence[RankLog]], list[Finding]]
    level: str = CAUSE


#: Every kind a trace's findings can be, in the order a log lists them: most telling first. This
#: order is the ranking.
KINDS: tuple[Kind, ...] = (
    Kind(
        "interleaved",
        "after your seed, other code draws from the stream before your next draw",
        lambda trace, events, found: interleaved(trace, events),
    ),
    Kind(
        "reseeded",
        "other code seeds the stream again, with another value, after your seed",
        lambda trace, events, found: reseeded(trace, events),
    ),
    Kind(
        "at-import",
        "a library seeds or draws from the stream as it is imported, after your seed",
        lambda trace, events, found: at_import(trace, events),
    ),
    Kind(
        "unseeded",
        "a stream drawn from before any seed (in a process seen from its start), or seeded from OS entropy; "
        "a generator made from OS entropy",
        lambda trace, events, found: unseeded(trace, events) + entropy_generators(trace, events),
    ),
    # A line another finding named already (a DataLoader between a seed and a draw) is not named again.
    Kind(
        "global-generator",
        "a call that takes a generator (generator=, random_state=) drew from the global stream",
        lambda trace, events, found: global_generator(trace, events, named_lines(events, found)),
        RISK,
    ),
    Kind(
        "settings",
        "library flags that make results differ run to run (torch's cudnn.benchmark)",
        lambda trace, events, found: settings(trace, events),
    ),
    Kind(
        "duplicate",
        "two processes drew from one stream starting at the same state: the same numbers",
        lambda trace, events, found: duplicates(trace),
    ),
)

#: The kinds found by comparing several runs' logs, in the order ``rngtrace ranks`` lists them; the
#: reference lists them after ``KINDS``.
ACROSS_RUNS: tuple[AcrossRuns, ...] = (
    AcrossRuns(
        "divergent",
        "the ranks of one job stop drawing alike: a stream's draws part between their logs",
        divergent,
    ),
)


def findings(trace: RawStore) -> list[Finding]:
    """Every finding for ``trace``: causes, then risks, each in the order of ``KINDS``; none on a clean run."""
    events = event_rows(trace)  # an Event made for each row read, never one held per row
    found: list[Finding] = []
    for kind in KINDS:
        found += [replace(f, level=kind.level) for f in kind.find(trace, events, found)]
    return by_level(found)


def across_runs(logs: Sequence[RankLog]) -> list[Finding]:
    """Every finding that comparing ``logs`` (one per process and block) makes, in the order of ``ACROSS_RUNS``."""
    found: list[Finding] = []
    for kind in ACROSS_RUNS:
        found += [replace(f, level=kind.level) for f in kind.find(logs)]
    return by_level(found)


def by_level(found: list[Finding]) -> list[Finding]:
    """``found`` with every cause before any risk, in their order otherwise."""
    return sorted(found, key=lambda f: LEVELS.index(f.level) if f.level in LEVELS else len(LEVELS))


def causes(found: Sequence[Finding]) -> list[Finding]:
    """The findings that are causes: what made this run's numbers depend on something the seeds do not govern."""
    return [f for f in found if f.level == CAUSE]
