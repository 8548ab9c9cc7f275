"""What ``--rng-trace`` adds to a suite of 2,000 trivial tests (issue 13's target: at most 15%).

Writes 20 test files of 100 tests each (a conftest imports numpy, so its stream
is watched as in a project that uses it), then times whole ``pytest`` runs, one
without ``--rng-trace`` and one with it, alternating, and prints the medians as
Markdown table rows, as benchmarks/run.py does: wall time, and the runs' CPU time,
which a machine busy with other work disturbs less. ``--rounds N`` (default 5).
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

FILES, TESTS = 20, 100
BASE = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider"]


def write_suite(folder: str) -> None:
    with open(os.path.join(folder, "conftest.py"), "w") as out:
        out.write("import numpy.random  # noqa: F401  the suite's project uses numpy\n")
    for f in range(FILES):
        with open(os.path.join(folder, f"test_trivial_{f}.py"), "w") as out:
            out.writelines(f"def test_{t}():\n    assert {t} == {t}\n\n\n" for t in range(TESTS))


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(folder: str, *extra: str) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole pytest run; the CPU time is what a busy machine disturbs least."""
    start, cpu = time.perf_counter(), _cpu()
    done = subprocess.run([*BASE, *extra], cwd=folder, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if done.returncode != 0 or f"{FILES * TESTS} passed" not in done.stdout:
        raise SystemExit(f"the benchmark suite did not pass:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        write_suite(folder)
        timed(folder)  # warm: bytecode and the file cache, for both sides alike
        plain, traced = [], []
        for _ in range(args.rounds):
            plain.append(timed(folder))
            traced.append(timed(folder, "--rng-trace"))
    for i, what in ((0, "wall"), (1, "CPU")):
        a, b = statistics.median(r[i] for r in plain), statistics.median(r[i] for r in traced)
        print(f"| pytest, {FILES * TESTS:,} trivial tests, --rng-trace, {what} time (median of {args.rounds}) "
              f"| {a:.2f} s | {b:.2f} s | {b / a:.2f}x | ≤ 1.15x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
