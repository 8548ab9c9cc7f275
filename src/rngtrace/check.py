"""``rngtrace check``: run a program several times and say whether its runs are reproducible, and why not.

Each run is a fresh ``python -m rngtrace run --quiet --json LOG`` of the program (its
children and workers traced too), with the same arguments, environment and standard
input. The first run's output is passed through as it comes; the others' is kept. The
runs' logs and outputs are then judged (``_reproduce``): the first line printed is the
verdict. Exit status 0: reproducible; 1: not; 2: bad input, a run that failed or ran
past ``--timeout``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, Any

from ._errors import LogError
from ._reproduce import Run, Verdict, hash_order, judge
from ._say import PROG, say, wants_color
from .render.check_text import render
from .trace import Trace

#: the PYTHONHASHSEED the runs are repeated with when only a hash order could explain a difference
FIXED_HASH_SEED = "0"
#: how much of a captured run's stderr is shown when it failed
_TAIL = 4000

DESCRIPTION = (
    "Run a program several times, each traced as under `rngtrace run`, and say whether the runs are "
    "reproducible: the same draws and seeds of every global random stream, the same end states and the same "
    "output. If not, name the first cause and the line to change. Exit status 0: reproducible; 1: not; "
    "2: bad input, a run that failed or ran past --timeout. rngtrace's options go before the script or -m."
)


class CheckError(Exception):
    """A run that could not be compared, said in one line; exit status 2."""


def add_parser(subcommands: Any) -> argparse.ArgumentParser:
    """Add ``check`` to the CLI's subcommands; its handler is ``command``."""
    parser = subcommands.add_parser(
        "check",
        help="run a program several times and say whether its runs are reproducible, and why not",
        usage=f"{PROG} check [options] script.py [args ...]\n       {PROG} check [options] -m module [args ...]",
        description=DESCRIPTION,
    )
    parser.add_argument("--runs", type=_runs, default=2, metavar="N", help="how many runs to compare (default 2)")
    parser.add_argument("--json", metavar="DIR", help="keep each run's log in DIR as run-1.json, run-2.json, ...")
    parser.add_argument(
        "--timeout", type=_seconds, default=None, metavar="S", help="stop a run that takes longer than S seconds"
    )
    parser.add_argument(
        "-m", dest="module", nargs=argparse.REMAINDER, metavar="module [args]", help="run a module as python -m does"
    )
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args]", help="the script to run")
    parser.set_defaults(handler=command)
    return parser


def _runs(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 2:
        raise argparse.ArgumentTypeError(f"expected a whole number of runs >= 2, got {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def command(args: argparse.Namespace) -> int:
    """Run ``rngtrace check`` with parsed ``args``; return 0 (reproducible), 1 (not) or 2."""
    try:
        target = _target(args)
        folder, keep = _folder(args.json)
    except CheckError as error:
        say(f"{PROG}: error: {error}")
        return 2
    try:
        return _check(target, folder, keep, args)
    except CheckError as error:
        say(f"{PROG} check: {error}")
        return 2
    except KeyboardInterrupt:
        say(f"{PROG} check: stopped by Ctrl-C")
        return 130
    finally:
        if not keep:
            shutil.rmtree(folder, ignore_errors=True)


def _check(target: list[str], folder: str, keep: bool, args: argparse.Namespace) -> int:
    stdin = _input()
    env = dict(os.environ)
    runs = [
        _run(n, target, os.path.join(folder, f"run-{n}.json"), env, stdin, args.timeout)
        for n in range(1, args.runs + 1)
    ]
    verdict = judge(runs)
    logs = [os.path.join(folder, f"run-{n}.json") for n in range(1, args.runs + 1)]
    if verdict.ask_hash_seed:
        verdict, more = _with_fixed_hash_seed(verdict, target, folder, env, stdin, args.timeout)
        logs += more
    sys.stdout.flush()
    report = render(verdict, logs=logs if keep else (), color=wants_color(sys.stderr))
    say(report)
    return 0 if verdict.reproducible else 1


def _with_fixed_hash_seed(
    verdict: Verdict, target: list[str], folder: str, env: dict, stdin: bytes | None, timeout: float | None
) -> tuple[Verdict, list[str]]:
    """Repeat the program twice with PYTHONHASHSEED fixed: hash order, or a cause outside the streams."""
    given = env.get("PYTHONHASHSEED", "random")
    if given != "random":  # the runs already shared one hash seed: a set's order cannot tell them apart
        return hash_order(verdict, (), given), []
    fixed = {**env, "PYTHONHASHSEED": FIXED_HASH_SEED}
    logs = [os.path.join(folder, f"hashseed-{n}.json") for n in (1, 2)]
    again = [_run(n, target, log, fixed, stdin, timeout, tee=False) for n, log in zip((1, 2), logs)]
    return hash_order(verdict, again, FIXED_HASH_SEED), logs


# -- the target and the folder -------------------------------------------------------


def _target(args: argparse.Namespace) -> list[str]:
    """What ``rngtrace run`` is given after its options: ``script.py args`` or ``-m module args``."""
    if args.module is not None:
        if not args.module:
            raise CheckError("-m needs a module name: rngtrace check -m package.module [args ...]")
        return ["-m", *args.module]
    target = args.target[1:] if args.target[:1] == ["--"] else list(args.target)
    if not target:
        raise CheckError("nothing to run; give a script or -m module: rngtrace check script.py [args ...]")
    path = target[0]
    if not os.path.exists(path):
        raise CheckError(f"no such file: {path!r}; check the path")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "__main__.py")):
        raise CheckError(f"{path!r} is a directory with no __main__.py; give the script to run")
    return ["--", *target]


