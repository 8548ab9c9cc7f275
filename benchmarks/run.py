"""rngtrace's benchmark suite: untraced vs traced, side by side, in one run.

Every timed figure is the median of alternating rounds (untraced, traced,
untraced, ...), so drift on a noisy machine hits both sides alike. Run with
``make bench``; ``--quick`` runs fewer rounds; ``--markdown`` prints the table
as benchmarks/README.md keeps it.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import platform
import random
import statistics
import subprocess
import sys
import time
import tracemalloc
from typing import Callable

import numpy as np

from rngtrace import rng_trace

try:
    import torch
except ImportError:  # the torch workloads are skipped, and said to be
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
DEPTH = 16


def alternate(untraced: Callable[[], float], traced: Callable[[], float], rounds: int) -> tuple[float, float]:
    """Medians of alternating rounds of two measurements."""
    a, b = [], []
    for _ in range(rounds):
        a.append(untraced())
        b.append(traced())
    return statistics.median(a), statistics.median(b)


def traced(fn: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        with rng_trace(print=False):
            return fn()

    return run


# -- 1. per-draw cost ----------------------------------------------------------------
def _nested(depth: int, fn: Callable[[], float]) -> float:
    """Call fn from ``depth`` frames down, so a capture has a full stack to walk."""
    if depth > 1:
        return _nested(depth - 1, fn)
    return fn()


def _draw_loop(draw: Callable[[], object], n: int) -> Callable[[], float]:
    def loop() -> float:
        t = time.perf_counter()
        for _ in range(n):
            draw()
        return (time.perf_counter() - t) / n * 1e9

    return lambda: _nested(DEPTH - 2, loop)  # the loop and the draw's caller make 16


def per_draw(rounds: int, n: int) -> list[tuple[str, float, float]]:
    draws: list[tuple[str, Callable[[], object]]] = [
        ("random.random()", lambda: random.random()),
        ("np.random.rand()", lambda: np.random.rand()),
        ("np.random.randn(1000)", lambda: np.random.randn(1000)),
    ]
    if torch is not None:
        draws.append(("torch.rand(1)", lambda: torch.rand(1)))
    rows = []
    for label, draw in draws:
        loop = _draw_loop(draw, n)
        loop()  # warm up: imports, caches, sys.monitoring sites
        untraced_ns, traced_ns = alternate(loop, traced(loop), rounds)
        rows.append((label, untraced_ns, traced_ns))
    return rows


# -- 2 and 3. training ------------------------------------------------------------------
def cnn_epoch(seed: int = 0) -> Callable[[], float]:
    """One epoch of a small CNN on synthetic MNIST-shaped data; returns seconds."""
    nn = torch.nn
    torch.manual_seed(seed)
    data = torch.randn(1024, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, 10, (1024,), generator=torch.Generator().manual_seed(2))
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25), nn.Linear(16 * 7 * 7, 64), nn.ReLU(), nn.Linear(64, 10),
    )
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(data, labels), batch_size=32, shuffle=True)

    def epoch() -> float:
        t = time.perf_counter()
        model.train()
        for x, y in loader:
            x = x + torch.from_numpy(np.random.normal(0, 0.01, x.shape).astype("float32"))
            if random.random() < 0.5:
                x = x.flip(-1)
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return time.perf_counter() - t

    return epoch


def mlp_steps(steps: int = 200) -> Callable[[], float]:
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (32,), generator=torch.Generator().manual_seed(2))

    def run() -> float:
        t = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
        return time.perf_counter() - t

    return run


def with_tracemalloc(fn: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        tracemalloc.start()
        try:
            return fn()
        finally:
            tracemalloc.stop()

    return run


def with_cprofile(fn: Callable[[], float]) -> Callable[[], float]:
    def run() -> float:
        profiler = cProfile.Profile()
        profiler.enable()
        try:
            return fn()
        finally:
            profiler.disable()

    return run


# -- 4 and 5. memory, and speed after a trace ---------------------------------------------
def _child(code: str) -> str:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=True)
    return out.stdout.strip()


MEMORY_CHILD = """
import random
from rngtrace import rng_trace
def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field):
            return int(line.split()[1])  # KiB
