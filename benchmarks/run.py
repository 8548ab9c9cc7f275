"""rngtrace's benchmark suite: untraced vs traced, side by side, in one run.

Every timed figure is the median of alternating rounds (untraced, traced,
untraced, ...), so drift on a noisy machine hits both sides alike. Run with
``make bench``; ``--quick`` runs fewer rounds; ``--markdown`` prints the table
as benchmarks/README.md keeps it; ``--cpu`` times the per-draw and per-call loops in CPU time;
``--only NAME`` (repeatable) runs some sections
only: per-draw, hand-tracer, fresh-frames, per-call, training, workers, subprocess, prebound, memory,
after-trace.
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
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.random  # noqa: F401  numpy 2 loads it lazily; a program that draws has it loaded

from rngtrace import rng_trace

try:
    import torch
except ImportError:  # the torch workloads are skipped, and said to be
    torch = None

HERE = os.path.dirname(os.path.abspath(__file__))
DEPTH = 16
#: the clock of the per-draw and per-call loops: wall time, or with --cpu the process's CPU time, which
#: other processes on a busy machine disturb less (threads of this one, a sweeper's, still count)
CLOCK: Callable[[], float] = time.perf_counter


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
        t = CLOCK()
        for _ in range(n):
            draw()
        return (CLOCK() - t) / n * 1e9

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


def hand_traced(fn: Callable[[], float]) -> Callable[[], float]:
    """``fn`` with ``random.random`` wrapped as a hand-written tracer would: its stack, per draw, in a list."""
    import traceback

    import wrapt

    def capture(wrapped: Callable, instance: object, args: tuple, kwargs: dict) -> object:
        stacks.append(traceback.extract_stack(limit=DEPTH))
        return wrapped(*args, **kwargs)

    stacks: list = []

    def run() -> float:
        original = random.random
        random.random = wrapt.FunctionWrapper(original, capture)
        try:
            return fn()
        finally:
            random.random = original
            stacks.clear()

    return run


def against_hand_tracer(rounds: int, n: int) -> tuple[float, float, float]:
    """ns per ``random.random()`` at depth 16: untraced, rngtrace, a hand-written stack-capturing tracer."""
    loop = _draw_loop(lambda: random.random(), n)
    loop()
    sides: list[list[float]] = [[], [], []]
    for _ in range(rounds):
        for side, run in zip(sides, (loop, traced(loop), hand_traced(loop))):
            side.append(run())
    untraced_ns, rngtrace_ns, hand_ns = (statistics.median(side) for side in sides)
    return untraced_ns, rngtrace_ns, hand_ns


def _fresh_loop(draw: Callable[[], object], n: int, fresh: int = 8) -> Callable[[], float]:
    """ns per draw made through ``fresh`` new frames per draw (a helper, a forward()), from a loop.

    The loop sits ``DEPTH - fresh`` frames deep, so every draw's stack is DEPTH frames, of
    which the innermost ``fresh`` were never seen before: the stack cache cannot help there.
    """

    def chain(k: int) -> object:
        return draw() if k <= 1 else chain(k - 1)

    def loop() -> float:
        t = CLOCK()
        for _ in range(n):
            chain(fresh)
        return (CLOCK() - t) / n * 1e9

    return lambda: _nested(DEPTH - fresh - 1, loop)


def per_fresh_draw(rounds: int, n: int) -> list[tuple[str, float, float]]:
    draws: list[tuple[str, Callable[[], object]]] = [
        ("random.random()", lambda: random.random()),
        ("np.random.rand()", lambda: np.random.rand()),
    ]
    if torch is not None:
        draws.append(("torch.rand(1)", lambda: torch.rand(1)))
        drop = torch.nn.Dropout(0.5).train()
        x = torch.randn(4, 8, generator=torch.Generator().manual_seed(3))
        draws.append(("nn.Dropout(0.5) on 4×8, training", lambda: drop(x)))
    rows = []
    for label, draw in draws:
        loop = _fresh_loop(draw, n)
        loop()
        untraced_ns, traced_ns = alternate(loop, traced(loop), rounds)
        rows.append((label, untraced_ns, traced_ns))
    return rows


# -- 1b. per-call cost: what a decorated call or a with block adds ----------------------
def draws_nothing() -> None:
    pass


def draws_once() -> None:
    np.random.rand()


def _call_loop(call: Callable[[], object], n: int) -> Callable[[], float]:
    """µs per call of ``call``, from a loop as deep as the per-draw figures."""

    def loop() -> float:
        t = CLOCK()
        for _ in range(n):
            call()
        return (CLOCK() - t) / n * 1e6

    return lambda: _nested(DEPTH - 2, loop)


def _block_loop(n: int, trace: bool) -> Callable[[], float]:
    """µs per ``with rng_trace(print=False): pass``, or per empty loop body."""

    def loop() -> float:
        t = CLOCK()
        if trace:
            for _ in range(n):
                with rng_trace(print=False):
                    pass
        else:
            for _ in range(n):
                pass
        return (CLOCK() - t) / n * 1e6

    return lambda: _nested(DEPTH - 2, loop)


def per_call(rounds: int, n: int) -> list[tuple[str, float, float]]:
    # Decorated once, called n times: the cost is the call's, not the decorator's.
    pairs: list[tuple[str, Callable[[], float], Callable[[], float]]] = [
        (
            "@rng_trace(print=False) on a function that draws nothing",
            _call_loop(draws_nothing, n),
            _call_loop(rng_trace(print=False)(draws_nothing), n),
        ),
        (
            "@rng_trace(print=False) on a function with one np.random.rand()",
            _call_loop(draws_once, n),
            _call_loop(rng_trace(print=False)(draws_once), n),
        ),
        ("with rng_trace(print=False): pass", _block_loop(n, False), _block_loop(n, True)),
    ]
    rows = []
    for label, untraced, traced_ in pairs:
        untraced(), traced_()  # warm up: the first trace installs what later ones reuse
        a, b = alternate(untraced, traced_, rounds)
        rows.append((label, a, b))
    return rows


# -- 2 and 3. training ------------------------------------------------------------------
def cnn_epoch(seed: int = 0) -> Callable[[], float]:
    """One epoch of a small CNN on synthetic MNIST-shaped data; returns seconds."""
    nn = torch.nn
    torch.manual_seed(seed)
    data = torch.randn(1024, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    labels = torch.randint(0, 10, (1024,), generator=torch.Generator().manual_seed(2))
    model = nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.25),
        nn.Linear(16 * 7 * 7, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
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


def mlp_steps(steps: int = 200, compiled: bool = False) -> Callable[[], float]:
    """``steps`` training steps of a small MLP with dropout; ``compiled``: its forward through torch.compile."""
    nn = torch.nn
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Dropout(0.1), nn.Linear(128, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(32, 64, generator=torch.Generator().manual_seed(1))
    y = torch.randint(0, 10, (32,), generator=torch.Generator().manual_seed(2))
    forward = torch.compile(model) if compiled else model

    def run() -> float:
        t = time.perf_counter()
        for _ in range(steps):
            opt.zero_grad()
            nn.functional.cross_entropy(forward(x), y).backward()
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
import numpy.random
try:
    import torch  # a user's program has it loaded, so the hub patches it too
except ImportError:
    pass
from rngtrace import rng_trace
def rate():
    t = time.perf_counter()
    for _ in range(200000):
        random.random(); np.random.rand()
    return time.perf_counter() - t
def median_rate():
    return statistics.median(rate() for _ in range({rounds}))
@rng_trace(print=False)
def draws_nothing():
    pass
@rng_trace(print=False)
def draws_once():
    np.random.rand()
before = median_rate()
with rng_trace(print=False):
    random.random(); np.random.rand()
after_one = median_rate()
for _ in range({calls}):
    draws_nothing(); draws_once()
    with rng_trace(print=False):
        pass
after_many = median_rate()
print(after_one / before, after_many / before)
"""

