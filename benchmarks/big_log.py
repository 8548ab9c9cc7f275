"""Reading big saved logs: ``rngtrace show`` and its HTML report (issue 25, row 10).

Writes a saved log of ``--events`` draws (a traced program drawing from a few
dozen call sites, every event kept), then times ``rngtrace show LOG`` and
``rngtrace show LOG --html`` in fresh interpreters and reads their peak RSS
(``ru_maxrss`` of the children). The reference, measured in the same run, is a
child that only reads the file's bytes and ``json.load``\\s it, the least any
reader of the whole file pays.

    python benchmarks/big_log.py                   # 1 M events (HTML row) and 9.1 M (show row; slow)
    python benchmarks/big_log.py --events 1000000  # one size only
"""

from __future__ import annotations

import argparse
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


def rows(events: int, tmp: str) -> list[str]:
    path = os.path.join(tmp, f"log_{events}.json")
    write_log(path, events)
    mib = os.path.getsize(path) / 2**20
    limit = f"{int(mib) + 64}M"
    json_s, json_rss = child([sys.executable, "-c", f"import json; json.load(open({path!r}))"])
    show_s, show_rss = child([sys.executable, "-m", "rngtrace", "show", path, "--max-log-size", limit])
    html = os.path.join(tmp, "report.html")
    html_s, html_rss = child([sys.executable, "-m", "rngtrace", "show", path, "--html", html, "--max-log-size", limit])
    what = f"{events:,} events ({mib:.0f} MiB)"
    return [
        f"| rngtrace show, {what} | json.load {json_s:.1f} s, {json_rss:.0f} MiB | {show_s:.1f} s, peak "
        f"{show_rss:.0f} MiB ({show_rss / mib:.1f}× the file) | ≤ {SHOW_S:.0f} s, ≤ 2× the file |",
        f"| rngtrace show --html, {what} | json.load {json_s:.1f} s, {json_rss:.0f} MiB | {html_s:.1f} s, peak "
        f"{html_rss:.0f} MiB | ≤ {HTML_S:.0f} s at 1 M events |",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, action="append", help="log sizes (default 1 M and 9.1 M)")
    args = parser.parse_args(argv)
    sizes = args.events or [1_000_000, 9_100_000]
    print("| figure | reference (same run) | measured | target |\n| --- | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as tmp:
        for events in sizes:
            start = time.perf_counter()
            for row in rows(events, tmp):
                print(row, flush=True)
            print(f"(  {events:,} events: {time.perf_counter() - start:.0f} s in all)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
