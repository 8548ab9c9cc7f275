"""What ``--rng-trace`` adds to whole pytest runs, with pytest-randomly off and on (target: at most 15%).

Three suites: 2,000 trivial tests (20 files of 100; a conftest imports numpy, so its
stream is watched as in a project that uses it), scikit-learn's own
``model_selection/tests/test_split.py``, a real third-party module that draws, and
three of networkx's generator test modules, whose graphs draw from ``random``'s
hidden instance (``seed=None``).
Each is run without ``--rng-trace`` and with it, alternating, first with
``-p no:randomly`` and then with pytest-randomly reseeding ``random`` and NumPy
around every test (three times per test), and the medians are printed as Markdown
table rows, as benchmarks/run.py does: wall time, and the runs' CPU time, which a
machine busy with other work disturbs less. ``--rounds N`` (default 5).

``--only cpython-random`` (also run by default) times CPython's own ``Lib/test/test_random.py`` of the
running Python, copied to a temporary folder, under ``python -m pytest`` and under
``python -m rngtrace run -m pytest`` (the whole run one trace, its log printed), pytest-randomly on as
installed (issue 25's row: at most 1.3x). Its abstract ``TestBasicOps`` class, which pytest collects and
unittest does not, is deselected on both sides.

rngtrace's own modules are compiled to bytecode first: only the traced side imports
most of them, and where no ``.pyc`` is written (``PYTHONDONTWRITEBYTECODE``, an editable
install never compiled) it would compile them from source in every run, which an
installed package never does, while every module the untraced side imports is compiled.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

FILES, TESTS = 20, 100
BASE = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
# On: one seed for both sides, so the traced and untraced runs reseed alike (and run in one order).
RANDOMLY = {False: ["-p", "no:randomly"], True: ["--randomly-seed=1"]}


def write_suite(folder: str) -> None:
    with open(os.path.join(folder, "conftest.py"), "w") as out:
        out.write("import numpy.random  # noqa: F401  the suite's project uses numpy\n")
    for f in range(FILES):
        with open(os.path.join(folder, f"test_trivial_{f}.py"), "w") as out:
            out.writelines(f"def test_{t}():\n    assert {t} == {t}\n\n\n" for t in range(TESTS))


def compile_rngtrace() -> None:
    """Write rngtrace's bytecode, as installing it does: both sides then import compiled modules."""
    import rngtrace

    compileall.compile_dir(os.path.dirname(rngtrace.__file__), quiet=1)


def sklearn_module() -> list[str] | None:
    """scikit-learn's test_split.py, where scikit-learn is installed."""
    try:
        import sklearn
    except ImportError:
        return None
    path = os.path.join(os.path.dirname(sklearn.__file__), "model_selection", "tests", "test_split.py")
    return [path] if os.path.exists(path) else None


NETWORKX_MODULES = ("test_random_graphs.py", "test_degree_seq.py", "test_trees.py")


def networkx_modules() -> list[str] | None:
    """Three of networkx's generators/tests modules, where networkx is installed."""
    try:
        import networkx
    except ImportError:
        return None
    folder = os.path.join(os.path.dirname(networkx.__file__), "generators", "tests")
    paths = [os.path.join(folder, name) for name in NETWORKX_MODULES]
    return paths if all(os.path.exists(p) for p in paths) else None


