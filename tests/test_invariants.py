"""The product's promises: values unchanged, nothing left behind, never silent."""

from __future__ import annotations

import cProfile
import inspect
import io
import multiprocessing
import os
import random
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
from numpy.random import randn as prebound_randn
from sklearn.model_selection import train_test_split

import rngtrace
from rngtrace import GlobalRNGError, RNGDrawWarning, _hotpath, rng_trace
from rngtrace._hub import HUB

prebound_random = random.random


def hooked_builtins() -> list:
    """The builtins recording in place now (the C accelerator's; none without it)."""
    return _hotpath.SPEEDUPS.hooked_builtins() if _hotpath.SPEEDUPS is not None else []


def program() -> list:
    """Draw from every stream, every way: module functions, singleton, pre-bound, cached gaussian."""
    out = [random.random(), random.randint(0, 10**9), prebound_random()]
    out += list(np.random.rand(3)) + [np.random.randn(), np.random.randn()]  # second one is cached
    out += list(prebound_randn(3)) + list(np.random.mtrand._rand.standard_normal(2))
    out += list(train_test_split(np.arange(10))[0])
    out += list(map(prebound_random.__call__, [])) + [np.random.choice(100)]
    return out


def run(traced: bool) -> tuple[list, list]:
    random.seed(11)
    np.random.seed(11)
    if traced:
        with rng_trace(print=False) as trace:
            inside = program()
        assert trace.events
    else:
        inside = program()
    after = [random.random(), np.random.randn(), np.random.randn()]
    return inside, after


def test_tracing_never_changes_a_drawn_value_and_streams_continue_identically():
    assert run(traced=False) == run(traced=True)


def test_exit_restores_every_patched_attribute_when_the_block_raises():
    originals = (random.random, np.random.rand, vars(np.random.RandomState)["permutation"])
    with pytest.raises(ValueError):
        with rng_trace(print=False):
            # With the accelerator random.random records in place: the same object, hooked.
            assert random.random is not originals[0] or random.random in hooked_builtins()
            assert vars(np.random.RandomState)["permutation"] is not originals[2]
            raise ValueError("boom")
    assert (random.random, np.random.rand, vars(np.random.RandomState)["permutation"]) == originals
    assert HUB.hooked() == {}


def test_exit_restores_everything_on_keyboard_interrupt():
    profile_before = sys.getprofile()
    with pytest.raises(KeyboardInterrupt):
        with rng_trace(print=False):
            np.random.rand()
            raise KeyboardInterrupt
    assert HUB.hooked() == {}
    assert sys.getprofile() is profile_before


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 profile-hook chaining")
def test_an_installed_profile_hook_keeps_working_and_is_not_clobbered():
    seen = []

    def other_profiler(frame, event, arg):
        seen.append(event)

    sys.setprofile(other_profiler)
    try:
        with rng_trace(print=False) as trace:
            assert sys.getprofile() is other_profiler
            len("still profiled")
        assert sys.getprofile() is other_profiler
        seen.clear()
        len("after")
        assert "c_call" in seen
    finally:
        sys.setprofile(None)
    assert any("another profiler" in note for note in trace.notes)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
def test_another_monitoring_tool_keeps_receiving_events_during_and_after():
    mon = sys.monitoring
    tool = mon.PROFILER_ID
    calls = []
    mon.use_tool_id(tool, "other-profiler")
    try:
        mon.register_callback(tool, mon.events.PY_START, lambda code, offset: calls.append(code.co_name))
        mon.set_events(tool, mon.events.PY_START)

        def marker():
            return 1

        with rng_trace(print=False):
            marker()
            np.random.rand()
        assert "marker" in calls
        calls.clear()
        marker()
        assert calls == ["marker"]
        assert mon.get_tool(tool) == "other-profiler"
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.PY_START, None)
        mon.free_tool_id(tool)


