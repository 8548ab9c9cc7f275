"""The pytest plugin turned on: one trace for the run, each test's phases marked in it.

A test that touches no stream costs two snapshots of the streams (for leaks) and
a few list appends; only its events are ever turned into a record
(``_pytest_record``), handed to pytest in the test's teardown report.
"""

from __future__ import annotations

import inspect
import operator
import os
import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from . import _pytest_record as records
from ._paths import short_path

#: frames kept per stack: a test's line may sit under a deep library call
DEPTH = 24
#: events kept one by one in the session trace; past ROTATE_AT, a new trace starts after the test
MAX_EVENTS = 200_000
ROTATE_AT = 50_000
#: stacks kept resolved at once (a bound, not a loss: one past it is resolved again)
MAX_RESOLVED = 20_000
#: events of one phase assigned one by one; past them, counted by kind and stack (a test drawing a
#: million times): no record lists more than records.MAX_RECORD_EVENTS anyway
ONE_BY_ONE = records.MAX_RECORD_EVENTS
_TALLY_KEY = operator.itemgetter(0, 1, 4, 5)  # stream, kind, stack id, thread
#: what pytest calls in a module or a package's __init__.py, the first of each pair it finds there
MODULE_SETUP = ("setUpModule", "setup_module")
MODULE_TEARDOWN = ("tearDownModule", "teardown_module")
#: pytest's own modules: a package's setup_module is reported as the package's only where pytest called it
_PYTEST_DIR = os.path.dirname(inspect.getfile(pytest.Package)) + os.sep


def _held(manager: Any) -> Iterator[Any]:
    """``manager`` entered, until the generator is closed."""
    with manager as value:
        yield value


class Tracer:
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
            self._fixture_code[key] = _code_of(fixturedef, request)

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
            test = self._made[item.nodeid] = records.new_record(item.nodeid, _test_id(item), "test")
            test["exempt"] = _exempt(item)
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
        tally = Counter(map(_TALLY_KEY, raws[start:end]))
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
            key = next((k for k, code in self._fixture_code.items() if _in_code(stack, code)), None)
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
                and caller.filename.startswith(_PYTEST_DIR)
                and os.path.basename(frame.filename) == "__init__.py"
            ):
                label = self._package_labels.get(frame.filename)
                if label is None:
                    label = self._package_labels[frame.filename] = _package_label(frame.filename, self.config)
                return self._record(f"package:{frame.filename}", label, "fixture")
        return None

    def _record(self, key: str, label: str, kind: str) -> dict[str, Any]:
        record = self._made.get(key)
        if record is None:
            record = self._made[key] = records.new_record(key, label, kind)
        return record

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

    def _resolve(self, sid: int, depth: int) -> tuple:
        """The frames of stack ``sid``, each resolved once per session trace."""
        frames = self._resolved.get(sid)
        if frames is None:
            if len(self._resolved) >= MAX_RESOLVED:
                self._resolved.clear()
            frames = self._resolved[sid] = self._trace.live[0](sid, depth)
        return frames

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


def _exempt(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("rng_global")
    if marker is not None:
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        return f"marked rng_global{': ' + str(reason) if reason else ''}"
    if "rng_trace" in getattr(item, "fixturenames", ()):
        return "uses the rng_trace fixture"
    return None


def _test_id(item: pytest.Item) -> str:
    """The test's node id, as pytest's own; outside the rootdir, with its file as given from the invocation dir.

    There pytest's id starts from the path given on the command line (``::test_x`` for a file),
    which names no file: the path from where pytest was run names it, and runs it again.
    """
    rootpath, nodeid = item.config.rootpath, item.nodeid
    path = item.path
    if path == rootpath or rootpath in path.parents:
        return nodeid
    try:
        where = os.path.relpath(path, item.config.invocation_params.dir)
    except ValueError:  # another drive
        where = str(path)
    rest = nodeid.partition("::")[2]
    return f"{where.replace(os.sep, '/')}::{rest}" if rest else where.replace(os.sep, "/")


def _xunit_names(obj: Any, setup: tuple[str, ...], teardown: tuple[str, ...]) -> str:
    """Name the setup and teardown functions pytest finds in ``obj`` (``setup_module/teardown_module``)."""
    found = (next((name for name in names if callable(getattr(obj, name, None))), None) for names in (setup, teardown))
    return "/".join(name for name in found if name)


def _package_label(init_file: str, config: pytest.Config) -> str:
    """``setup_module (package scope, sklearn/__init__.py)``: a package's record's label."""
    module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == init_file), None)
    names = _xunit_names(module, MODULE_SETUP, MODULE_TEARDOWN) if module is not None else ""
    return f"{names or 'setup_module'} (package scope, {short_path(init_file, str(config.rootpath))})"


#: pytest's fixtures for xunit functions: their name's prefix -> (where the functions are, their names)
_XUNIT = {
    "_xunit_setup_module_fixture_": ("module", MODULE_SETUP, MODULE_TEARDOWN),
    "_xunit_setup_class_fixture_": ("cls", ("setup_class",), ("teardown_class",)),
}


def _code_of(fixturedef: Any, request: Any) -> tuple[str, str, int, int]:
    """(label, file, first line, last line) of a wider fixture's function, to know its teardown's frames."""
    where = fixturedef.baseid or "conftest"
    label = f"fixture '{fixturedef.argname}' ({fixturedef.scope} scope, {where})"
    for prefix, (owner, setup, teardown) in _XUNIT.items():
        # A setup_module is run by a fixture of pytest's own: named after the functions, not the fixture.
        if fixturedef.argname.startswith(prefix):
            names = _xunit_names(getattr(request, owner, None), setup, teardown)
            label = f"{names or fixturedef.argname} ({fixturedef.scope} scope, {where})"
    func = inspect.unwrap(fixturedef.func)
    code = getattr(func, "__code__", None)
    if code is None:
        return label, "", 0, 0
    last = max((line for *_x, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    return label, code.co_filename, code.co_firstlineno, last


def _in_code(stack: tuple, code: tuple[str, str, int, int]) -> bool:
    _label, filename, first, last = code
    return bool(filename) and any(f.filename == filename and first <= f.lineno <= last for f in stack)


def _same(source: Any, old: Any, new: Any) -> bool:
    if old.__class__ is bytes and new.__class__ is bytes:
        return bool(old == new)
    try:
        return bool(source.same(old, new))
    except Exception:  # noqa: BLE001
        return True
