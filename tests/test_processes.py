"""Child processes: forked children keep recording, their events reach the parent's trace with
their pids, and processes that drew from one state are named (the ``duplicate`` finding)."""

from __future__ import annotations

import concurrent.futures
import glob
import multiprocessing
import os
import random
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from typing import Any

import numpy as np
import numpy.random  # noqa: F401  (imported before any fork, as a program that used it is)
import pytest
from fork_pools import two_workers_draw

from rngtrace import _hotpath, rng_trace
from rngtrace._hub import HUB

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

FORK = multiprocessing.get_context("fork") if hasattr(os, "fork") else None


def _spool_folders() -> list[str]:
    """This process's spool folders (other test runs may be making theirs meanwhile)."""
    return glob.glob(os.path.join(tempfile.gettempdir(), f"rngtrace-spool-{os.getpid()}-*"))


@pytest.fixture(autouse=True)
def no_spool_left_behind():
    before = set(_spool_folders())
    yield
    assert set(_spool_folders()) <= before, "a spool folder outlived its trace"
    assert "RNGTRACE_SPOOL" not in os.environ


def _draw(_: int) -> float:
    return float(np.random.rand())


def _seed_zero() -> None:
    np.random.seed(0)


def _seed_from_pid() -> None:
    np.random.seed(os.getpid())


def test_fork_pool_workers_that_draw_from_the_inherited_state_are_a_duplicate_finding():
    values, trace = two_workers_draw()
    assert values[0] == values[1]  # the bug itself: two workers, one number
    pids = {e.pid for e in trace.events}
    assert len(pids) == 2 and os.getpid() not in pids
    assert [p.role for p in trace.processes[1:]] == ["pool worker", "pool worker"]
    (finding,) = trace.findings
    assert finding.kind == "duplicate" and finding.stream == "numpy"
    assert set(finding.pids) == pids
    assert "fork_pools.py:" in finding.message and "default_rng" in finding.fix  # the line that drew


def test_workers_seeded_with_one_constant_are_a_duplicate_and_workers_seeded_apart_are_not():
    _, same = two_workers_draw(_seed_zero)
    _, apart = two_workers_draw(_seed_from_pid)
    assert [f.kind for f in same.findings] == ["duplicate"]
    assert apart.findings == []
    assert sum(e.kind == "seed" for e in apart.events) == 2


def test_a_parent_drawing_what_its_forked_child_drew_is_a_duplicate():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            np.random.rand(3)
            os._exit(0)
        np.random.rand(3)
        os.waitpid(pid, 0)
    (finding,) = trace.findings
    assert set(finding.pids) == {os.getpid(), pid}
    assert "the traced process" in finding.message


def test_a_child_reseeded_by_cpython_at_fork_is_no_duplicate_of_its_parent_but_unseeded():
    # CPython reseeds `random` in every forked child from OS entropy: parent and child draw apart, and
    # the child's draws differ every run (the parent's start the block did not see).
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            random.random()
            os._exit(0)
        random.random()
        os.waitpid(pid, 0)
    assert [e.kind for e in trace.events] == ["draw", "draw"]
    (finding,) = trace.findings
    assert (finding.kind, finding.pids) == ("unseeded", (pid,))


def test_a_child_ending_through_os_exit_loses_nothing_and_its_exit_code_is_kept():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            for _ in range(50):
                np.random.rand()
            os._exit(3)  # skips atexit, as multiprocessing and DataLoader workers do
        os.waitpid(pid, 0)
    assert sum(e.pid == pid for e in trace.events) == 50
    assert trace.processes[1].exit == "exit code 3"


def test_a_sigkilled_child_keeps_what_it_spooled_and_the_log_says_it_ended_abruptly():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            np.random.rand(4)
            time.sleep(60)
            os._exit(0)
        time.sleep(0.3)  # several writes' time
        os.kill(pid, signal.SIGKILL)
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.01)
    os.waitpid(pid, 0)
    assert [(e.pid, e.count) for e in trace.events] == [(pid, 4)]
    assert trace.processes[1].exit == "killed by signal 9"
    assert any(f"process {pid} ended abruptly" in note for note in trace.notes)