def test_cprofile_and_a_tracer_work_during_and_after_a_trace():
    lines = []

    def tracer(frame, event, arg):
        if event == "line":
            lines.append(frame.f_lineno)
        return tracer

    profiler = cProfile.Profile()
    trace_before = sys.gettrace()
    sys.settrace(tracer)
    try:
        profiler.enable()
        with rng_trace(print=False) as trace:
            np.random.rand(2)
        profiler.disable()
    finally:
        sys.settrace(trace_before)
    out = io.StringIO()
    import pstats

    pstats.Stats(profiler, stream=out).print_stats()
    assert "rand" in out.getvalue()
    assert lines, "the line tracer stopped receiving events"
    assert [e.api for e in trace.draws] == ["numpy.random.rand"]


def test_nested_traces_each_see_their_own_block():
    with rng_trace(print=False) as outer:
        np.random.rand()
        with rng_trace(print=False) as inner:
            random.random()
        np.random.rand(2)
    assert [e.api for e in outer.events] == ["numpy.random.rand", "random.random", "numpy.random.rand"]
    assert [e.api for e in inner.events] == ["random.random"]


def test_a_nested_trace_of_one_stream_leaves_the_outer_trace_of_all_streams_intact():
    with rng_trace(print=False) as outer:
        with rng_trace(streams=["random"], print=False) as inner:
            np.random.rand()
            random.random()
        np.random.rand()
    assert [e.stream for e in inner.events] == ["random"]
    assert [e.stream for e in outer.events] == ["numpy", "random", "numpy"]


def test_a_decorated_function_called_inside_a_with_block_works():
    log = io.StringIO()

    def plain(n: int, *, scale: float = 1.0) -> float:
        """Draw n numbers."""
        return float(np.random.rand(n).sum() * scale)

    draws = rng_trace(file=log)(plain)
    with rng_trace(print=False) as outer:
        draws(3, scale=2.0)
    assert inspect.signature(draws) == inspect.signature(plain)
    assert draws.__doc__ == "Draw n numbers."
    assert [e.count for e in outer.draws] == [3]
    assert "numpy.random.rand" in log.getvalue()


def test_a_decorated_function_prints_only_after_calls_that_drew():
    log = io.StringIO()

    @rng_trace(file=log)
    def maybe(draw: bool) -> None:
        if draw:
            random.random()

    maybe(False)
    assert log.getvalue() == ""
    maybe(True)
    assert "random.random" in log.getvalue()


def test_bare_decorator_form_traces_each_call(capsys):
    @rng_trace
    def draw() -> float:
        return random.random()

    draw()
    assert "random.random" in capsys.readouterr().err


def test_draws_from_other_threads_are_recorded_with_their_thread_name():
    def worker():
        np.random.rand(2)
        random.random()

    with rng_trace(print=False) as trace:
        thread = threading.Thread(target=worker, name="augment-worker")
        thread.start()
        thread.join()
    assert [(e.api, e.thread) for e in trace.events] == [
        ("numpy.random.rand", "augment-worker"),
        ("random.random", "augment-worker"),
    ]


def test_a_draw_called_by_c_code_with_no_python_frame_succeeds_and_is_recorded_without_a_stack():
    import _thread
    import operator

    done = threading.Event()
    with rng_trace(print=False) as trace:
        # The new thread runs only C code until the draw returns: list(map(...)) calls it, then done.set.
        calls = map(operator.methodcaller("__call__"), [random.random, done.set])
        _thread.start_new_thread(list, (calls,))
        assert done.wait(10)
    assert [(e.api, e.stack) for e in trace.events] == [("random.random", ())]
    assert trace.events[0].thread != threading.current_thread().name


def test_many_threads_drawing_at_once_give_no_spurious_unattributed_events():
    def worker():
        for _ in range(200):
            np.random.rand()
            random.random()

    with rng_trace(print=False) as trace:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert {e.kind for e in trace.events} == {"draw"}
    assert len(trace.events) == 4 * 200 * 2


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_fork_child_records_into_a_trace_of_its_own_that_the_parent_merges_with_its_pid():
    with rng_trace(print=False) as trace:
        np.random.rand()
        pid = os.fork()
        if pid == 0:  # child: draw, then leave without running the parent's code
            try:
                np.random.rand(5)
                random.random()
                code = 0
            except BaseException:
                code = 4
            os._exit(code)
        _, status = os.waitpid(pid, 0)
        np.random.rand(2)
    assert os.waitstatus_to_exitcode(status) == 0
    mine = [e.count for e in trace.events if e.pid == os.getpid()]
    theirs = [(e.stream, e.count) for e in trace.events if e.pid == pid]
    assert mine == [1, 2]
    assert theirs == [("numpy", 5), ("random", 1)]
    assert [(p.pid, p.start, p.exit) for p in trace.processes[1:]] == [(pid, "fork", "normal")]