def _folder(json_dir: str | None) -> tuple[str, bool]:
    """(where the runs' logs go, whether to keep them): --json DIR, made if need be, else a temporary folder."""
    if json_dir is None:
        return tempfile.mkdtemp(prefix="rngtrace-check-"), False
    if os.path.exists(json_dir) and not os.path.isdir(json_dir):
        raise CheckError(f"--json {json_dir!r} is a file; give a folder to keep the runs' logs in")
    try:
        os.makedirs(json_dir, exist_ok=True)
    except OSError as error:
        raise CheckError(f"cannot make --json folder {json_dir!r} ({error.strerror}); give another") from None
    return os.path.abspath(json_dir), True


def _input() -> bytes | None:
    """Standard input to give every run alike: all of it where it is a file or a pipe, none from a terminal."""
    try:
        if sys.stdin is None or sys.stdin.isatty():
            return None
        return sys.stdin.buffer.read()
    except (AttributeError, OSError, ValueError):
        return None


# -- one run ------------------------------------------------------------------------


@dataclass
class _Pipes:
    """What a run wrote: its standard output whole, and the end of its standard error."""

    stdout: bytearray
    stderr: bytearray


#: seconds a run has to end its trace after an interrupt before it is killed
_GRACE = 3.0


def _run(
    number: int,
    target: list[str],
    log: str,
    env: dict,
    stdin: bytes | None,
    timeout: float | None,
    tee: bool | None = None,
) -> Run:
    """Run the program once under ``rngtrace run`` and read its log; the first run's output is passed through."""
    tee = number == 1 if tee is None else tee
    command = [sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", log, *target]
    process = subprocess.Popen(
        command,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        start_new_session=True,  # its own group: a timeout stops its children too
        # Started from a background job or nohup, this process ignores SIGINT, and a run would
        # inherit that: the interrupt a timeout sends first would not end its trace, and the
        # kill after it would leave the run's spool folder behind. The run takes it as usual.
        preexec_fn=_interruptible if signal.getsignal(signal.SIGINT) == signal.SIG_IGN else None,
    )
    pipes = _Pipes(bytearray(), bytearray())
    readers = [
        _pump(process.stdout, pipes.stdout, sys.stdout if tee else None, keep_all=True),
        _pump(process.stderr, pipes.stderr, sys.stderr if tee else None, keep_all=False),
    ]
    if stdin is not None:
        threading.Thread(target=_feed, args=(process.stdin, stdin), daemon=True).start()
    try:
        status = process.wait(timeout)
    except subprocess.TimeoutExpired:
        _stop(process)
        raise CheckError(f"run {number} ran past --timeout {timeout:g} s and was stopped; raise --timeout") from None
    except BaseException:
        _stop(process)
        raise
    for reader in readers:
        reader.join()
    if status != 0:
        raise CheckError(_failed(number, target, status, pipes, tee))
    try:
        trace = Trace.load(log)
    except (OSError, LogError) as error:
        raise CheckError(f"run {number} left no readable log ({error}); the program may end with os._exit") from None
    return Run(number, status, bytes(pipes.stdout), trace)


def _pump(source: IO[bytes] | None, kept: bytearray, out: Any, keep_all: bool) -> threading.Thread:
    """Copy a run's pipe to ``out`` (None: nowhere) as it comes, keeping it whole or its end."""

    def pump() -> None:
        assert source is not None
        sink = getattr(out, "buffer", None) if out is not None else None
        for chunk in iter(lambda: source.read1(65536), b""):  # type: ignore[attr-defined]
            kept.extend(chunk)
            if not keep_all and len(kept) > 2 * _TAIL:
                del kept[:-_TAIL]
            if sink is not None:
                try:
                    sink.write(chunk)
                    sink.flush()
                except (OSError, ValueError):
                    sink = None  # our own output went away: the run goes on, kept here
        source.close()

    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def _feed(pipe: IO[bytes] | None, data: bytes) -> None:
    assert pipe is not None
    try:
        pipe.write(data)
        pipe.close()
    except OSError:  # the program stopped reading: it has what it wanted
        pass


def _interruptible() -> None:
    """In a run's process before it starts: SIGINT raises KeyboardInterrupt there (it was ignored here)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop(process: subprocess.Popen) -> None:
    """Stop a run and every process it started: interrupted first, so that its tracer cleans up, then killed.

    A SIGKILL alone would leave the run's spool folder in the temporary directory (nothing runs
    after it); a Ctrl-C lets ``rngtrace run`` end its trace and remove it. What is still alive
    after ``_GRACE`` seconds (a program that ignores SIGINT) is killed, with its children.
    """
    for sig, grace in ((signal.SIGINT, _GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(process.pid, sig)
        except OSError:
            break  # the group is gone
        try:
            process.wait(grace)
            if sig == signal.SIGINT:
                _reap_group(process.pid)
            break
        except subprocess.TimeoutExpired:
            continue
    process.wait()


def _reap_group(group: int) -> None:
    """Kill what is left of ``group`` once its leader has ended (a worker that outlived the interrupt)."""
    try:
        os.killpg(group, signal.SIGKILL)
    except OSError:
        pass


def _failed(number: int, target: list[str], status: int, pipes: _Pipes, shown: bool) -> str:
    """Why a failed run stops the check, with its error output where it was not shown already."""
    how = f"was killed by signal {-status}" if status < 0 else f"exited with status {status}"
    program = " ".join(target[1:] if target[0] == "--" else target)
    text = f"run {number} of {program} {how}; check compares runs that succeed: fix the failure first"
    tail = bytes(pipes.stderr[-_TAIL:]).decode("utf-8", "replace").rstrip()
    if tail and not shown:
        text += "\n  its error output:\n" + "\n".join(f"    {line}" for line in tail.splitlines()[-20:])
    return text


__all__: Sequence[str] = ["add_parser", "command"]
