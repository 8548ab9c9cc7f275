"""A pool of two workers that each draw once, shared by the process tests and the process rendering tests."""

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
