"""The pytest plugin turned on: one trace for the run, each test's phases marked in it.

A test that touches no stream costs two snapshots of the streams (for leaks) and
a few list appends; only its events are ever turned into a record
(``_pytest_record``), handed to pytest in the test's teardown report. Which
record each event goes to is ``_pytest_assign``'s; what pytest calls a test or a
fixture, ``_pytest_items``'; leaks and the short paths of a quiet test are here.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from . import _pytest_record as records
from ._pytest_assign import DEPTH, Assigning
from ._pytest_items import code_of, exempt, item_id

#: events kept one by one in the session trace; past ROTATE_AT, a new trace starts after the test
MAX_EVENTS = 200_000
ROTATE_AT = 50_000


def _held(manager: Any) -> Iterator[Any]:
    """``manager`` entered, until the generator is closed."""
    with manager as value:
        yield value


class Tracer(Assigning):
    """The plugin while turned on: one trace for the run, one record per test that touched a stream."""

    def __init__(self, config: pytest.Config, mode: str) -> None:
        self.config = config
        self.strict = mode == "strict"
        self.json_path: str | None = config.getoption("rng_trace_json")
        #: key -> record, from every test report seen here (the controller's, under xdist)
        self.records: dict[str, dict[str, Any]] = {}
        self.tests = 0
        self.problems: list[str] = []
        self._block: Any = None
        self._trace: Any = None
        self._rec: Any = None
        self._seen = 0  # the first event of the session trace not yet given to a record
        self._window: records.Window | None = None
        self._before: dict[str, dict[str, Any]] = {}
        self._made: dict[str, dict[str, Any]] = {}  # key -> record, for the running test
        self._foreign: set[str] = set()  # streams pytest-randomly or Hypothesis reseeded in the running test
        self._touched: set[str] = set()  # streams any event of the running test was on
        self._seeded: set[str] = set()  # streams the running test reseeded itself
        #: stream -> its full state (``Source.state()``), as the last test left it: a fingerprint sees draws,
        #: not every reseed, so a test that reseeds is checked against these. Read only after a test with events.
        self._known: dict[str, dict[str, Any]] = {}
        #: stack id -> its frames, resolved once for the session trace's table (pytest-randomly's seeds come
        #: from the same few stacks in every test)
        self._resolved: dict[int, tuple] = {}
        #: (stack id, kind) -> whether such an event is pytest-randomly's or Hypothesis's seed
        self._foreign_at: dict[tuple[int, str], bool] = {}
        self._stale = True  # events outside tests may have moved the streams since _known was read
        self._fixture_code: dict[str, tuple[str, str, int, int]] = {}
        self._package_labels: dict[str, str] = {}  # a package's __init__.py -> its record's label

    # -- the session trace -------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        # xdist's controller runs no test: its workers trace, and their reports bring the records.
        if not self.config.pluginmanager.has_plugin("dsession"):
            self._begin()

    def _begin(self) -> None:
        from ._hub import HUB
        from .tracer import RngTrace

        # A with statement held open in a generator: its exit is the statement's own, which a
        # Ctrl-C anywhere between here and the end of the run cannot lose, and closing is idempotent.
        self._block = _held(RngTrace(print=False, depth=DEPTH, max_events=MAX_EVENTS))
        self._trace = next(self._block)
        self._rec = HUB.rec
        self._seen = 0
        self._resolved, self._foreign_at = {}, {}  # a new trace's stack ids

    def _end(self) -> None:
        block = self._block
        if block is not None:
            try:
                block.close()
            finally:
                self._block = None
                if self._trace is not None:
                    self._outside(len(self._trace.raw), live=False)
                    self._trace = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        try:
            self._end()
        except Exception as error:  # noqa: BLE001 (the hub has taken its hooks off whatever the error)
            self.problems.append(f"the end of the session: {type(error).__name__}: {error}")
        for record in self._made.values():
            self._collect(record)
        self._made = {}
        if self.json_path and not hasattr(self.config, "workerinput"):
            self._write_json()

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self._end()  # a run stopped before its session finished (a usage error, Ctrl-C) leaves nothing behind

    # -- one test ------------------------------------------------------------------
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
        if self._trace is not None:
            try:
                self._open(item)
            except Exception as error:  # noqa: BLE001 (the tracer must never break the run it watches)
                self._window = None
                self.problems.append(f"{item.nodeid}: {type(error).__name__}: {error}")
        try:
            yield
        finally:
            self._window = None

    def _open(self, item: pytest.Item) -> None:
        """A test begins: what came before is outside any test; note the streams' states and where setup starts."""
        self._outside(len(self._trace.raw))
        window = records.Window(self._rec.state().key)  # how events name the thread running the test
        self._foreign, self._touched, self._seeded = set(), set(), set()
        if self._stale or len(self._known) < len(self._sources):
            self._known.update(self._full(self._sources))
            self._stale = False
        self._before = self._snapshot()
        window.marks.append((len(self._trace.raw), self._trace.dropped, None))  # setup begins
        self._window = window

    @property
    def _sources(self) -> dict[str, Any]:
        """The installed sources (stream -> Source): the hub's own table, read afresh, never kept."""
        return self._rec.sources if self._rec is not None else {}

    def _phase_ended(self, when: str) -> None:
        # A phase ends where its report is made: one hook, not three wrappers, per phase.
        window = self._window
        if window is not None and self._trace is not None:
            window.marks.append((len(self._trace.raw), self._trace.dropped, when))

    @pytest.hookimpl(hookwrapper=True)
    def pytest_fixture_setup(self, fixturedef: Any, request: Any) -> Iterator[None]:
        window, trace = self._window, self._trace
        if window is None or trace is None or fixturedef.scope == "function":
            yield
            return
        start = len(trace.raw)
        yield
        key = f"fixture:{fixturedef.baseid}::{fixturedef.argname}"
        window.fixtures.append((start, len(trace.raw), key))
        if key not in self._fixture_code:
            self._fixture_code[key] = code_of(fixturedef, request)

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: Any) -> Iterator[None]:
        self._phase_ended(call.when)
        outcome = yield
        if self._window is None or self._trace is None:
            return
        report = outcome.get_result()  # type: ignore[attr-defined]
        try:
            self._judge(item, report, call.when)
        except Exception as error:  # noqa: BLE001 (the tracer must never break the run it watches)
            self.problems.append(f"{item.nodeid}: {type(error).__name__}: {error}")

    def _judge(self, item: pytest.Item, report: Any, when: str) -> None:
        """Turn the phases so far into records; at teardown, add leaks and hand the records to the report."""
        if when != "teardown" and not self.strict:
            return  # only strict mode acts at the call: the phases are judged together at teardown
        window = self._window
        end = len(self._trace.raw)
        if self._quiet(window, when) or (when == "teardown" and self._only_foreign(window)):  # type: ignore[arg-type]
            if when == "teardown":
                self._seen = end
            return
        phases = list(window.phases())  # type: ignore[union-attr]
        phases, window.assigned = phases[window.assigned :], len(phases)  # type: ignore[union-attr]
        test = self._made.get(item.nodeid)
        if test is None:
            test = self._made[item.nodeid] = records.new_record(item.nodeid, item_id(item), "test")
            test["exempt"] = exempt(item)
        self._assign(window, phases, test)  # type: ignore[arg-type]
        if when == "teardown":
            self._leaks(test)
            self._seen = end
        if when == "setup":
            return  # judged at the call (or, where setup failed, at teardown), with the call's draws
        if self.strict and test["exempt"] is None and test["failed_by"] is None and not records.is_empty(test):
            self._fail(report, test, when)
        if when == "teardown":
            report.rngtrace = [r for r in self._made.values() if not records.is_empty(r)]
            self._made = {}
            if len(self._trace.raw) > ROTATE_AT:
                self._end()
                self._begin()

    def _quiet(self, window: records.Window, when: str) -> bool:
        """Whether the test so far recorded nothing and (at teardown) moved no stream: most tests, at little cost."""
        marks = window.marks
        if self._made or not marks or marks[-1][0] != marks[0][0] or marks[-1][1] != marks[0][1]:
            return False
        if when != "teardown":
            return True
        return self._unmoved()

    def _unmoved(self, skip: Any = ()) -> bool:
        """Whether every stream but those of ``skip`` is where the test found it (its quick states)."""
        after = self._snapshot()
        for name, states in self._before.items():
            if name in skip:
                continue
            now = after.get(name)
            if now is None or now.keys() != states.keys():
                return False
            source = self._sources.get(name)
            if not all(_same(source, old, now[stream]) for stream, old in states.items()):
                return False
        return True

    def _only_foreign(self, window: records.Window) -> bool:
        """Whether the test's events were all plugins' reseeds (pytest-randomly's, three a test) and it leaked nothing.

        The common case with pytest-randomly installed, judged in a few µs: each event's
        stack was seen before (the same reseeding line every test), no other stream moved,
        and the reseeded streams' full states are kept for the next test, as ``_leaks`` does.
        Anything else (an event not known foreign, a drop, a thread, a fixture) is left to it.
        """
        marks = window.marks
        if self._made or window.fixtures or not marks or marks[-1][1] != marks[0][1]:
            return False
        raws, foreign_at, thread = self._trace.raw, self._foreign_at, window.thread
        bases = set()
        for i in range(marks[0][0], marks[-1][0]):
            raw = raws[i]
            if raw[5] != thread or not foreign_at.get((raw[4], raw[1])):
                return False
            bases.add(raw[0].split(".", 1)[0])
        # A stream the plugin reseeded: where it left it is no leak (see _leaks).
        if not self._unmoved(skip=bases):
            return False
        self._known.update(self._full(bases))
        return True

    def _snapshot(self) -> dict[str, dict[str, Any]]:
        out = {}
        for name, source in list(self._sources.items()):
            try:
                out[name] = source.snapshot()
            except Exception:  # noqa: BLE001 (a state that cannot be read is no leak)
                continue
        return out

    def _leaks(self, test: dict[str, Any]) -> None:
        """Streams the test left in another state than it found them (not the ones a plugin reseeds anyway).

        The quick snapshots see every draw; a stream the test reseeded is also compared in full,
        against the state the previous test left (``_known``).
        """
        after = self._snapshot()
        moved = set()
        for name, states in self._before.items():
            source = self._sources.get(name)
            if source is None or name not in after:
                continue
            for stream, old in states.items():
                new = after[name].get(stream)
                if new is not None and not _same(source, old, new):
                    moved.add(name)
                    if name not in self._foreign:
                        self._leak_owner(test, stream)["leaks"].append(stream)
        refresh = self._touched | moved
        if not refresh:
            return
        now = self._full(refresh)
        for name in self._seeded - moved - self._foreign:
            source = self._sources.get(name)
            old_full, new_full = self._known.get(name, {}), now.get(name, {})
            for stream, state in new_full.items():
                old = old_full.get(stream)
                if source is not None and old is not None and not _same(source, old, state):
                    self._leak_owner(test, stream)["leaks"].append(stream)
        self._known.update(now)

    def _full(self, names: Any) -> dict[str, dict[str, Any]]:
        """The full states of the streams ``names`` (``Source.full()``: a test with events pays for them)."""
        out = {}
        for name in list(names):
            source = self._sources.get(name)
            if source is None:
                continue
            try:
                out[name] = source.full()
            except Exception:  # noqa: BLE001 (a state that cannot be read is no leak)
                continue
        return out

    def _leak_owner(self, test: dict[str, Any], stream: str) -> dict[str, Any]:
        """Whoever alone moved ``stream`` (a wider fixture, another thread) owns its leak; else the test."""
        moved_by = [r for r in self._made.values() if any(slot.startswith(stream + "|") for slot in r["counts"])]
        if test in moved_by or not moved_by:
            return test
        return min(moved_by, key=lambda r: r["kind"] != "fixture")

    def _fail(self, report: Any, test: dict[str, Any], when: str) -> None:
        from ._pytest_report import draw_log, strict_message

        test["failed_by"] = when
        rootdir = str(self.config.rootpath)
        if report.passed:
            report.outcome = "failed"
            report.longrepr = strict_message(test, rootdir)
        report.sections.append(("rngtrace draw log", draw_log(test, rootdir)))

    def _outside(self, end: int, live: bool = True) -> None:
        """Events recorded outside any test (collection, between tests) up to ``end``."""
        trace, start = self._trace, self._seen
        self._seen = end
        if trace is None or end <= start:
            return
        raws = trace.raw[start:end]
        resolve = trace.live[0] if live and trace.live else None
        stacks = records.stacks_of(raws, resolve, DEPTH) if resolve is not None else {}
        if resolve is None:
            stacks = {sid: frames for sid, frames in trace.resolved_stacks().items()}
        self._stale = True
        for raw in raws:
            stack = stacks.get(raw[4], ())
            if records.foreign_seed(raw[1], stack):
                continue
            noticed = stacks.get(records.moved_parts(raw)[1], ()) if raw[1] == records.UNATTRIBUTED else ()
            target = self._record(
                "outside:collection", "outside any test (collection, imports, between tests)", "outside"
            )
            records.add_event(target, raw, stack, noticed, "outside")

    # -- reports, summary, log ---------------------------------------------------------
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "teardown":
            self.tests += 1
        for record in getattr(report, "rngtrace", None) or ():
            self._collect(record)

    def _collect(self, record: dict[str, Any]) -> None:
        if records.is_empty(record):
            return
        old = self.records.get(record["key"])
        if old is None:
            self.records[record["key"]] = record
        else:
            records.merge(old, record)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if hasattr(self.config, "workerinput"):
            return
        from ._pytest_report import summary

        terminalreporter.section("rngtrace: global random streams")
        for line in summary(list(self.records.values()), self.tests, str(self.config.rootpath), self.strict):
            terminalreporter.line(line)
        for problem in self.problems:
            terminalreporter.line(f"rngtrace could not judge {problem}")

    def _write_json(self) -> None:
        from ._pytest_report import save_log

        try:
            save_log(list(self.records.values()), self.json_path)  # type: ignore[arg-type]
        except OSError as error:
            self.problems.append(f"--rng-trace-json: cannot write {self.json_path!r} ({error}); give a writable path")


def _same(source: Any, old: Any, new: Any) -> bool:
    if old.__class__ is bytes and new.__class__ is bytes:
        return bool(old == new)
    try:
        return bool(source.same(old, new))
    except Exception:  # noqa: BLE001
        return True