PREBOUND_CHILD = """
import _random, random, statistics, time, types
from rngtrace import rng_trace
{bind}
def leaf(x):
    return x + 1
def timed():  # code that draws nothing: small Python calls, the worst case for a profile hook
    t = time.perf_counter()
    s = 0
    for i in range({n}):
        s += leaf(i)
    return time.perf_counter() - t
timed(); timed()  # warm: 3.11 specialises the loop first
untraced = [timed() for _ in range(3)]
with rng_trace(print=False):
    {draw}()  # one draw through the reference bound before the trace
    random.random()  # a recorded draw notices that move, if nothing recorded it (the catch-all arms)
    traced = [timed() for _ in range(3)]
untraced += [timed() for _ in range(3)]
print(statistics.median(untraced), statistics.median(traced))
"""


#: how the reference is bound before the trace, by what the child draws through
PREBOUND_BINDINGS = {
    # as `from random import random` does: a module's name, which no patch reaches (with the accelerator
    # random.random records in place: the draw is recorded, and nothing arms)
    "pre": "pre = random.random",
    # the C base's method bound by hand and held in an object: no patch or in-place hook reaches it, and no
    # module's name holds it, so the catch-all arms and stays in
    "holder.random": "holder = types.SimpleNamespace(random=_random.Random.random.__get__(random._inst))",
}