def _mp_child(queue):
    queue.put(float(np.random.rand()))


@pytest.mark.skipif(sys.platform == "win32", reason="fork start method")
def test_multiprocessing_fork_children_run_and_their_draws_reach_the_parent_trace():
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with rng_trace(print=False) as trace:
        procs = [ctx.Process(target=_mp_child, args=(queue,)) for _ in range(2)]
        for p in procs:
            p.start()
        values = [queue.get(timeout=30) for _ in procs]
        for p in procs:
            p.join(timeout=30)
    assert [p.exitcode for p in procs] == [0, 0]
    assert len(values) == 2
    assert sorted(e.pid for e in trace.events) == sorted(p.pid for p in procs)
    assert {e.api for e in trace.events} == {"numpy.random.rand"}
    # Both children drew from the state they inherited: the same number, and a finding says so.
    assert values[0] == values[1]
    assert [f.kind for f in trace.findings] == ["duplicate"]


def test_on_draw_raise_stops_the_draw_before_the_stream_is_consumed():
    before = np.random.get_state()[1].copy(), np.random.get_state()[2]
    with pytest.raises(GlobalRNGError, match=r"numpy\.random\.rand .*default_rng"):
        with rng_trace(on_draw="raise", print=False):
            np.random.rand()
    after = np.random.get_state()[1], np.random.get_state()[2]
    assert (before[0] == after[0]).all() and before[1] == after[1]


def test_on_draw_warn_points_the_warning_at_the_draw_site():
    with pytest.warns(RNGDrawWarning, match="random.random") as caught:
        with rng_trace(on_draw="warn", print=False):
            random.random()
    assert caught[0].filename == __file__


def test_max_events_keeps_the_first_events_and_counts_the_rest_per_site():
    with rng_trace(max_events=5, print=False) as trace:
        for _ in range(12):
            random.random()
    assert len(trace.events) == 5 and trace.dropped == 7
    (stat,) = trace.statistics()
    assert (stat.api, stat.calls, stat.values) == ("random.random", 12, 12)


def test_bad_arguments_raise_one_clear_error():
    with pytest.raises(ValueError, match=r"unknown stream 'nump'; choose from random, numpy, torch"):
        rng_trace(streams=["nump"])
    with pytest.raises(ValueError, match=r"unknown on_draw 'error'; choose from log, warn, raise"):
        rng_trace(on_draw="error")
    with pytest.raises(ValueError, match="depth must be a positive int"):
        rng_trace(depth=0)


def test_import_rngtrace_imports_neither_numpy_nor_torch_and_works_without_them():
    code = textwrap.dedent(
        """
        import sys
        sys.modules["numpy"] = None  # make numpy and torch unimportable
        sys.modules["torch"] = None
        import random, rngtrace
        assert "numpy" not in [m for m in sys.modules if sys.modules[m] is not None]
        with rngtrace.rng_trace(print=False) as t:
            random.random()
        with rngtrace.rng_isolate():
            random.random()
        assert [e.api for e in t.events] == ["random.random"], t.events
        print("ok")
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


def test_a_library_imported_inside_the_block_is_traced_from_its_import_on():
    code = textwrap.dedent(
        """
        import sys, rngtrace
        assert "numpy" not in sys.modules
        with rngtrace.rng_trace(print=False) as t:
            import numpy as np
            np.random.seed(5)
            np.random.rand(2)
        from rngtrace._hub import HUB
        assert HUB.hooked() == {}, HUB.hooked()
        print([(e.kind, e.api) for e in t.events])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[('seed', 'numpy.random.seed'), ('draw', 'numpy.random.rand')]"


def test_public_names_are_exported():
    assert set(rngtrace.__all__) >= {"rng_trace", "rng_isolate", "Trace", "Event", "Frame", "GlobalRNGError"}