for _ in range(10000): random.random()
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")  # reset the peak (VmHWM) to the current RSS
before = status("VmRSS:")
with rng_trace(print=False) as t:
    for _ in range({n}):
        random.random()
peak = status("VmHWM:")
stat = t.statistics()[0]
print(peak - before, stat.calls, t.dropped)
"""

AFTER_CHILD = """
import random, statistics, time
import numpy as np
from rngtrace import rng_trace
def rate():
    t = time.perf_counter()
    for _ in range(200000):
        random.random(); np.random.rand()
    return time.perf_counter() - t
before = [rate() for _ in range({rounds})]
with rng_trace(print=False):
    random.random(); np.random.rand()
after = [rate() for _ in range({rounds})]
print(statistics.median(after) / statistics.median(before))
"""


def memory(n: int) -> tuple[float, int, int]:
    kib, calls, dropped = _child(MEMORY_CHILD.format(n=n)).split()
    return int(kib) / 1024, int(calls), int(dropped)


def after_trace(rounds: int, children: int = 3) -> float:
    # "Before" cannot alternate with "after" in one process: the median over a few
    # processes keeps one disturbed process from making the figure.
    return statistics.median(float(_child(AFTER_CHILD.format(rounds=rounds))) for _ in range(children))


# -- the table ----------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and draws")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args(argv)
    rounds = 5 if args.quick else 9
    lines = [
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__ if torch else 'not installed'}, {os.cpu_count()} cores, {platform.machine()}",
        "",
        "| figure | untraced | traced | result | target |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]

    def row(*cells: str) -> None:
        lines.append("| " + " | ".join(cells) + " |")
        if not args.markdown:
            print(lines[-1], flush=True)

    if not args.markdown:
        print("\n".join(lines), flush=True)
    for label, a, b in per_draw(rounds, 5000 if args.quick else 20000):
        row(f"{label}, depth {DEPTH}", f"{a:,.0f} ns", f"{b:,.0f} ns", f"+{(b - a) / 1000:.2f} µs/draw",
            "≤ 1.5 µs" if "1000" not in label else "—")
    if torch is not None:
        torch.set_num_threads(min(2, os.cpu_count() or 1))
        epoch = cnn_epoch()
        for _ in range(2):  # warm up: allocator, kernels, DataLoader
            epoch()
        a, b = alternate(epoch, traced(epoch), 15 if not args.quick else 5)
        row("CNN epoch (32 batches)", f"{a:.3f} s", f"{b:.3f} s", f"{b / a:.2f}×", "≤ 1.10×")
        a2, m = alternate(epoch, with_tracemalloc(epoch), 3)
        row("  anchor: tracemalloc on the CNN epoch", f"{a2:.3f} s", f"{m:.3f} s", f"{m / a2:.2f}×", "—")
        a3, p = alternate(epoch, with_cprofile(epoch), 3)
        row("  anchor: cProfile on the CNN epoch", f"{a3:.3f} s", f"{p:.3f} s", f"{p / a3:.2f}×", "—")
        mlp = mlp_steps()
        for _ in range(2):
            mlp()
        a, b = alternate(mlp, traced(mlp), rounds)
        row("MLP, 200 steps", f"{a:.3f} s", f"{b:.3f} s", f"{b / a:.2f}×", "≤ 1.50×")
    else:
        row("CNN epoch, MLP", "—", "—", "skipped: torch not installed", "")
    n = 1_000_000 if args.quick else 3_000_000
    mib, calls, dropped = memory(n)
    row(f"RSS added by {n:,} draws (max_events=100,000)", "—", f"{mib:.1f} MiB",
        f"{calls:,} counted, {dropped:,} not kept", "≤ 32 MB")
    ratio = after_trace(3 if args.quick else 15)
    row("draws after a trace ended vs before any", "—", "—", f"{ratio:.3f}×", "≤ 1.02×")
    if args.markdown:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