def prebound(children: int, n: int, draw: str = "pre") -> tuple[float, float]:
    """Seconds of code that draws nothing, untraced and in a trace after one pre-bound draw: medians over children.

    Each child is fresh: its trace is the first to meet the reference (a later one finds it patched).
    ``draw`` is ``pre`` (a module's name) or ``holder.random`` (held in an object).
    """
    child = PREBOUND_CHILD.format(n=n, draw=draw, bind=PREBOUND_BINDINGS[draw])
    runs = [_child(child).split() for _ in range(children)]
    return statistics.median(float(a) for a, _ in runs), statistics.median(float(b) for _, b in runs)


AFTER_CALLS = 500  # of each: a decorated call that draws nothing, one that draws once, a with block


def memory(n: int) -> tuple[float, int, int]:
    kib, calls, dropped = _child(MEMORY_CHILD.format(n=n)).split()
    return int(kib) / 1024, int(calls), int(dropped)


def after_trace(rounds: int, children: int = 3) -> tuple[float, float]:
    """Draw speed after one traced block, and after many decorated calls, vs before any trace."""
    # "Before" cannot alternate with "after" in one process: the median over a few
    # processes keeps one disturbed process from making the figure.
    runs = [_child(AFTER_CHILD.format(rounds=rounds, calls=AFTER_CALLS)).split() for _ in range(children)]
    return statistics.median(float(one) for one, _ in runs), statistics.median(float(many) for _, many in runs)


# -- the table ----------------------------------------------------------------------------
Row = Callable[..., None]  # row(figure, untraced, traced, result, target)


def report_per_draw(quick: bool, row: Row) -> None:
    for label, a, b in per_draw(5 if quick else 9, 5000 if quick else 20000):
        row(
            f"{label}, depth {DEPTH}",
            f"{a:,.0f} ns",
            f"{b:,.0f} ns",
            f"+{(b - a) / 1000:.2f} µs/draw",
            "≤ 0.5 µs" if "1000" not in label else "—",
        )


def report_hand_tracer(quick: bool, row: Row) -> None:
    a, b, hand = against_hand_tracer(5 if quick else 9, 2000 if quick else 10000)
    row(
        f"random.random(), depth {DEPTH}: a wrapt wrapper calling traceback.extract_stack(limit={DEPTH})",
        f"{a:,.0f} ns",
        f"{hand:,.0f} ns",
        f"+{(hand - a) / 1000:.2f} µs/draw",
        "—",
    )
    share = (b - a) / (hand - a) if hand > a else float("nan")
    row(
        f"random.random(), depth {DEPTH}: rngtrace's added cost against the hand tracer's, same rounds",
        f"{a:,.0f} ns",
        f"{b:,.0f} ns",
        f"1/{1 / share:.0f}" if share > 0 else f"{share:.3f}",
        "≤ 1/50",
    )


def report_fresh_frames(quick: bool, row: Row) -> None:
    for label, a, b in per_fresh_draw(5 if quick else 9, 1000 if quick else 4000):
        target = "≤ 2.0 µs" if "Dropout" in label else "—"
        row(
            f"{label}, 8 new frames per draw, depth {DEPTH}",
            f"{a:,.0f} ns",
            f"{b:,.0f} ns",
            f"+{(b - a) / 1000:.2f} µs/draw",
            target,
        )


# Issue 25, on every Python.
PER_CALL_TARGETS = {"draws nothing": "≤ 30 µs", "np.random.rand()": "≤ 35 µs", "pass": "≤ 30 µs"}


def report_per_call(quick: bool, row: Row) -> None:
    for label, a, b in per_call(7 if quick else 15, 200 if quick else 400):
        unit = "block" if label.startswith("with") else "call"
        target = next(t for key, t in PER_CALL_TARGETS.items() if label.endswith(key))
        row(f"{label}, depth {DEPTH}", f"{a:,.2f} µs", f"{b:,.2f} µs", f"+{b - a:,.1f} µs/{unit}", target)


