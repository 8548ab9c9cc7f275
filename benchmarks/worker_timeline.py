"""Where a traced DataLoader epoch's start loses time: the parent's forks and each worker's first steps.

Runs ``run.dataloader_epoch``'s loader (2 fork workers, 512 items drawing per item)
untraced and under a trace, alternately, and prints the medians of when things
happen, in ms from the start of the epoch, on the one clock every process shares
(``time.perf_counter``, CLOCK_MONOTONIC):

- in the parent, around each fork: rngtrace's ``_before_fork`` (between a hook
  that runs before it and one that runs after it) and the fork itself;
- in each worker: its fork, the end of its after-fork hooks, its first item and
  its 32nd (the end of its first batch's items).

    python benchmarks/worker_timeline.py [ROUNDS]

``worker_parts.py`` splits a worker's CPU by part; this says which of them the
epoch waits for. Not part of ``make bench``.
"""

from __future__ import annotations

import ast
import os
import statistics
import sys
import time
from typing import Any

import numpy.random  # noqa: F401  numpy 2 loads it lazily; a program that draws has it loaded
import run
import torch

from rngtrace import rng_trace

_parent: list[tuple[str, float]] = []
_child: dict[str, float] = {}
_read, _write = os.pipe()
os.set_blocking(_read, False)


def _forked() -> None:
    _child.clear()
    _child["fork"] = time.perf_counter()


class _Marked(run._DrawingDataset):
    """The benchmark's dataset, noting in a worker when its first item starts and its 32nd ends."""

    def __getitem__(self, i: int) -> Any:
        if "item 0" not in _child:
            _child["item 0"] = time.perf_counter()
        out = super().__getitem__(i)
        _child["n"] = _child.get("n", 0) + 1
        if _child["n"] == 32:
            _child["item 31 done"] = time.perf_counter()
            os.write(_write, (repr(_child) + "\n").encode())
        return out


def _drain() -> list[dict[str, float]]:
    data = b""
    try:
        while chunk := os.read(_read, 1 << 20):
            data += chunk
    except BlockingIOError:
        pass
    return [ast.literal_eval(line) for line in data.decode().splitlines()]


def main(rounds: int) -> None:
    # Order matters: os.register_at_fork runs "before" hooks last registered first, the others in order.
    os.register_at_fork(
        before=lambda: _parent.append(("before_fork done", time.perf_counter())), after_in_child=_forked
    )
    with rng_trace(print=False):  # rngtrace's own fork hooks go in here
        pass
    os.register_at_fork(
        before=lambda: _parent.append(("fork asked", time.perf_counter())),
        after_in_parent=lambda: _parent.append(("forked", time.perf_counter())),
        after_in_child=lambda: _child.__setitem__("hooked", time.perf_counter()),
    )
    loader = torch.utils.data.DataLoader(_Marked(512), batch_size=32, num_workers=2, multiprocessing_context="fork")

    def epoch() -> tuple[list[tuple[str, float]], list[dict[str, float]]]:
        _parent.clear()
        start = time.perf_counter()
        for _batch in loader:
            pass
        time.sleep(0.02)  # the workers' last writes
        workers = sorted(_drain(), key=lambda w: w["fork"])
        return [(k, t - start) for k, t in _parent], [{k: t - start for k, t in w.items() if k != "n"} for w in workers]

    epoch()
    runs: dict[bool, list] = {False: [], True: []}
    for _ in range(rounds):
        runs[False].append(epoch())
        with rng_trace(print=False):
            runs[True].append(epoch())

    def row(name: str, pick: Any) -> None:
        u = statistics.median(pick(r) for r in runs[False]) * 1e3
        t = statistics.median(pick(r) for r in runs[True]) * 1e3
        print(f"{name:34s} {u:8.2f} {t:8.2f} {t - u:+8.2f}")

    print(f"{'ms from the epoch start':34s} {'untraced':>8s} {'traced':>8s} {'added':>8s}   (medians of {rounds})")
    marks = runs[False][0][0]
    for i, (name, _t) in enumerate(marks):
        row(f"parent: {name} ({i // 3 + 1})", lambda r, i=i: r[0][i][1])
    for w in range(2):
        for key in ("fork", "hooked", "item 0", "item 31 done"):
            row(f"worker {w}: {key}", lambda r, w=w, key=key: r[1][w][key])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 25)
