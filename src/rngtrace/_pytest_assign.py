"""Giving each event of a test's phases to its record: the test's, a wider fixture's, or other threads'.

The part of the plugin's ``Tracer`` that turns the session trace's raw events
into records (``_pytest_record``): a plugin's reseed is noted and never blamed,
an event of another thread goes to "other threads", one a wider-scoped fixture
or a package's ``setup_module`` made goes to that, the rest to the test. A
phase of millions of events is counted by stream, kind and stack, in C, past
the first ones listed.
"""

from __future__ import annotations

import operator
import os
from collections import Counter
from typing import Any

import pytest

from . import _pytest_record as records
from ._pytest_items import MODULE_SETUP, MODULE_TEARDOWN, PYTEST_DIR, in_code, package_label

#: frames kept per stack: a test's line may sit under a deep library call
DEPTH = 24
#: stacks kept resolved at once (a bound, not a loss: one past it is resolved again)
MAX_RESOLVED = 20_000
#: events of one phase assigned one by one; past them, counted by kind and stack (a test drawing a
#: million times): no record lists more than records.MAX_RECORD_EVENTS anyway
ONE_BY_ONE = records.MAX_RECORD_EVENTS
_TALLY_KEY = operator.itemgetter(0, 1, 4, 5)  # stream, kind, stack id, thread


def _tally_of(raws: list) -> Counter:
    """``raws`` counted by stream, kind, stack and thread.

    Counted whole first: a loop's draws are equal tuples, often the very same one (the recorder
    appends its last event again), which a dict finds by identity; then the few distinct ones are
    keyed. Half the time of keying each event (a 4-tuple made, hashed and compared per event).
    """
    try:
        whole = Counter(raws)
    except TypeError:  # a field that does not hash: key each event
        return Counter(map(_TALLY_KEY, raws))
    tally: Counter = Counter()
    for raw, n in whole.items():
        tally[_TALLY_KEY(raw)] += n
    return tally