def report_training(quick: bool, row: Row) -> None:
    if torch is None:
        row("CNN epoch, MLP", "—", "—", "skipped: torch not installed", "")
        return
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    epoch = cnn_epoch()
    for _ in range(2):  # warm up: allocator, kernels, DataLoader
        epoch()
    a, b = alternate(epoch, traced(epoch), 5 if quick else 15)
    row("CNN epoch (32 batches)", f"{a:.3f} s", f"{b:.3f} s", f"{b / a:.2f}×", "≤ 1.10×")
    a2, m = alternate(epoch, with_tracemalloc(epoch), 3)
    row("  anchor: tracemalloc on the CNN epoch", f"{a2:.3f} s", f"{m:.3f} s", f"{m / a2:.2f}×", "—")
    a3, p = alternate(epoch, with_cprofile(epoch), 3)
    row("  anchor: cProfile on the CNN epoch", f"{a3:.3f} s", f"{p:.3f} s", f"{p / a3:.2f}×", "—")
    mlp = mlp_steps()
    for _ in range(2):
        mlp()
    a, b = alternate(mlp, traced(mlp), 5 if quick else 21)  # 30 ms a round: its median needs more of them
    row("MLP, 200 steps", f"{a:.3f} s", f"{b:.3f} s", f"{b / a:.2f}×", "≤ 1.05×")
    compiled = mlp_steps(compiled=True)
    for _ in range(2):  # the compile, then a warm round
        compiled()
    a, b = alternate(compiled, traced(compiled), 5 if quick else 21)
    row(
        "the same MLP through torch.compile (Inductor), 200 steps",
        f"{a:.3f} s",
        f"{b:.3f} s",
        f"{b / a:.2f}×",
        "≤ 1.10×",
    )


class _DrawingDataset:
    """A dataset whose every item draws from NumPy's and torch's global streams, as augmentations do."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.x = torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(4))

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i: int) -> Any:
        image = self.x[i]
        if np.random.rand() < 0.5:
            image = image.flip(-1)
        return image + 0.01 * torch.randn(image.shape)


def dataloader_epoch(items: int = 512) -> Callable[[], float]:
    """One epoch of a DataLoader with 2 worker processes (fork) over a dataset that draws per item."""
    loader = torch.utils.data.DataLoader(
        _DrawingDataset(items), batch_size=32, num_workers=2, multiprocessing_context="fork"
    )

    def run() -> float:
        t = time.perf_counter()
        for _batch in loader:
            pass
        return time.perf_counter() - t

    return run


def report_workers(quick: bool, row: Row) -> None:
    if torch is None or not hasattr(os, "fork"):
        row("DataLoader epoch, 2 workers", "—", "—", "skipped: needs torch and fork", "")
        return
    epoch = dataloader_epoch(256 if quick else 512)
    epoch()
    # An epoch of forked workers varies by ±10% from one to the next here: 61 rounds, not 9, for a
    # median that moves by about 1% from one run to the next rather than 3%.
    rounds = 5 if quick else 61
    a, b = alternate(epoch, traced(epoch), rounds)
    row(
        f"DataLoader epoch, 2 fork workers, {256 if quick else 512} items drawing per item",
        f"{a:.3f} s",
        f"{b:.3f} s",
        f"{b / a:.2f}×",
        "≤ 1.10×",
    )

    def whole_block() -> float:  # the block's start and end too: the merge of the workers' spools
        t = time.perf_counter()
        with rng_trace(print=False):
            epoch()
        return time.perf_counter() - t

    a, b = alternate(epoch, whole_block, rounds)
    row(
        "  the same, with the traced block's start and end (the workers' events merged)",
        f"{a:.3f} s",
        f"{b:.3f} s",
        f"{b / a:.2f}×",
        "—",
    )
    persistent = persistent_epochs(256 if quick else 512)
    persistent()
    a, b = alternate(persistent, traced(persistent), 5 if quick else 31)
    row(
        f"the same with persistent_workers=True: {PERSISTENT_EPOCHS} epochs, the workers started in the first",
        f"{a:.3f} s",
        f"{b:.3f} s",
        f"{b / a:.2f}×",
        "≤ 1.10×",
    )


PERSISTENT_EPOCHS = 3


def persistent_epochs(items: int) -> Callable[[], float]:
    """A fresh DataLoader with 2 persistent fork workers, run for PERSISTENT_EPOCHS epochs; returns seconds.

    The workers start in the first epoch and serve the rest, as in a training run; they are shut
    down after the timing, inside the traced block (their events merged when it ends).
    """

    def run() -> float:
        loader = torch.utils.data.DataLoader(
            _DrawingDataset(items),
            batch_size=32,
            num_workers=2,
            multiprocessing_context="fork",
            persistent_workers=True,
        )
        t = time.perf_counter()
        for _ in range(PERSISTENT_EPOCHS):
            for _batch in loader:
                pass
        took = time.perf_counter() - t
        loader._iterator._shutdown_workers()  # type: ignore[union-attr]  # now, not whenever it is collected
        return took

    return run


_CHILDREN_PARENT = """\
import subprocess, sys, time
t = time.perf_counter()
for _ in range({n}):
    subprocess.run([sys.executable, "-c", "import numpy, random; numpy.random.rand(); random.random()"], check=True)