def test_a_child_that_keeps_drawing_is_written_while_it_draws_so_a_kill_loses_only_its_last_writes_worth():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            end = time.monotonic() + 30
            while time.monotonic() < end:  # never pauses for a look: written every BUSY_FLUSH_INTERVAL
                np.random.rand()
                time.sleep(0.001)  # well under max_events in the half second
            os._exit(0)
        time.sleep(0.5)
        os.kill(pid, signal.SIGKILL)
        while os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
            time.sleep(0.01)
    os.waitpid(pid, 0)
    drawn = [e for e in trace.events if e.pid == pid]
    assert len(drawn) > 100, f"{len(drawn)} events of a child that drew for half a second"
    assert trace.processes[1].exit == "killed by signal 9"
    assert any(f"process {pid} ended abruptly" in note and "last 60 ms" in note for note in trace.notes)


# Pool.__exit__ terminates the workers (SIGTERM) right after the last result: a worker's events are
# written before each result it sends, so none is lost, whichever way the workers started. Before,
# with fork 7 of 8 draws arrived in most runs, and with spawn or forkserver often none of a worker's.
@pytest.mark.parametrize("method,runs", [("fork", 6), ("spawn", 6), ("forkserver", 6)])
def test_a_pool_terminated_by_its_with_block_loses_no_draw_of_its_workers(method, runs):
    context = multiprocessing.get_context(method)
    for _ in range(runs):
        with rng_trace(print=False) as trace:
            with context.Pool(2) as pool:
                pool.map(_draw, range(8), chunksize=1)
        got = sum(e.api == "numpy.random.rand" for e in trace.events)
        assert got == 8, (got, [p.exit for p in trace.processes], trace.notes)
        if _hotpath.SPEEDUPS is not None:
            # Without the accelerator a SIGTERM landing between a worker's last result and its next
            # wait kills it with no last word (README's limits): nothing is lost, but its end is
            # noted as abrupt. With it, the worker writes its end first.
            assert not [note for note in trace.notes if "ended abruptly" in note]


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_process_pool_executor_workers_lose_no_draw_at_its_shutdown(method):
    for _ in range(2):
        with rng_trace(print=False) as trace:
            with concurrent.futures.ProcessPoolExecutor(2, mp_context=multiprocessing.get_context(method)) as pool:
                list(pool.map(_draw, range(6)))
        assert sum(e.api == "numpy.random.rand" and e.pid != os.getpid() for e in trace.events) == 6
        assert not [note for note in trace.notes if "ended abruptly" in note]


def _draw_and_wait(ready: Any) -> None:
    np.random.rand()
    ready.set()
    time.sleep(30)  # busy with its task when it is terminated


@pytest.mark.skipif(
    _hotpath.SPEEDUPS is None, reason="without the C accelerator a SIGTERM kills before the last write (README)"
)
def test_a_child_terminated_mid_task_writes_what_it_drew_and_still_dies_of_sigterm():
    for _ in range(3):
        ready = FORK.Event()
        with rng_trace(print=False) as trace:
            child = FORK.Process(target=_draw_and_wait, args=(ready,))
            child.start()
            assert ready.wait(10)
            child.terminate()
            child.join(10)
        assert child.exitcode == -signal.SIGTERM  # as untraced: the status is the signal's
        assert [e.api for e in trace.events if e.pid == child.pid] == ["numpy.random.rand"]
        assert trace.processes[1].exit == f"killed by signal {int(signal.SIGTERM)}"
        assert not [note for note in trace.notes if "ended abruptly" in note]


def test_a_grandchild_is_merged_into_the_outermost_trace():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            grandchild = os.fork()
            if grandchild == 0:
                np.random.rand(7)
                os._exit(0)
            os.waitpid(grandchild, 0)
            os._exit(0)
        os.waitpid(pid, 0)
    (event,) = trace.events
    assert event.count == 7 and event.pid not in (os.getpid(), pid)
    grand = [p for p in trace.processes if p.pid == event.pid]
    assert grand and grand[0].ppid == pid


def test_a_child_that_outlives_the_block_stops_recording_and_leaves_no_hook_or_file():
    read, write = os.pipe()
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            os.close(read)
            np.random.rand()
            time.sleep(0.5)  # the parent's block ends meanwhile
            left = HUB.hooked()
            os.write(write, b"clean" if not left else repr(left).encode()[:200])
            os._exit(0)
        time.sleep(0.1)
    os.close(write)
    said = os.read(read, 300)
    os.waitpid(pid, 0)
    os.close(read)
    assert said == b"clean"
    assert [e.pid for e in trace.events] == [pid]


def test_the_parent_draws_the_same_values_traced_and_untraced_with_a_pool():
    def run() -> list[float]:
        np.random.seed(7)
        random.seed(7)
        with FORK.Pool(2) as pool:
            pool.map(_draw, range(4))
        return [float(np.random.rand()), random.random()]

    untraced = run()
    with rng_trace(print=False):
        traced = run()
    assert traced == untraced


def test_a_child_forked_with_no_trace_active_records_nothing_and_writes_nothing():
    pid = os.fork()
    if pid == 0:
        np.random.rand()
        os._exit(0 if HUB.hooked() == {} and HUB._child is None else 3)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_child_forked_an_instant_before_the_block_ends_is_waited_for():
    for _ in range(5):
        with rng_trace(print=False) as trace:
            pid = os.fork()
            if pid == 0:
                for _ in range(3):
                    np.random.rand()
                time.sleep(0.3)  # still running when the parent's block ends
                os._exit(0)
        os.waitpid(pid, 0)
        assert sum(e.pid == pid for e in trace.events) == 3


def _torch():
    return pytest.importorskip("torch")


class _NoisyItems:
    """A dataset whose items draw from NumPy's global stream, as an augmentation does."""

    def __init__(self, size: int = 8) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, i: int) -> float:
        return i + float(np.random.rand())


def _seed_numpy_with_zero(_worker_id: int) -> None:
    np.random.seed(0)


def _loader(**kw):
    data = _torch().utils.data
    return data.DataLoader(_NoisyItems(), batch_size=2, num_workers=2, multiprocessing_context="fork", **kw)


def test_dataloader_workers_are_traced_and_their_default_seeding_is_no_finding():
    with rng_trace(print=False) as trace:
        values = [v for batch in _loader() for v in batch.tolist()]
    workers = [p for p in trace.processes if (p.role or "").startswith("DataLoader worker")]
    assert sorted(p.role for p in workers) == ["DataLoader worker 0", "DataLoader worker 1"]
    drew = [e for e in trace.events if e.api == "numpy.random.rand"]
    assert len(drew) == 8 and {e.pid for e in drew} == {p.pid for p in workers}
    # torch seeds random, torch and NumPy in each worker from its base seed and id: no repeats.
    assert sum(e.kind == "seed" and e.stream == "numpy" for e in trace.events) == 2
    assert trace.findings == []
    assert len({round(v % 1, 12) for v in values}) == 8


def test_a_worker_init_fn_seeding_a_constant_is_a_duplicate_naming_the_dataset_line():
    with rng_trace(print=False) as trace:
        values = [round(v % 1, 9) for batch in _loader(worker_init_fn=_seed_numpy_with_zero) for v in batch.tolist()]
    assert values[0:2] == values[2:4]  # the bug: worker 1's "random" numbers are worker 0's
    (finding,) = trace.findings
    assert finding.kind == "duplicate" and finding.stream == "numpy"
    assert "DataLoader worker 0" in finding.message and "DataLoader worker 1" in finding.message
    assert "__getitem__" in finding.message


def test_dataloader_workers_shut_down_mid_epoch_lose_no_draw_of_a_batch_the_loop_received():
    data = _torch().utils.data
    for _ in range(3):
        loader = data.DataLoader(_NoisyItems(32), batch_size=2, num_workers=2, multiprocessing_context="fork")
        with rng_trace(print=False) as trace:
            received = 0
            for i, batch in enumerate(loader):
                received += len(batch)
                if i == 3:
                    break  # the iterator shuts its workers down, and terminates those that linger
            del batch
            loader = None  # noqa: F841  (its iterator goes with it: the workers are shut down inside the block)
        drew = sum(e.api == "numpy.random.rand" for e in trace.events)
        assert drew >= received  # the workers drew ahead (prefetch): never fewer than the loop received
        assert not [note for note in trace.notes if "ended abruptly" in note]


def test_persistent_workers_are_traced_over_two_epochs_and_stop_recording_after_the_block():
    loader = _loader(persistent_workers=True)
    with rng_trace(print=False) as trace:
        for _epoch in range(2):
            list(loader)
    drew = [e for e in trace.events if e.api == "numpy.random.rand"]
    assert len(drew) == 16
    assert {p.exit for p in trace.processes[1:]} == {None}  # still running when the block ended
    del loader  # the workers shut down untraced: nothing spooled, no folder left (the fixture checks)


TERMINATED_POOLS = """\
import multiprocessing as mp
import numpy as np
import numpy.random
from rngtrace import rng_trace

def draw(i):
    return float(np.random.rand())

if __name__ == "__main__":
    for _ in range(30):
        with rng_trace(print=False):
            with mp.get_context("fork").Pool(3) as pool:
                pool.map(draw, range(6))
    print("done")
"""


def test_idle_pool_workers_die_of_sigterm_with_their_spool_thread_running(tmp_path):
    # Pool.terminate() SIGTERMs workers waiting for a task on a lock. With a Python SIGTERM handler
    # of rngtrace's, under load, some such worker never ran it and never died: 1 run in 3 hung.
    import subprocess
    import sys

    script = tmp_path / "pools.py"
    script.write_text(TERMINATED_POOLS)
    runs = [
        subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, start_new_session=True)
        for _ in range(3)
    ]
    try:
        outs = [run.communicate(timeout=120)[0] for run in runs]
    finally:
        for run in runs:  # a hung run's workers too: each run is a process group of its own
            try:
                os.killpg(run.pid, signal.SIGKILL)
            except OSError:
                pass
            run.wait()
    assert outs == ["done\n"] * 3 and [run.returncode for run in runs] == [0, 0, 0]


@pytest.mark.parametrize("method", ["spawn", "forkserver"])
def test_spawned_and_forkserver_pool_workers_are_traced_and_a_constant_seed_is_a_duplicate(method):
    values, trace = two_workers_draw(_seed_zero, multiprocessing.get_context(method))
    assert values[0] == values[1]
    children = trace.processes[1:]
    assert {p.start for p in children} == {method} and len(children) == 2
    assert sum(e.api == "numpy.random.rand" for e in trace.events) == 2
    (finding,) = trace.findings
    assert finding.kind == "duplicate" and set(finding.pids) == {p.pid for p in children}


def test_a_spawned_process_keeps_its_own_target_in_the_parent():
    process = multiprocessing.get_context("spawn").Process(target=_draw, args=(0,))
    with rng_trace(print=False) as trace:
        process.start()
        process.join(60)
    assert process._target is _draw and process.exitcode == 0
    assert [e.api for e in trace.events] == ["numpy.random.rand"]
    assert trace.processes[1].start == "spawn"


def test_multiprocessing_imported_inside_a_block_still_has_its_spawned_children_traced(tmp_path):
    script = tmp_path / "late.py"
    script.write_text(
        textwrap.dedent("""\
        import sys
        from rngtrace import _postimport, rng_trace

        def work():
            import random
            random.seed(7)
            random.random()

        if __name__ == "__main__":
            assert "multiprocessing.process" not in sys.modules
            with rng_trace(print=False):
                pass
            assert "multiprocessing.process" not in _postimport.describe()  # no hook left
            with rng_trace(print=False) as trace:
                import multiprocessing
                p = multiprocessing.get_context("spawn").Process(target=work)
                p.start()
                p.join(60)
            assert "multiprocessing.process" not in _postimport.describe()
            assert getattr(multiprocessing.process.BaseProcess.start, "__wrapped__", None) is None
            print([(p.start, [e.api for e in trace.events if e.pid == p.pid]) for p in trace.processes[1:]])
    """)
    )
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[('spawn', ['random.seed', 'random.random'])]"


