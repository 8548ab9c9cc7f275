"""Entering and leaving a trace: safe under threads, forks, interrupts and other tools' patches."""

from __future__ import annotations

import dis
import linecache
import os
import pickle
import random
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import rngtrace
from rngtrace import _hotpath, rng_trace
from rngtrace._hub import HUB


@pytest.fixture
def fast_switching():
    """Switch threads every microsecond, so a race window of a few bytecodes is hit."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _deep(n: int) -> float:
    return _deep(n - 1) if n else random.random()


def test_a_draw_in_another_thread_never_raises_while_traces_start_and_end(fast_switching):
    stop, errors = threading.Event(), []

    def worker():
        while not stop.is_set():
            try:
                _deep(4)
            except BaseException as error:  # noqa: BLE001 -- any error is the failure
                errors.append(error)
                return

    thread = threading.Thread(target=worker, name="drawing-worker")
    thread.start()
    try:
        for _ in range(3000):
            with rng_trace(print=False):
                random.random()
            if errors:
                break
    finally:
        stop.set()
        thread.join(timeout=60)
    assert errors == [] and not thread.is_alive()


def test_events_from_two_threads_interning_new_sites_at_once_carry_their_own_stacks(fast_switching):
    # Each line below is a call site seen for the first time in each trace: every draw interns.
    np.random.rand()  # numpy 2 imports numpy.random on first use: here, not in a traced thread
    lines = "\n".join(f"    out.append({call})" for call in ["DRAW()"] * 400)
    namespace: dict = {}
    exec(
        compile(f"def numpy_sites(out):\n{lines.replace('DRAW', 'np.random.rand')}\n", "numpy_sites.py", "exec"),
        {"np": np},
        namespace,
    )
    exec(
        compile(f"def random_sites(out):\n{lines.replace('DRAW', 'random.random')}\n", "random_sites.py", "exec"),
        {"random": random},
        namespace,
    )
    wrong = []
    for _ in range(40):
        with rng_trace(print=False) as trace:
            threads = [threading.Thread(target=namespace[f], args=([],)) for f in ("numpy_sites", "random_sites")]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        for event in trace.events:
            expected = "numpy_sites" if event.stream == "numpy" else "random_sites"
            if not event.stack or event.stack[0].function != expected:
                wrong.append((event.stream, event.stack[:1]))
        assert len(trace.events) == 800
    assert wrong == []


def test_thread_names_are_kept_per_thread_not_per_traced_call():
    @rng_trace(print=False)
    def draw():
        random.random()

    def worker():
        for _ in range(500):
            draw()

    threads = [threading.Thread(target=worker, name=f"worker-{i}") for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(500):
        draw()
    assert len(HUB.rec.thread_names) <= len(threading.enumerate()) + 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_forked_while_another_thread_is_inside_a_recorded_draw_does_not_hang():
    big = list(range(200_000))
    stop = threading.Event()

    def shuffler():
        while not stop.is_set():
            random.shuffle(big)  # holds the random stream's lock most of the time

    hung = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # 3.12+: fork with threads running
        with rng_trace(print=False):
            thread = threading.Thread(target=shuffler)
            thread.start()
            try:
                for _ in range(3):
                    time.sleep(0.02)
                    pid = os.fork()
                    if pid == 0:  # the child: a traced draw must go through
                        try:
                            with rng_trace(print=False) as trace:
                                random.random()
                            os._exit(0 if len(trace) == 1 else 3)
                        finally:
                            os._exit(4)
                    hung += not _exited_within(pid, 20.0)
            finally:
                stop.set()
                thread.join()
    assert hung == 0


def _exited_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            assert os.waitstatus_to_exitcode(status) == 0
            return True
        time.sleep(0.01)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return False


def _namespaces() -> dict:
    return {
        "random": dict(vars(random)),
        "numpy.random": dict(vars(np.random)),
        "RandomState": dict(vars(np.random.RandomState)),
    }


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
def test_an_interrupt_anywhere_in_a_trace_never_leaves_a_patch_without_a_trace():
    before = _namespaces()

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    one_trace = _two_streams
    one_trace()
    started = time.perf_counter()
    for _ in range(20):
        one_trace()
    took = (time.perf_counter() - started) / 20
    previous = signal.signal(signal.SIGALRM, interrupt)
    rng = random.Random(8)
    interrupted, leaked, left = 0, 0, []
    try:
        for _ in range(400):
            try:
                signal.setitimer(signal.ITIMER_REAL, rng.uniform(took * 0.2, took * 1.2))
                try:
                    one_trace()
                    time.sleep(took)  # an alarm that missed the trace lands here
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            except KeyboardInterrupt:
                interrupted += 1
            # Even one landing in the with statement's own call of __enter__/__exit__ ends the trace.
            for session in HUB.active:
                leaked += 1
                HUB.stop(session, None)
            if HUB.hooked() != {} or _namespaces() != before:
                left.append(HUB.hooked())
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert interrupted > 100 and leaked == 0
    assert left == []
    # No lock was left held either: another thread's traced draws go through.
    helper = threading.Thread(target=one_trace, daemon=True)
    helper.start()
    helper.join(timeout=20)
    assert not helper.is_alive(), "a stream lock was left held by an interrupted draw"


_PACKAGE = os.path.dirname(rngtrace.__file__)
_QUIET_NOPS: dict[Any, frozenset[int]] = {}


def _signal_can_land_before(code: Any, offset: int) -> bool:
    """Whether a real interrupt can be raised as if just before the instruction at ``offset``.

    The interpreter runs signal handlers only at its checks (a function's start, a loop's
    jump, after a call). A `try:` line is a NOP (3.11+) outside every handler's range: an
    interrupt lands there only when the statement before it ended with a call, else a
    line event there raises where no signal ever could.
    """
    quiet = _QUIET_NOPS.get(code)
    if quiet is None:
        ops = [(ins.offset, ins.opname) for ins in dis.get_instructions(code)]
        entries = getattr(dis.Bytecode(code), "exception_entries", ())

        def handler(at: int) -> int | None:
            return next((e.target for e in entries if e.start <= at < e.end), None)

        # Preceded by a call, it stands for an interrupt at that call's check; but where the call
        # is inside a handler's range and the NOP outside it, a raise at the NOP is one no real
        # signal makes (the call's handler would catch it): not a point to test.
        quiet = _QUIET_NOPS[code] = frozenset(
            at
            for i, (at, name) in enumerate(ops)
            if name == "NOP"
            and not (
                i >= 2
                and ops[i - 1][1] == "POP_TOP"
                and ops[i - 2][1].startswith(("CALL", "PRECALL"))
                and handler(ops[i - 2][0]) == handler(at)
            )
        )
    return offset not in quiet


class _InterruptAtLine:
    """A line tracer over rngtrace's own code that raises KeyboardInterrupt at its ``at``-th line.

    A Ctrl-C is raised between two bytecodes; a line event is such a point, so stepping ``at``
    over every line a trace runs puts an interrupt at each place a real one can land between
    statements, deterministically (a timer only hits a narrow window once in a few hundred).
    """

    def __init__(self, at: int) -> None:
        self.at, self.lines, self.fired = at, 0, None
        self.seen: dict[int, set[int]] = {}  # per frame, the lines it ran

    def __call__(self, frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(_PACKAGE):
            return None
        self.seen[id(frame)] = set()  # a new frame (its id may be a freed one's)
        return self.line

    def line(self, frame: Any, event: str, arg: Any) -> Any:
        if event == "line" and self.fired is None:
            seen = self.seen[id(frame)]
            again, line = frame.f_lineno in seen, frame.f_lineno
            seen.add(line)
            if again and linecache.getline(frame.f_code.co_filename, line).lstrip().startswith("with "):
                # The line event of a `with` statement's exit call: no eval-breaker check comes
                # between the block's last line and that call, so no real interrupt lands here.
                return self.line
            if not _signal_can_land_before(frame.f_code, frame.f_lasti):
                return self.line
            self.lines += 1
            if self.lines == self.at:
                self.fired = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
                raise KeyboardInterrupt
        return self.line


def _locks_a_trace_takes() -> dict[str, Any]:
    from rngtrace import _postimport

    locks = {"hub": HUB._lock, "post-import hooks": _postimport.LOCK}
    locks.update(HUB.rec._locks)  # each stream's
    return locks


def _left_state() -> dict:
    from conftest import _global_hooks
    from conftest import _namespaces as every_namespace

    held = sorted(name for name, lock in _locks_a_trace_takes().items() if lock._is_owned())
    st = HUB.rec.states.get(threading.get_ident())
    return {
        **every_namespace(),
        **_global_hooks(),
        "hooked": HUB.hooked(),
        "strays": len(HUB.patches.strays),
        "busy": bool(st is not None and st.busy),
        "locks held": held,
    }


@rng_trace(print=False, streams=("random", "numpy"))
def _decorated() -> float:
    return np.random.rand() + random.random()


def _two_streams() -> None:
    with rng_trace(print=False, streams=("random", "numpy")):
        np.random.rand()
        random.random()


def _every_stream() -> None:
    import torch

    with rng_trace(print=False):
        np.random.rand()
        torch.rand(1)
        random.random()


def _nested() -> None:
    with rng_trace(print=False, streams=("random", "numpy")):
        np.random.rand()
        with rng_trace(print=False, streams="random"):
            random.random()
        np.random.rand()


@pytest.mark.parametrize(
    "one_trace",
    [_two_streams, _every_stream, _nested, _decorated],
    ids=["with block", "every stream", "nested", "decorated call"],
)
def test_an_interrupt_at_any_line_of_a_trace_leaves_nothing_behind(one_trace):
    if one_trace is _every_stream:
        pytest.importorskip("torch")
    one_trace()
    one_trace()  # the first install builds each patch set; the usual one reuses them
    before = _left_state()
    counter = _InterruptAtLine(at=0)
    sys.settrace(counter)
    try:
        one_trace()
    finally:
        sys.settrace(None)
    assert counter.lines > 300, "the line tracer saw too little of the trace"
    left = []
    for at in range(1, counter.lines + 1):
        interrupt = _InterruptAtLine(at)
        sys.settrace(interrupt)
        try:
            one_trace()
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        # Nothing is left running or installed at once, and the next trace runs as usual.
        after = _left_state()
        if HUB.active:
            left.append((interrupt.fired, "a trace is still active"))
            for session in HUB.active:
                HUB.stop(session, None)
        try:
            one_trace()
        except Exception as exc:
            left.append((interrupt.fired, f"the next trace raised {exc!r}"))
            continue
        if after != before:
            left.append(
                (interrupt.fired, sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k)))
            )
            _let_go_of_held_locks()  # a lock left held fails this test, never hangs a later one
            before = _left_state()  # one leak reported once, not at every later line
    assert left == []


def _let_go_of_held_locks() -> None:
    for lock in _locks_a_trace_takes().values():
        while lock._is_owned():
            lock.release()


# 200 `with` statements whose exit calls are sites the catch-all has not seen: on 3.12+ its
# monitoring callback runs before each of them, so most of the call's time is spent in it.
_FRESH_EXITS = "def exits(lock):\n" + "    with lock:\n        pass\n" * 200


def _fresh_exits() -> Callable[[Any], None]:
    namespace: dict[str, Any] = {}
    exec(compile(_FRESH_EXITS, "<fresh exits>", "exec"), namespace)  # new code: every site new
    return namespace["exits"]


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs signal.setitimer")
@pytest.mark.skipif(
    sys.version_info >= (3, 12) and _hotpath.SPEEDUPS is None,
    reason="without the C accelerator an interrupt in the monitoring callback can skip the call (README)",
)
def test_an_interrupt_during_a_trace_never_leaves_the_programs_own_lock_held():
    def interrupt(signum, frame):
        raise KeyboardInterrupt

    lock = threading.Lock()
    rng = random.Random(3)
    interrupted, held = 0, 0
    with rng_trace(print=False, streams=("random", "numpy")):
        started = time.perf_counter()
        _fresh_exits()(lock)
        took = time.perf_counter() - started
        previous = signal.signal(signal.SIGALRM, interrupt)
        try:
            for _ in range(300):
                exits = _fresh_exits()
                try:
                    # Never 0, which would disarm the timer rather than set it.
                    signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.05, 1) * took + 1e-5)
                    try:
                        exits(lock)
                        time.sleep(took)  # an alarm that missed the call lands here
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                except KeyboardInterrupt:
                    interrupted += 1
                if lock.locked():
                    held += 1
                    lock.release()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
    assert interrupted == 300  # every interrupt reached the program
    assert held == 0


def test_a_patch_made_inside_a_trace_is_kept_and_our_wrapper_put_back_later_is_removed(monkeypatch):
    original = random.random

    def fake():
        return 0.25

    with rng_trace(print=False):
        wrapper = random.random
        monkeypatch.setattr(random, "random", fake)  # saves our wrapper, to put it back
    assert random.random is fake  # someone else's patch: never overwritten
    monkeypatch.undo()
    assert random.random is wrapper  # ours, back with no trace active: it passes calls through
    random.seed(4)
    drawn = random.random()
    random.seed(4)
    assert drawn == original()
    with rng_trace(print=False):  # the next hub call takes it off
        pass
    assert random.random is original
    assert HUB.hooked() == {}


def test_every_wrapper_pickles_as_the_function_it_stands_for():
    with rng_trace(print=False):
        pairs = _wrapped_pairs()
        assert len(pairs) > 50
        dumped = []
        for wrapper, original in pairs:
            try:
                expected = pickle.dumps(original)
            except (pickle.PicklingError, TypeError, AttributeError, NotImplementedError):
                # unpicklable untraced too (NumPy's entropy source is secrets' SystemRandom().getrandbits,
                # whose instance refuses to give a state)
                continue
            dumped.append((pickle.dumps(wrapper), expected))
    # Unpickled once the trace is over, as a spawned worker would: the original each time.
    for got, expected in dumped:
        a, b = pickle.loads(got), pickle.loads(expected)
        assert "rngtrace" not in type(a).__module__
        assert a is b or (type(a) is type(b) and a.__qualname__ == b.__qualname__), (a, b)


def _wrapped_pairs() -> list:
    """(wrapper, original) for every callable rngtrace patches, read while tracing or not."""
    with rng_trace(print=False):
        wrappers = HUB.wrappers()
    return [(w, w.__wrapped__) for w in wrappers if hasattr(w, "__wrapped__")]


# numpy 2 imports numpy.random on first use: a thread importing it holds its module lock while the
# post-import hooks run, and another thread may hold the hub's lock while it waits for that module.
LAZY_IMPORT_RACE = textwrap.dedent(
    """
    import sys, threading, time
    import numpy as np
    import wrapt
    if "numpy.random" in sys.modules:
        print("numpy.random imported eagerly: nothing to race"); sys.exit(0)
    from rngtrace import rng_trace

    importing = threading.Event()
    def slow_hook(module):  # registered first: runs before rngtrace's, with the import lock held
        importing.set()
        time.sleep(0.5)
    wrapt.register_post_import_hook(slow_hook, "numpy.random")

    with rng_trace(print=False) as outer:  # watches numpy.random: not imported yet
        drawer = threading.Thread(target=lambda: np.random.rand())  # imports numpy.random
        drawer.start()
        importing.wait()
        with rng_trace(print=False) as inner:  # installs numpy while the import is under way
            np.random.rand()
        drawer.join()
    def drawers(trace):
        draws = [e for e in trace.events if e.api == "numpy.random.rand"]
        return sorted({"main" if e.thread == "MainThread" else "other" for e in draws})
    # Both threads drew inside outer; inner holds at least its own thread's draw (the other thread's
    # draw, made as the import ends, may fall before or after inner's end).
    print("outer", *drawers(outer), "inner-has-its-own:", "main" in drawers(inner))
    """
)


def _lazy_import_program(tmp_path: Any, text: str) -> list[str] | None:
    """Run a program importing numpy.random in a trace: the words it printed, None where numpy imports it eagerly."""
    script = tmp_path / "program.py"
    script.write_text(text)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    return None if "nothing to race" in done.stdout else done.stdout.split()


def test_a_trace_starting_while_another_thread_imports_a_watched_library_does_not_deadlock(tmp_path):
    printed = _lazy_import_program(tmp_path, LAZY_IMPORT_RACE)
    if printed is not None:
        # (Before the streams' install waited for an import under way, the other thread's draw went unrecorded.)
        assert printed == ["outer", "main", "other", "inner-has-its-own:", "True"], printed


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the check takes the stream's lock through the C accelerator")
def test_blocks_ending_while_another_thread_draws_report_no_unattributed_move(fast_switching):
    tracer = rng_trace(print=False)
    unattributed, errors = [], []

    def blocks():
        try:
            for _ in range(1500):
                with tracer as trace:
                    np.random.rand()
                    random.random()
                unattributed.extend(e for e in trace.events if e.kind == "unattributed")
        except BaseException as error:  # noqa: BLE001 -- any error in a thread is the failure
            errors.append(error)

    threads = [threading.Thread(target=blocks, daemon=True) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)  # a lock left held must fail this test, not hang the suite
    assert not any(t.is_alive() for t in threads), "a traced block hung"
    # Every draw went through a patched call: a move "nobody recorded" would blame nothing true.
    assert errors == [] and unattributed == []


# numpy.random imported by a thread while another holds the hub's lock for a draw of its own (the
# catch-all learning a module's references, the sweeper starting after PIN_AFTER walks): the import
# hook queues the stream. It was installed only
# when the trace ended, since only starting and stopping took the queue, and the importing thread's
# draws went unrecorded, silently. Now whoever lets go of the lock installs it, and the draws made
# before that are reported by the end-of-block check, measured from the state at the import.
IMPORT_WHILE_LOCKED = textwrap.dedent(
    """
    import sys, threading
    import numpy as np
    if "numpy.random" in sys.modules:
        print("numpy.random imported eagerly: nothing to race"); sys.exit(0)
    from rngtrace import rng_trace
    from rngtrace._hub import HUB

    with rng_trace(print=False) as trace:  # watches numpy.random: not imported yet
        learn = HUB.patches.learn
        def import_meanwhile(*args):  # runs with the hub's lock held, as a catch-all learning a module
            importer = threading.Thread(target=lambda: np.random.rand())  # imports numpy.random, draws
            importer.start()
            importer.join()
            return learn(*args)
        HUB.patches.learn = import_meanwhile
        HUB.learn("random", sys._getframe())
        del HUB.patches.learn
        installed = "numpy" in HUB.rec.sources
        np.random.rand()
    print("installed", installed, "events", *[f"{e.kind}:{e.api}" for e in trace.events])
    """
)


def test_a_library_imported_while_a_draw_holds_the_hub_lock_is_traced_from_then_on(tmp_path):
    printed = _lazy_import_program(tmp_path, IMPORT_WHILE_LOCKED)
    if printed is not None:
        assert printed == ["installed", "True", "events", "unattributed:numpy", "state", "draw:numpy.random.rand"], (
            printed
        )
