"""Processes that draw, shared by the process tests, the process rendering tests and the saved-log tests:
a pool of two workers that each draw once, and a parent with one forked child."""

from __future__ import annotations

import multiprocessing
import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.random  # noqa: F401  (imported before any fork, as a program that used it is)

from rngtrace import Trace, rng_trace


def two_workers_draw(initializer: Callable[[], None] | None = None, context: Any = None) -> tuple[list[float], Trace]:
    """Map two tasks on a pool of two (fork by default), each waiting for the other: both workers draw once."""
    fd, path = tempfile.mkstemp(prefix="rngtrace-test-barrier-")
    os.close(fd)
    try:
        with rng_trace(print=False) as trace:
            with (context or multiprocessing.get_context("fork")).Pool(2, initializer=initializer) as pool:
                values = pool.map(draw_after_barrier, [path] * 2, chunksize=1)
    finally:
        os.remove(path)
    return values, trace


def draw_after_barrier(path: str) -> float:
    """Announce this worker in ``path``, wait until two have (so each takes one task), then draw once."""
    with open(path, "a") as f:
        f.write("x")
    deadline = time.monotonic() + 10
    while os.path.getsize(path) < 2 and time.monotonic() < deadline:
        time.sleep(0.005)
    value = float(np.random.rand())
    time.sleep(0.1)  # written before Pool.terminate() can kill the worker (a pause is written at a look, every 10 ms)
    return value


def parent_and_forked_child_draw() -> Trace:
    """A parent and its forked child, both drawing: a log of two processes."""
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            try:
                np.random.rand(2)
            finally:
                os._exit(0)
        np.random.rand(2)
        os.waitpid(pid, 0)
    return trace
