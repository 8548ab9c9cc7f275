"""What a traced forked child pays, part by part, in the life of a DataLoader worker.

Forks a child that does what a worker does with torch's default seeding (the fork
hooks, ``random``/torch/NumPy seeds, 256 items of ``run._DrawingDataset``, then
``os._exit``), once untraced and once under a trace, alternately; each part is
timed inside the child with its own thread's CPU clock and sent back through a
pipe. Prints the medians of the paired differences, in ms of the child's CPU:

    python benchmarks/worker_parts.py [ROUNDS]

``run.py``'s workers row times whole epochs; this says where a worker's part of
the difference goes. Not part of ``make bench``.
"""

from __future__ import annotations

import ast
import os
import random
import resource
import statistics
import sys
import time

import numpy as np
import numpy.random  # noqa: F401  numpy 2 loads it lazily; a program that draws has it loaded
import run
import torch

from rngtrace import rng_trace
from rngtrace._hub import HUB

_REAL_EXIT = os._exit  # the process's own, whatever a trace puts in its place in a child
PARTS = ("fork hooks", "3 seeds", "256 items", "way out", "other threads", "page faults")
_marks: dict[str, float] = {}


def _first_after_fork() -> None:
    _marks["start"] = time.thread_time()
    _marks["faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _last_after_fork() -> None:
    _marks["hooked"] = time.thread_time()


def _child(dataset: run._DrawingDataset, out: int) -> None:
    """A worker's life, timed; never returns."""
    real_exit = _REAL_EXIT
    hooked = _marks["hooked"]
    random.seed(1234)
    torch.manual_seed(1234)
    np.random.seed(1234)
    seeded = time.thread_time()
    for i in range(256):
        dataset[i]
    drawn = time.thread_time()

    def leave(code: int) -> None:
        now = time.thread_time()
        parts = (
            hooked - _marks["start"],
            seeded - hooked,
            drawn - seeded,
            now - drawn,
            time.process_time() - now,
            resource.getrusage(resource.RUSAGE_SELF).ru_minflt - _marks["faults"],
        )
        os.write(out, (repr(parts) + "\n").encode())
        real_exit(code)

    writer = HUB._child
    if writer is not None:  # the hub's os._exit hook calls the writer's leave, then the real exit
        last_write = writer.leave

        def leave_after_last_write(code: int) -> None:
            last_write(code)
            leave(code)

        writer.leave = leave_after_last_write
    else:
        os._exit = leave
    try:
        os._exit(0)
    finally:
        real_exit(1)


def main(rounds: int) -> None:
    dataset = run._DrawingDataset(256)
    for i in range(256):
        dataset[i]  # warm, as a worker's parent is
    os.register_at_fork(after_in_child=_first_after_fork)  # runs before rngtrace's (registered later)
    with rng_trace(print=False):
        pass
    os.register_at_fork(after_in_child=_last_after_fork)  # and this one after
    read, write = os.pipe()
    results = os.fdopen(read)
    untraced, traced = [], []
    for _ in range(rounds):
        for into, trace in ((untraced, False), (traced, True)):
            if trace:
                block = rng_trace(print=False)
                block.__enter__()
            pid = os.fork()
            if pid == 0:
                _child(dataset, write)
            os.waitpid(pid, 0)
            if trace:
                block.__exit__(None, None, None)
            into.append(ast.literal_eval(results.readline()))
    print(
        f"{'part':14s} {'untraced':>9s} {'traced':>9s} {'added':>9s}   (ms of CPU, pages for faults;"
        f" medians of {rounds} pairs)"
    )
    for k, part in enumerate(PARTS):
        scale = 1 if part == "page faults" else 1e3
        u = statistics.median(x[k] for x in untraced) * scale
        t = statistics.median(x[k] for x in traced) * scale
        added = statistics.median(b[k] - a[k] for a, b in zip(untraced, traced)) * scale
        print(f"{part:14s} {u:9.2f} {t:9.2f} {added:+9.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 40)