def test_a_spool_file_cut_short_mid_record_keeps_every_record_before_the_cut(tmp_path):
    from rngtrace._childlogs import ChildLog
    from rngtrace._spool import record as _record

    event = ("numpy", "draw", "numpy.random.rand", 1, 5, 1, None)
    records = [
        _record(("process", 4242, 1, "fork", 0.0, (7,))),
        _record(("flush", {5: (("w.py", 3, "work"),)}, {1: "MainThread"}, [event], (), None, None)),
        _record(("flush", {}, {}, [event], (), "pool worker", None)),
    ]
    whole = tmp_path / "whole.spool"
    whole.write_bytes(b"".join(records))
    cut = tmp_path / "cut.spool"
    last = _record(("flush", {}, {}, [event] * 3, (), None, ([], 0, "normal")))
    cut.write_bytes(b"".join(records) + last[: len(last) // 2])  # killed in the middle of a write
    assert len(ChildLog.read(str(whole)).events) == 2
    log = ChildLog.read(str(cut))
    assert log.pid == 4242 and log.tags == {7} and len(log.events) == 2 and log.stacks[5] == (("w.py", 3, "work"),)
    assert log.role == "pool worker" and log.exit != "normal"


def test_a_forked_child_that_draws_often_uses_the_stack_cache_as_its_parent_would():
    from rngtrace._hotpath import FrameMode

    def child() -> int:
        for _ in range(200):
            np.random.rand()
        return 0 if HUB.rec.mode is not FrameMode.WALK else 3  # WALK: every stack walked in full, for good

    trace, pid, code = _forked_under_a_trace(child)
    assert code == 0
    assert sum(e.pid == pid for e in trace.events) == 200


def test_children_forked_with_a_reseed_between_them_are_no_duplicate():
    # The second fork may reuse the first fork's digests only where no stream moved between them.
    trace, _pids = _two_children_drawing(reseed=True)  # the next child starts from another state
    assert trace.findings == []
    trace, pids = _two_children_drawing(reseed=False)
    (finding,) = trace.findings
    assert set(finding.pids) == set(pids)


def _two_children_drawing(reseed: bool) -> tuple[Any, list[int]]:
    """Two children forked in one traced block, each drawing once; NumPy reseeded before each fork if asked."""
    with rng_trace(print=False) as trace:
        pids = []
        for i in range(2):
            if reseed:
                np.random.seed(i)
            pid = os.fork()
            if pid == 0:
                np.random.rand()
                os._exit(0)
            pids.append(pid)
        for pid in pids:
            os.waitpid(pid, 0)
    return trace, pids


_BIT_GENERATOR = np.random.mtrand._rand._bit_generator  # moves the singleton's state with no call anything sees


def test_a_move_no_call_made_in_a_child_leaving_through_os_exit_is_in_the_log_with_its_pid():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            np.random.rand()
            _BIT_GENERATOR.random_raw()
            os._exit(0)
        os.waitpid(pid, 0)
    moved = [e for e in trace.events if e.kind == "unattributed"]
    assert [(e.pid, e.stream) for e in moved] == [(pid, "numpy")]
    assert [e.pid for e in trace.events if e.kind == "draw"] == [pid]


def test_a_move_the_parent_made_with_no_call_before_a_fork_is_the_parents_event_and_not_its_childs_too():
    with rng_trace(print=False) as trace:
        np.random.rand()
        _BIT_GENERATOR.random_raw()  # the child inherits this state: it starts from it, moving nothing
        pid = os.fork()
        if pid == 0:
            np.random.rand()
            os._exit(0)
        os.waitpid(pid, 0)
        np.random.rand()
    me = os.getpid()
    assert [(e.pid, e.kind) for e in trace.events] == [(me, "draw"), (me, "unattributed"), (me, "draw"), (pid, "draw")]


class _Held:
    """A local a frame holds; its weak reference says when the frame let it go."""


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sys.monitoring reports frame exits: nothing is pinned")
def test_a_forked_child_lets_go_of_finished_frames_without_a_sweeper_thread_of_its_own():
    import gc
    import threading
    import weakref

    from rngtrace._hotpath import FrameMode

    def draw() -> None:
        np.random.rand()

    def draw_holding(refs: list) -> None:
        held = _Held()  # a local of a frame the stack cache pins: the drawing call's caller
        refs.append(weakref.ref(held))
        draw()

    def child() -> int:
        refs: list = []
        for _ in range(200):
            draw_holding(refs)
        gc.disable()  # only the pins let go: no collection frees a frame
        time.sleep(0.1)  # several of the writer's passes
        alive = sum(ref() is not None for ref in refs)
        names = [t.name for t in threading.enumerate()]
        if HUB.rec.mode is not FrameMode.PINNED or "rngtrace-sweeper" in names:
            return 3
        return 0 if alive <= 1 else 4

    trace, pid, code = _forked_under_a_trace(child)
    assert code == 0
    assert sum(e.pid == pid for e in trace.events) == 200


def test_an_event_detail_marshal_cannot_write_travels_as_its_text():
    from rngtrace._processes import _plain
    from rngtrace._spool import record as _record
    from rngtrace._spool import records as _records

    class Odd:
        def __str__(self) -> str:
            return "odd detail"

    raw = ("numpy", "draw", "numpy.random.rand", np.int64(2), 3, 1, Odd())
    with pytest.raises(ValueError):
        _record(("flush", {}, {}, [raw], (), None, None))
    (record,) = _records(_record(("flush", {}, {}, [_plain(raw)], (), None, None)))
    assert record[3] == [("numpy", "draw", "numpy.random.rand", 2, 3, 1, "odd detail")]


def _forked_under_a_trace(child: Any) -> tuple[Any, int, int]:
    """Fork inside a traced block; the child runs ``child()`` and leaves with its code through os._exit."""
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = child()
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
    return trace, pid, os.waitstatus_to_exitcode(status)


def test_a_torch_state_is_digested_from_its_bytes_in_place_exactly_as_numpys_bridge_reads_them():
    torch = pytest.importorskip("torch")
    from rngtrace.sources import load_source

    _tensor_bytes = load_source("torch").state_bytes
    generator = torch.Generator().manual_seed(7)
    states = []
    for _ in range(4):  # fresh, after draws, with a cached normal (torch.randn's odd count)
        states.append(generator.get_state())
        torch.randn(3, generator=generator)
    assert len({bytes(_tensor_bytes(s)) for s in states}) == 4
    for state in states:
        assert _tensor_bytes(state) == state.numpy().tobytes()
    matrix = torch.arange(12.0).reshape(3, 4)
    assert _tensor_bytes(matrix.t()) == matrix.t().numpy().tobytes()  # not contiguous: the bridge


def test_a_spool_folder_removed_by_hand_during_the_block_never_fails_its_end():
    import shutil

    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            np.random.rand()
            os._exit(0)
        os.waitpid(pid, 0)
        shutil.rmtree(HUB.spool.path)  # a temp cleaner, or a user tidying /tmp
        np.random.rand()
    assert [e.pid for e in trace.events] == [os.getpid()]
    assert HUB.spool.path is None


def test_a_child_reaped_before_the_block_ends_is_said_to_have_ended_abruptly_once():
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            np.random.rand()
            time.sleep(0.2)  # written at a look
            os.kill(os.getpid(), signal.SIGKILL)
        os.waitpid(pid, 0)  # reaped here: the block's end cannot read how it ended
    notes = [note for note in trace.notes if f"process {pid} " in note]
    assert notes == [
        f"process {pid} ended abruptly after spooling 1 event: what it drew in its last 60 ms is not in this log"
    ]


def test_workers_started_before_the_trace_are_named_as_untraced_in_its_notes_and_its_first_line(capsys):
    loader = _loader(persistent_workers=True)
    list(loader)  # the workers start here, before any trace
    with FORK.Pool(2) as pool:
        pool.map(_draw, range(4))
        with rng_trace() as trace:
            list(loader)
            pool.map(_draw, range(4))
        workers = sorted(w.pid for w in loader._iterator._workers)
        pool_workers = sorted(p.pid for p in pool._pool)
    assert len(trace) == 0  # they drew, where no trace could see
    assert trace.untraced == sorted(workers + pool_workers)
    assert trace.notes == [
        f"2 DataLoader workers (pids {workers[0]}, {workers[1]}) started before this trace are not traced: "
        "start the trace before the loader's first iteration, or use `rngtrace run`",
        f"2 multiprocessing pool workers (pids {pool_workers[0]}, {pool_workers[1]}) started before this trace are "
        "not traced: make the Pool inside the trace, or use `rngtrace run`",
    ]
    first, *_ = capsys.readouterr().err.splitlines()  # an empty log is printed: it may miss draws
    assert first == (
        "rngtrace: no draws or reseeds in the traced process; 4 child processes started before "
        "the trace may draw unseen (see the notes)"
    )
    del loader


def test_untraced_children_are_kept_in_a_saved_log(tmp_path):
    with FORK.Pool(1) as pool:
        pool.map(_draw, range(2))
        with rng_trace(print=False) as trace:
            pass
    path = tmp_path / "log.json"
    trace.save(path)
    loaded = type(trace).load(path)
    assert loaded.untraced == trace.untraced and len(trace.untraced) == 1
    assert loaded.notes == trace.notes


def test_workers_started_inside_the_trace_bring_no_untraced_note():
    with rng_trace(print=False) as trace:
        with FORK.Pool(2) as pool:
            pool.map(_draw, range(4))
    assert trace.untraced == [] and not [n for n in trace.notes if "started before this trace" in n]