class Assigning:
    """The ``Tracer``'s assignment of events to records; the state it reads is the ``Tracer``'s own."""

    config: pytest.Config
    _trace: Any
    _made: dict[str, dict[str, Any]]
    _foreign: set[str]
    _touched: set[str]
    _seeded: set[str]
    _resolved: dict[int, tuple]
    _foreign_at: dict[tuple[int, str], bool]
    _fixture_code: dict[str, tuple[str, str, int, int]]
    _package_labels: dict[str, str]

    def _assign(self, window: records.Window, phases: list, test: dict[str, Any]) -> None:
        """Give each event of ``phases`` to the test, a wider fixture, or "other threads"."""
        raws = self._trace.raw
        if not any(end > start or dropped for _phase, start, end, dropped in phases):
            return
        for phase, start, end, dropped in phases:
            records.add_dropped(test, phase, dropped)
            cut = end
            if end - start > ONE_BY_ONE and not any(s < end and e > start + ONE_BY_ONE for s, e, _k in window.fixtures):
                cut = start + ONE_BY_ONE  # the rest has no fixture's range in it: counted, not listed
            picked = raws[start:cut]
            stacks = records.stacks_of(picked, self._resolve, DEPTH)
            listed: dict[Any, list] = {}  # stack id -> its frames as listed, made once per stack
            for i, raw in enumerate(picked, start):
                stack = stacks.get(raw[4], ())
                target = self._target(window, test, raw[0], raw[1], raw[4], raw[5], stack, phase, i)
                if target is not None:
                    records.add_event(target, raw, stack, (), phase, self._listed(raw, listed))
            if cut < end:
                self._tally(window, test, raws, cut, end, phase)

    def _tally(
        self, window: records.Window, test: dict[str, Any], raws: list, start: int, end: int, phase: str
    ) -> None:
        """Count events ``start:end`` of a phase by stream, kind, stack and thread, in C.

        Events whose record still has room (another thread's draw in a test that drew a million
        times) are listed first, in order, until their record is full; the rest are counted.
        """
        tally = _tally_of(raws[start:end])
        targets: dict[tuple, dict[str, Any]] = {}
        for key in tally:
            stream, kind, sid, thread = key
            stack = self._resolve(sid, DEPTH) if sid is not None and sid >= 0 else ()
            target = self._target(window, test, stream, kind, sid, thread, stack, phase, -1)
            if target is not None:
                targets[key] = target
        roomy = {key for key, target in targets.items() if len(target["events"]) < records.MAX_RECORD_EVENTS}
        listed: dict[Any, list] = {}
        for i in range(start, end) if roomy else ():
            raw = raws[i]
            key = _TALLY_KEY(raw)
            if key not in roomy:
                continue
            target = targets[key]
            records.add_event(target, raw, (), (), phase, self._listed(raw, listed))
            tally[key] -= 1
            if len(target["events"]) >= records.MAX_RECORD_EVENTS:
                roomy -= {k for k in roomy if targets[k] is target}
                if not roomy:
                    break
        for key, target in targets.items():
            n = tally[key]
            if n:
                counts = target["counts"]
                slot = f"{key[0]}|{key[1]}|{phase}"
                counts[slot] = counts.get(slot, 0) + n
                target["more"] += n

    def _listed(self, raw: tuple, listed: dict[Any, list]) -> list:
        """The frames an event's record lists (the noticing call's for an unattributed move), made once per stack."""
        shown = records.moved_parts(raw)[1] if raw[1] == records.UNATTRIBUTED else raw[4]
        frames = listed.get(shown)
        if frames is None:
            stack = self._resolve(shown, DEPTH) if shown is not None and shown >= 0 else ()
            frames = listed[shown] = records.listed_frames(stack)
        return frames

    def _target(
        self,
        window: records.Window,
        test: dict[str, Any],
        stream: str,
        kind: str,
        sid: Any,
        thread: int,
        stack: tuple,
        phase: str,
        index: int,
    ) -> dict[str, Any] | None:
        """The record an event goes to; None for a plugin's reseed (noted, never blamed)."""
        base = stream.split(".", 1)[0]
        self._touched.add(base)
        key = (sid, kind)
        foreign = self._foreign_at.get(key)
        if foreign is None:
            if len(self._foreign_at) >= MAX_RESOLVED:
                self._foreign_at.clear()
            foreign = self._foreign_at[key] = records.foreign_seed(kind, stack)
        if foreign:
            self._foreign.add(base)
            return None
        if kind == "seed" and thread == window.thread:
            self._seeded.add(base)
        if thread != window.thread:
            return self._record("outside:threads", "other threads (not blamed on the test they ran beside)", "outside")
        return self._fixture_for(window, index, stack, phase) or test

    def _fixture_for(self, window: records.Window, index: int, stack: tuple, phase: str) -> dict | None:
        """The record of the wider-scoped fixture (or package setup_module) that made event ``index``, if one did."""
        if phase != "call":
            package = self._package_record(stack)
            if package is not None:
                return package
        key = None
        for start, end, name in window.fixtures:
            if start <= index < end:
                key = name  # the innermost: a fixture set up inside another comes later in the list
        if key is None and phase == "teardown":
            key = next((k for k, code in self._fixture_code.items() if in_code(stack, code)), None)
        if key is None:
            return None
        return self._record(key, self._fixture_code[key][0], "fixture")

    def _package_record(self, stack: tuple) -> dict | None:
        """The record of the package whose setup_module or teardown_module pytest was running, if it was.

        pytest calls these itself, in the first test's setup and the last one's teardown, with
        no fixture around them: only the stack tells them from the test's own draws.
        """
        for frame, caller in zip(stack, stack[1:]):
            if (
                frame.function in MODULE_SETUP + MODULE_TEARDOWN
                and caller.filename.startswith(PYTEST_DIR)
                and os.path.basename(frame.filename) == "__init__.py"
            ):
                label = self._package_labels.get(frame.filename)
                if label is None:
                    label = self._package_labels[frame.filename] = package_label(frame.filename, self.config)
                return self._record(f"package:{frame.filename}", label, "fixture")
        return None

    def _record(self, key: str, label: str, kind: str) -> dict[str, Any]:
        record = self._made.get(key)
        if record is None:
            record = self._made[key] = records.new_record(key, label, kind)
        return record

    def _resolve(self, sid: int, depth: int) -> tuple:
        """The frames of stack ``sid``, each resolved once per session trace."""
        frames = self._resolved.get(sid)
        if frames is None:
            if len(self._resolved) >= MAX_RESOLVED:
                self._resolved.clear()
            frames = self._resolved[sid] = self._trace.live[0](sid, depth)
        return frames