def _cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def timed(folder: str, args: list[str], expect: str | None) -> tuple[float, float]:
    """(wall, CPU) seconds of one whole pytest run; the CPU time is what a busy machine disturbs least."""
    start, cpu = time.perf_counter(), _cpu()
    done = subprocess.run([*BASE, *args], cwd=folder, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if done.returncode != 0 or (expect is not None and expect not in done.stdout):
        raise SystemExit(f"the benchmark suite did not pass:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, cpu


def rows(name: str, folder: str, targets: list[str], expect: str | None, rounds: int) -> None:
    for randomly in (False, True):
        extra = [*targets, *RANDOMLY[randomly]]
        timed(folder, extra, expect)  # warm: bytecode and the file cache, for both sides alike
        plain, traced = [], []
        for _ in range(rounds):
            plain.append(timed(folder, extra, expect))
            traced.append(timed(folder, [*extra, "--rng-trace"], expect))
        label = f"{name}, pytest-randomly {'on' if randomly else 'off'}"
        for i, what in ((0, "wall"), (1, "CPU")):
            a, b = statistics.median(r[i] for r in plain), statistics.median(r[i] for r in traced)
            print(
                f"| pytest {label}, --rng-trace, {what} time (median of {rounds}) "
                f"| {a:.2f} s | {b:.2f} s | {b / a:.2f}x | ≤ 1.15x |",
                flush=True,
            )


def cpython_random(rounds: int) -> None:
    """CPython's test_random under ``rngtrace run -m pytest``, against plain pytest (issue 25: at most 1.3x)."""
    import sysconfig

    source = os.path.join(sysconfig.get_paths()["stdlib"], "test", "test_random.py")
    if not os.path.exists(source):
        print("| rngtrace run -m pytest test_random.py | CPython's tests not installed: skipped | | | |")
        return
    with tempfile.TemporaryDirectory() as folder:
        with open(source) as original, open(os.path.join(folder, "test_random.py"), "w") as copy:
            copy.write(original.read())
        # Run by file name, with no ini of the folder's: as a user runs the module at hand.
        args = ["test_random.py", "--deselect", "test_random.py::TestBasicOps", "-p", "no:cacheprovider"]
        plain = [sys.executable, "-m", "pytest", "-q", *args]
        traced = [sys.executable, "-m", "rngtrace", "run", "-m", "pytest", "-q", *args]
        run_once(folder, plain), run_once(folder, traced)  # warm: bytecode and the file cache
        sides: list[list[tuple[float, float]]] = [[], []]
        for _ in range(rounds):
            sides[0].append(run_once(folder, plain))
            sides[1].append(run_once(folder, traced))
        for i, what in ((0, "wall"), (1, "CPU")):
            a, b = (statistics.median(r[i] for r in side) for side in sides)
            print(
                f"| rngtrace run -m pytest over CPython's test_random.py (Python {sys.version.split()[0]}), "
                f"{what} time (median of {rounds}) | {a:.2f} s | {b:.2f} s | {b / a:.2f}x | ≤ 1.3x |",
                flush=True,
            )


def run_once(folder: str, command: list[str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run of ``command`` in ``folder``, which must pass."""
    start, cpu = time.perf_counter(), _cpu()
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True)
    elapsed, cpu = time.perf_counter() - start, _cpu() - cpu
    if done.returncode != 0 or " passed" not in done.stdout:
        raise SystemExit(f"test_random.py did not pass:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    return elapsed, cpu


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--only",
        choices=("trivial", "sklearn", "networkx", "cpython-random"),
        action="append",
        help="run only this suite (repeatable); all four by default",
    )
    args = parser.parse_args(argv)
    only = set(args.only or ("trivial", "sklearn", "networkx", "cpython-random"))
    compile_rngtrace()
    if "cpython-random" in only:
        cpython_random(args.rounds)
    with tempfile.TemporaryDirectory() as folder:
        write_suite(folder)
        if "trivial" in only:
            rows(f"{FILES * TESTS:,} trivial tests", folder, [], f"{FILES * TESTS} passed", args.rounds)
        suites = (
            ("sklearn", "scikit-learn's test_split.py", sklearn_module()),
            ("networkx", "networkx's " + ", ".join(NETWORKX_MODULES), networkx_modules()),
        )
        for key, name, paths in suites:
            if key not in only:
                continue
            if paths is None:
                print(f"| pytest {name} | not installed: skipped | | | |")
                continue
            # Run from outside the package, with its rootdir our folder: as a user runs a library's tests.
            # An ini of the folder's own: not the one above the installed package (this project's, here).
            with open(os.path.join(folder, "pytest.ini"), "w") as out:
                out.write("[pytest]\n")
            rows(name, folder, [*paths, "--rootdir", folder, "-c", "pytest.ini"], None, args.rounds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
