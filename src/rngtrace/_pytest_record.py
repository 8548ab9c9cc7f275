"""What the pytest plugin keeps of each test: plain records, built from one session trace's raw events.

The plugin records the whole run in one trace and notes where each test's phases
start and end (an index into the trace's events), so a test that touches no
stream costs two snapshots and a few appends. Only a test with events, a leak or
a failure to report is turned into a record: plain lists and dicts, so that
pytest-xdist carries it from a worker to the controller inside the test's report.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ._model import NO_STACK, UNATTRIBUTED, moved_parts

#: events kept one by one per record; the rest are only counted
MAX_RECORD_EVENTS = 1000
#: packages whose seeds between tests are theirs, not the test's: (package folder, how its frame is found)
_RANDOMLY = "pytest_randomly"
_HYPOTHESIS = "hypothesis"


def _package_dir(filename: str) -> str | None:
    """The top folder under site-packages of ``filename``, or None (a user file)."""
    parts = filename.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in ("site-packages", "dist-packages"):
            return parts[i + 1]
    return None


def foreign_seed(kind: str, stack: tuple) -> bool:
    """Whether a seed was applied by pytest-randomly or Hypothesis, not by the test.

    pytest-randomly never calls test code, so any of its frames marks the seed as
    its own. Hypothesis calls the test, so only its own call (the innermost
    frame) does: a test's seed under ``@given`` stays the test's.
    """
    if kind == "draw" or kind == UNATTRIBUTED or not stack:
        return False
    if _package_dir(stack[0].filename) == _HYPOTHESIS:
        return True
    return any(_package_dir(frame.filename) == _RANDOMLY for frame in stack)


class Window:
    """The phases of one test, as event positions in the session trace, on the thread that ran it."""

    __slots__ = ("thread", "marks", "fixtures", "assigned")

    def __init__(self, thread: int) -> None:
        self.thread = thread
        #: (event index, dropped count, the phase that ended there; None at the start), in order
        self.marks: list[tuple[int, int, str | None]] = []
        #: (start, end, fixture key) for each wider-scoped fixture set up in this test
        self.fixtures: list[tuple[int, int, str]] = []
        #: how many phases have been given to records already
        self.assigned = 0

    def phases(self) -> Iterable[tuple[str, int, int, int]]:
        """(phase, first event, end event, events dropped in it) for each phase."""
        for (start, dropped, _), (end, dropped_end, phase) in zip(self.marks, self.marks[1:]):
            yield phase or "", start, end, dropped_end - dropped


def new_record(key: str, label: str, kind: str) -> dict[str, Any]:
    """An empty record: ``kind`` is "test", "fixture" (wider scope) or "outside" (not in any test)."""
    return {
        "key": key,
        "label": label,
        "kind": kind,
        "exempt": None,
        "events": [],
        "counts": {},
        "more": 0,
        "leaks": [],
        "failed_by": None,
    }


def add_event(
    record: dict[str, Any], raw: tuple, stack: tuple, noticed: tuple, phase: str, listed: list | None = None
) -> None:
    """Add one raw event; ``stack`` its frames, ``noticed`` the noticing call's for an unattributed move.

    ``listed``: those frames as the record lists them (``listed_frames``), made once per stack by
    a caller that adds many events of one stack; shared by them, and never changed.
    """
    stream, kind, api, count = raw[0], raw[1], raw[2], raw[3]
    detail = moved_parts(raw)[0] if kind == UNATTRIBUTED else raw[6]
    counts = record["counts"]
    slot = f"{stream}|{kind}|{phase}"
    counts[slot] = counts.get(slot, 0) + 1
    if len(record["events"]) >= MAX_RECORD_EVENTS:
        record["more"] += 1
        return
    if listed is None:
        listed = listed_frames(noticed if kind == UNATTRIBUTED else stack)
    record["events"].append([stream, kind, api, count, listed, phase, detail])


def listed_frames(frames: tuple) -> list:
    """Frames as a record lists them: [filename, line, function] each."""
    return [[f.filename, f.lineno, f.function] for f in frames]


def add_dropped(record: dict[str, Any], phase: str, dropped: int) -> None:
    """Count events the trace did not keep one by one (past its max_events) for ``phase``."""
    if dropped:
        slot = f"*|dropped|{phase}"
        record["counts"][slot] = record["counts"].get(slot, 0) + dropped


def stacks_of(raws: list[tuple], resolve: Any, depth: int) -> dict[int, tuple]:
    """Stack id -> frames for every stack ``raws`` refer to (the noticing calls' included)."""
    ids = set()
    for raw in raws:
        ids.add(raw[4])
        if raw[1] == UNATTRIBUTED:
            ids.add(moved_parts(raw)[1])
    ids.discard(NO_STACK)
    return {sid: resolve(sid, depth) for sid in ids if sid is not None and sid >= 0}


def merge(into: dict[str, Any], other: dict[str, Any]) -> None:
    """Fold ``other`` (the same fixture, seen again or by another worker) into ``into``."""
    for slot, n in other["counts"].items():
        into["counts"][slot] = into["counts"].get(slot, 0) + n
    room = MAX_RECORD_EVENTS - len(into["events"])
    into["events"].extend(other["events"][: max(room, 0)])
    into["more"] += other["more"] + max(len(other["events"]) - max(room, 0), 0)
    into["leaks"].extend(leak for leak in other["leaks"] if leak not in into["leaks"])


def is_empty(record: dict[str, Any]) -> bool:
    return not record["counts"] and not record["leaks"]