print((time.perf_counter() - t) / {n})
"""


def subprocess_children(n: int) -> tuple[Callable[[], float], Callable[[], float]]:
    """A program that starts ``n`` Python children one after another, each importing NumPy and drawing.

    Run as ``python parent.py`` and as ``rngtrace run parent.py``; each returns the seconds per child.
    Bytecode caching is on, as in an ordinary install (this machine's environment turns it off).
    """
    folder = tempfile.mkdtemp(prefix="rngtrace-bench-")
    script = os.path.join(folder, "parent.py")
    with open(script, "w") as out:
        out.write(_CHILDREN_PARENT.format(n=n))
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}

    def measure(*command: str) -> Callable[[], float]:
        def run() -> float:
            done = subprocess.run(
                [sys.executable, *command, script], capture_output=True, text=True, env=env, check=True
            )
            return float(done.stdout.split()[-1])

        return run

    return measure(), measure("-m", "rngtrace", "run", "--quiet")


def report_subprocesses(quick: bool, row: Row) -> None:
    untraced_run, traced_run = subprocess_children(3 if quick else 5)
    untraced_run(), traced_run()  # bytecode written
    a, b = alternate(untraced_run, traced_run, 3 if quick else 15)
    row(
        "start of a Python child (subprocess, imports numpy, draws) under rngtrace run",
        f"{a * 1e3:.0f} ms",
        f"{b * 1e3:.0f} ms",
        f"+{(b - a) * 1e3:.0f} ms/child",
        "≤ +30 ms",
    )


def report_memory(quick: bool, row: Row) -> None:
    n = 1_000_000 if quick else 3_000_000
    mib, calls, dropped = memory(n)
    row(
        f"RSS added by {n:,} draws (max_events=100,000)",
        "—",
        f"{mib:.1f} MiB",
        f"{calls:,} counted, {dropped:,} not kept",
        "≤ 32 MB",
    )


def report_prebound(quick: bool, row: Row) -> None:
    children, n = (3, 100_000) if quick else (9, 300_000)
    a, b = prebound(children, n)
    row(
        "code that draws nothing, in a trace, after one draw through `pre = random.random` bound at import",
        f"{a * 1e3:.1f} ms",
        f"{b * 1e3:.1f} ms",
        f"{b / a:.2f}×",
        "≤ 1.10×",
    )
    a, b = prebound(children, n, "holder.random")
    row(
        "  the same through the C base's method bound by hand, held in an object (the catch-all stays in)",
        f"{a * 1e3:.1f} ms",
        f"{b * 1e3:.1f} ms",
        f"{b / a:.2f}×",
        "—",
    )


def report_after_trace(quick: bool, row: Row) -> None:
    one, many = after_trace(3 if quick else 15)
    row("draws after a trace ended vs before any", "—", "—", f"{one:.3f}×", "≤ 1.02×")
    row(
        f"draws after {3 * AFTER_CALLS:,} decorated calls and blocks vs before any", "—", "—", f"{many:.3f}×", "≤ 1.02×"
    )


# In the order they run and print; --only picks some, keeping this order.
SECTIONS: dict[str, Callable[[bool, Row], None]] = {
    "per-draw": report_per_draw,
    "hand-tracer": report_hand_tracer,
    "fresh-frames": report_fresh_frames,
    "per-call": report_per_call,
    "training": report_training,
    "workers": report_workers,
    "subprocess": report_subprocesses,
    "prebound": report_prebound,
    "memory": report_memory,
    "after-trace": report_after_trace,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and draws")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    parser.add_argument(
        "--cpu", action="store_true", help="time the per-draw and per-call loops in CPU time, not wall time"
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=list(SECTIONS),
        metavar="NAME",
        help=f"run only this section (repeatable): {', '.join(SECTIONS)}",
    )
    args = parser.parse_args(argv)
    global CLOCK
    CLOCK = time.process_time if args.cpu else time.perf_counter
    lines = [
        f"Python {platform.python_version()}, numpy {np.__version__}, "
        f"torch {torch.__version__ if torch else 'not installed'}, {os.cpu_count()} cores, {platform.machine()}"
        + (", per-draw and per-call loops in CPU time" if args.cpu else ""),
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
    for name, report in SECTIONS.items():
        if not args.only or name in args.only:
            report(args.quick, row)
    if args.markdown:
        print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
