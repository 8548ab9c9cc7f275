"""Reading big saved logs: ``rngtrace show`` and its HTML report (issue 25, row 10).

Writes a saved log of ``--events`` draws (a traced program drawing from a few
dozen call sites, every event kept), then times ``rngtrace show LOG`` and
``rngtrace show LOG --html`` in fresh interpreters and reads their peak RSS
(``ru_maxrss`` of the children). The reference, measured in the same run, is a
child that only reads the file's bytes and ``json.load``\\s it, the least any
reader of the whole file pays.

    python benchmarks/big_log.py                   # 1 M events (HTML row) and 9.1 M (show row; slow)
    python benchmarks/big_log.py --events 1000000  # one size only
    python benchmarks/big_log.py --events 1000000 --distinct  # a log of mostly distinct rows instead

``--distinct`` writes the log itself, in the layout ``Trace.save`` writes, without tracing: 50,000
stacks of the user's line over a library's, two threads, counts 1 to 7 and a seed every 100,000
rows, so about a third of its rows differ from every other (a loop's rows repeat: the worst case
for a reader that shares repeated rows).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

SHOW_S, HTML_S = 20.0, 10.0


def write_log(path: str, events: int) -> None:
    """Trace ``events`` draws from 32 call sites, every one kept, and save the log at ``path``."""
    code = (
        "import random, sys\n"
        "from rngtrace import rng_trace\n"
        "def site(k):\n"
        "    return [random.random, random.gauss, random.randint][k % 3](*[(), (0, 1), (0, 9)][k % 3])\n"
        f"with rng_trace(print=False, max_events={events}) as t:\n"
        "    random.seed(0)\n"
        f"    for i in range({events} - 1):\n"
        "        site(i % 32)\n"
        "t.save(sys.argv[1])\n"
    )
    subprocess.run([sys.executable, "-c", code, path], check=True, timeout=3600)


def write_distinct_log(path: str, events: int) -> None:
    """A log of ``events`` rows, about a third of them distinct (see the module's docstring)."""
    stacks = [
        [["/proj/train.py", 10 + k % 400, "step"], [f"/venv/lib/python3.11/site-packages/lib/m{k % 97}.py", k, "f"]]
        for k in range(50_000)
    ]
    head = {"format": "rngtrace", "version": 2, "pid": 5, "streams": ["numpy", "random", "torch"], "depth": 16}
    head.update({"max_events": events, "dropped": 0, "notes": []})
    tail = {"overflow": [], "ppid": 4, "processes": [], "pids": {}, "origins": [], "from_start": True}
    tail.update({"settings": {}, "untraced": [], "findings": []})
    with open(path, "w", encoding="utf-8") as out:
        out.write("{\n" + "".join(f"  {json.dumps(k)}: {json.dumps(v)},\n" for k, v in head.items()))
        out.write('  "stacks": [\n' + ",\n".join("    " + json.dumps(s) for s in stacks) + "\n  ],\n")
        out.write('  "threads": {"1": "MainThread", "2": "worker"},\n  "events": [\n')
        for i in range(events):
            if i % 100_000 == 0:
                row = ["numpy", "seed", "numpy.random.seed", None, i % 50_000, 1, str(i)]
            else:
                row = ["numpy", "draw", "numpy.random.rand", i % 7 + 1, (i * 7919) % 50_000, 1 + i % 2, None]
            out.write("    " + json.dumps(row) + (",\n" if i < events - 1 else "\n"))
        out.write("  ],\n" + ",\n".join(f"  {json.dumps(k)}: {json.dumps(v)}" for k, v in tail.items()) + "\n}\n")


def child(argv: list[str]) -> tuple[float, float]:
    """Seconds a child took and its peak RSS in MiB (each child is measured on its own)."""
    # The children's ru_maxrss is the largest of all children so far: run each measurement in a
    # wrapper that reports its own child's.
    wrapper = (
        "import resource, subprocess, sys, time\n"
        "t = time.perf_counter()\n"
        "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)\n"
        "print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
    )
    out = subprocess.run([sys.executable, "-c", wrapper, *argv], capture_output=True, text=True, check=True)
    seconds, kib = out.stdout.split()
    return float(seconds), int(kib) / 1024


def rows(events: int, tmp: str, distinct: bool = False) -> list[str]:
    path = os.path.join(tmp, f"log_{events}.json")
    (write_distinct_log if distinct else write_log)(path, events)
    mib = os.path.getsize(path) / 2**20
    limit = f"{int(mib) + 64}M"
    json_s, json_rss = child([sys.executable, "-c", f"import json; json.load(open({path!r}))"])
    show_s, show_rss = child([sys.executable, "-m", "rngtrace", "show", path, "--max-log-size", limit])
    html = os.path.join(tmp, "report.html")
    html_s, html_rss = child([sys.executable, "-m", "rngtrace", "show", path, "--html", html, "--max-log-size", limit])
    what = f"{events:,} events ({mib:.0f} MiB{', mostly distinct rows' if distinct else ''})"
    return [
        f"| rngtrace show, {what} | json.load {json_s:.1f} s, {json_rss:.0f} MiB | {show_s:.1f} s, peak "
        f"{show_rss:.0f} MiB ({show_rss / mib:.1f}× the file) | ≤ {SHOW_S:.0f} s, ≤ 2× the file |",
        f"| rngtrace show --html, {what} | json.load {json_s:.1f} s, {json_rss:.0f} MiB | {html_s:.1f} s, peak "
        f"{html_rss:.0f} MiB | ≤ {HTML_S:.0f} s at 1 M events |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, action="append", help="log sizes (default 1 M and 9.1 M)")
    parser.add_argument("--distinct", action="store_true", help="logs of mostly distinct rows, not traced ones")
    args = parser.parse_args(argv)
    sizes = args.events or [1_000_000, 9_100_000]
    print("| figure | reference (same run) | measured | target |\n| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for events in sizes:
            start = time.perf_counter()
            for row in rows(events, tmp, args.distinct):
                print(row, flush=True)
            print(f"(  {events:,} events: {time.perf_counter() - start:.0f} s in all)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
