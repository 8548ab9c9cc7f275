"""Memory while tracing draws from many distinct stacks past ``max_events`` (issue 25, row 8).

A generated program defines ``--functions`` functions and calls them in pairs
(outer ``f_i`` calls inner ``f_j``, which draws ``random.random()``), so every draw
comes from a stack no other draw has. Each side runs in a fresh interpreter and
reports the peak resident set (``VmHWM``) minus the resident set before the loop, and
the loop's time; untraced and traced rounds alternate, and the medians are quoted side
by side.

    python benchmarks/distinct_stacks.py            # 400k draws, max_events=10000
    python benchmarks/distinct_stacks.py --quick    # 40k draws, one round each
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile

TARGET_MIB = 64


def program(functions: int, inner: int, traced: bool, max_events: int) -> str:
    """The source of a program drawing once from each of ``functions * inner`` distinct stacks."""
    lines = ["import random", "from rngtrace import rng_trace"]
    for i in range(functions):
        # Each function draws when given no callee and calls its callee otherwise: one code object each.
        lines.append(f"def f{i}(g=None):\n    return random.random() if g is None else g()")
    lines.append(f"FUNCS = [{', '.join(f'f{i}' for i in range(functions))}]")
    lines.append(
        "def status(field):\n"
        "    for line in open('/proc/self/status'):\n"
        "        if line.startswith(field):\n"
        "            return int(line.split()[1])"
    )
    lines.append(
        f"def work():\n    for outer in FUNCS:\n        for callee in FUNCS[:{inner}]:\n            outer(callee)"
    )
    lines.append("with open('/proc/self/clear_refs', 'w') as f:\n    f.write('5')")
    lines.append("import time\nbefore = status('VmRSS:')\nstart = time.perf_counter()")
    if traced:
        lines.append(f"with rng_trace(print=False, max_events={max_events}) as t:\n    work()")
        lines.append("took = time.perf_counter() - start")
        lines.append("sites = len({e.stack for e in t.events}) + len(t.overflow)")
    else:
        lines.append("work()\ntook = time.perf_counter() - start\nsites = 0")
    lines.append("print(status('VmHWM:') - before, sites, took)")
    return "\n".join(lines) + "\n"


def measure(path: str) -> tuple[int, int, float]:
    """Run one generated program; its added peak RSS (KiB), the call sites its trace holds, its loop's seconds."""
    out = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=600, check=True)
    kib, sites, took = out.stdout.split()
    return int(kib), int(sites), float(took)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", type=int, default=2000)
    parser.add_argument("--inner", type=int, default=200, help="callees per outer function")
    parser.add_argument("--max-events", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="a tenth of the draws, one round")
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("distinct_stacks: reads /proc/self/status; Linux only")
        return 0
    inner, rounds = (max(1, args.inner // 10), 1) if args.quick else (args.inner, args.rounds)
    draws = args.functions * inner
    with tempfile.TemporaryDirectory() as tmp:
        paths = {}
        for side in (False, True):
            paths[side] = os.path.join(tmp, f"prog_{'traced' if side else 'untraced'}.py")
            with open(paths[side], "w") as f:
                f.write(program(args.functions, inner, side, args.max_events))
        plain, traced, sites = [], [], 0
        for _ in range(rounds):
            plain.append(measure(paths[False]))
            traced.append(measure(paths[True]))
            sites = traced[-1][1]
    a, b = (statistics.median(row[0] for row in rows) / 1024 for rows in (plain, traced))
    ta, tb = (statistics.median(row[2] for row in rows) * 1000 for rows in (plain, traced))
    print("| figure | untraced | traced | added | target |\n| --- | ---: | ---: | ---: | ---: |")
    print(
        f"| peak RSS, {draws:,} draws from {draws:,} distinct stacks, max_events={args.max_events:,}"
        f" ({sites:,} call sites held) | +{a:.1f} MiB | +{b:.1f} MiB | +{b - a:.1f} MiB | ≤ +{TARGET_MIB} MiB |"
    )
    print(
        f"| the loop's time, the same runs | {ta:.0f} ms | {tb:.0f} ms |"
        f" +{(tb - ta) * 1000 / draws:.2f} µs a draw | — |"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
