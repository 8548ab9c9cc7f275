"""What a process forked under a trace does at its start, and its parent at the fork.

A DataLoader forks its workers at every epoch, and each worker's start is on the way to
its first batch: the parent reads no stream state it read already, and the child's first
draw is recorded by the accelerator, as its later ones are.
"""

from __future__ import annotations

import os
import random
import sys

import numpy as np
import pytest

from rngtrace import _digests, _hotpath, _processes, _stack, rng_trace
from rngtrace._hub import HUB

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")


def _in_child(check) -> str:
    """Run ``check()`` in a forked child; what it returns (or its error) comes back as text."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        os.close(read)
        try:
            said = str(check())
        except BaseException as e:  # noqa: BLE001
            said = f"{type(e).__name__}: {e}"
        os.write(write, said.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as got:
        said = got.read().decode()
    os.waitpid(pid, 0)
    return said


def test_a_parent_reuses_its_own_digest_of_a_stream_its_children_reseed_and_each_child_reads_it_again(monkeypatch):
    """CPython reseeds `random` in each forked child: a child's copy of its parent's digest is stale."""
    read = []
    whole = _digests.state_digests

    def counted(source):
        read.append(source)
        return whole(source)

    monkeypatch.setattr(_digests, "state_digests", counted)
    with rng_trace(print=False):
        random.random()
        np.random.rand()
        sources = HUB.rec.sources
        digests = _digests.ForkDigests()
        first = dict(digests.read(HUB.rec))
        assert {sources["random"], sources["numpy"]} <= set(read)  # and torch's, where an earlier test imported it
        read.clear()
        assert dict(digests.read(HUB.rec)) == first
        assert read == []  # the parent forking its next worker: nothing moved, nothing read

        def child() -> str:
            read.clear()  # the hub's own read at the fork
            mine = dict(digests.read(HUB.rec))
            reseeded, kept = mine["random"] != first["random"], mine["numpy"] == first["numpy"]
            return repr((read == [sources["random"]], reseeded, kept))

        assert _in_child(child) == repr((True, True, True))
        random.random()  # the parent's own move is seen as one
        read.clear()
        assert dict(digests.read(HUB.rec))["random"] != first["random"]
        assert read == [sources["random"]]


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the pure-Python mode records every draw in Python")
def test_a_forked_childs_first_draw_is_recorded_by_the_accelerator_with_its_whole_stack(monkeypatch):
    """The child's frame cache is made at the fork: its first draw walked its stack in Python, at ~0.3 ms a worker."""
    walked = []
    capture = _stack.StackTable.capture

    def counted(self, *args, **kwargs):
        walked.append(1)
        return capture(self, *args, **kwargs)

    monkeypatch.setattr(_stack.StackTable, "capture", counted)

    def draw_in_child() -> str:
        walked.clear()
        np.random.rand()  # the line the child's event must name
        return str(len(walked))

    with rng_trace(print=False) as trace:
        np.random.rand()
        assert _in_child(draw_in_child) == "0"
    child = [e for e in trace.events if e.pid != os.getpid()]
    assert len(child) == 1
    frame = child[0].frame
    assert frame is not None and frame.filename == __file__ and frame.function.endswith("draw_in_child")
    test = sys._getframe().f_code.co_name
    assert any(f.function == test for f in child[0].stack)  # the frames the child shares with its parent too


def test_a_child_forked_after_every_trace_ended_has_nothing_to_settle_and_traces_as_usual(monkeypatch):
    """A process that traced once forks on (a DataLoader's epochs after the block): each child's start stays bare."""
    with rng_trace(print=False):
        np.random.rand()
    settled = []
    settle = type(HUB)._settle

    def counted(hub, sessions):
        settled.append(len(sessions))
        return settle(hub, sessions)

    monkeypatch.setattr(type(HUB), "_settle", counted)

    def child() -> str:
        at_fork = list(settled)
        with rng_trace(print=False) as trace:
            np.random.rand()
        return repr((at_fork, len(trace.events), HUB.hooked()))

    assert _in_child(child) == repr(([], 1, {}))


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="only the accelerator turns SIGTERM into a wake-up")
def test_a_child_whose_writer_cannot_start_still_dies_of_sigterm(monkeypatch):
    """SIGTERM wakes the writer thread: a child whose thread never started must die of it as untraced."""
    import signal
    import time

    def no_thread(run) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(_processes, "_start_without_sigterm", no_thread)
    with rng_trace(print=False):
        np.random.rand()
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child: runs untraced, its start having failed)
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(10)
            os._exit(3)
        _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM
