"""``rngtrace run script.py args``: the program run as ``__main__`` under rng_trace, then its log.

The script runs the way ``python script.py args`` would (``-m module`` as
``python -m``), with every global random stream traced, and its draw log is
printed to stderr when it ends, however it ends; the program's own output and
exit status are left as they are.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator
from typing import Any

from . import _subprocess
from ._cli_outputs import check_renderer, output_path, save, why, write_html
from ._codes import program_entry
from ._errors import GlobalRNGError
from ._hub import HUB
from ._paths import current_dir, is_hidden, is_own
from ._say import PROG, UsageError, say, wants_color
from .render import render
from .trace import Trace
from .tracer import RngTrace


@program_entry  # the console script and whoever called main() are not the program: no stack goes past here
def run_command(args: argparse.Namespace) -> int:
    """Run a script or module under rng_trace, print its draw log, keep its exit status.

    The status is always the program's own: a log that cannot be printed or saved
    is said in one line on stderr. A child the program forked and that ended by
    raising SystemExit returns here too; it reports nothing, since its parent does.
    """
    run, argv, path0 = _target(args)
    # Made absolute now: the program may change or delete the working directory they are relative to.
    json_at, html_at = (output_path(path) for path in (args.json, args.html))
    if args.html:
        check_renderer("html")
    try:
        tracer = RngTrace(
            streams=args.streams,
            depth=args.depth,
            on_draw=args.on_draw,
            print=False,
            max_events=args.max_events,
            log_dir=args.log_dir,
        )
    except (TypeError, ValueError) as error:  # a --log-dir that is a file, or relative to a deleted cwd
        raise UsageError(str(error)) from None
    started_in = os.getpid()
    # Python children the program starts with subprocess trace too (from the environment, until it ends).
    with _as_main(argv, path0), tracer as trace, _subprocess.follow(HUB):
        # Set inside the block, so the logs --log-dir writes as it ends carry it too: the trace
        # saw the program start, so a draw before any seed is an unseeded stream.
        trace.from_start = True
        HUB.compare_states(trace)  # two runs' logs are diffed: note the state each stream starts from
        status, failure = _execute(run)
        HUB.note_end_states(trace)  # and where each ended: `rngtrace check` compares runs by both
    if failure is not None:
        _print_program_error(failure)
    if os.getpid() == started_in:  # not in a forked child: its copy of the trace is partial
        try:
            _report(trace, args, json_at, html_at)
        except Exception as error:  # noqa: BLE001 - a fault in rngtrace must not change the program's result
            say(f"{PROG}: error: could not report the trace ({why(error)}); please report this rngtrace bug")
    return status


def _target(args: argparse.Namespace) -> tuple[Callable[[], Any], list[str], str]:
    """(run the program, its sys.argv, its sys.path[0]) for ``script.py args`` or ``-m module args``."""
    if args.module is not None:
        if not args.module:
            raise UsageError("-m needs a module name: rngtrace run -m package.module [args ...]")
        name, *rest = args.module
        return (lambda: _run_module(name)), [name, *rest], current_dir()
    target = args.target[1:] if args.target[:1] == ["--"] else args.target
    if not target:
        raise UsageError("nothing to run; give a script or -m module: rngtrace run script.py [args ...]")
    path, *rest = target
    if not os.path.exists(path):
        raise UsageError(f"no such file: {path!r}; check the path")
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "__main__.py")):
        raise UsageError(f"{path!r} is a directory with no __main__.py; give the script to run")
    path0 = os.path.dirname(os.path.realpath(path)) if os.path.isfile(path) else os.path.abspath(path)
    # An absolute path, as python gives __main__ since 3.9, so frames name the file wherever the program chdirs.
    return (lambda: runpy.run_path(os.path.abspath(path), run_name="__main__")), [path, *rest], path0


def _run_module(name: str) -> None:
    """Find ``name`` as ``python -m`` would (importing its parent packages, inside the trace) and run it."""
    try:
        spec = importlib.util.find_spec(name)
    except ModuleNotFoundError as error:
        if not error.name or not (name + ".").startswith(error.name + "."):
            raise  # a module the package imports is missing: the program's own error
        spec = None
    except ValueError:  # a relative name such as ".tool"
        spec = None
    if spec is None:
        raise UsageError(f"no module named {name!r}; check the name, and run from the directory that has it")
    if spec.submodule_search_locations is not None and importlib.util.find_spec(name + ".__main__") is None:
        raise UsageError(f"{name!r} is a package with no __main__ module; give one of its modules")
    runpy.run_module(name, run_name="__main__", alter_sys=True)


@contextlib.contextmanager
def _as_main(argv: list[str], path0: str) -> Iterator[None]:
    """Give the program the ``sys.argv`` and ``sys.path[0]`` python would have given it."""
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = list(argv)
    sys.path[:1] = [path0]
    try:
        yield
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path


def _execute(run: Callable[[], Any]) -> tuple[int, BaseException | None]:
    """Run the program; return (its exit status, the exception that ended it, if uncaught)."""
    try:
        run()
    except SystemExit as exit_:
        return _exit_status(exit_.code), None
    except UsageError:
        raise
    except KeyboardInterrupt as error:
        return 130, error  # as a shell reports a program stopped by Ctrl-C
    except BaseException as error:  # noqa: BLE001 - the program's error, reported as python would
        return 1, error
    return 0, None


def _exit_status(code: Any) -> int:
    """The status ``sys.exit(code)`` gives: None is 0, an int itself, anything else printed and 1."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    with contextlib.suppress(OSError, ValueError):  # a stderr the program closed: python alone says nothing
        print(code, file=sys.stderr)
    return 1


def _print_program_error(error: BaseException) -> None:
    """Print the traceback python would print, without the runner's frames.

    For a GlobalRNGError the frames inside rngtrace's wrapper go too: the
    draw site is the last frame the reader needs.
    """
    summary = traceback.TracebackException(type(error), error, error.__traceback__)
    frames = list(summary.stack)
    while frames and is_hidden(frames[0].filename):  # the runner's own frames and runpy's
        frames.pop(0)
    if isinstance(error, GlobalRNGError):
        while frames and is_own(frames[-1].filename):
            frames.pop()
    summary.stack = traceback.StackSummary.from_list(frames)
    with contextlib.suppress(OSError, ValueError):  # a stderr the program closed: python alone says nothing
        sys.stderr.write("".join(summary.format()))


def _report(trace: Trace, args: argparse.Namespace, json_at: str | None, html_at: str | None) -> None:
    """Print the log (unless --quiet) and save what was asked at the absolute paths.

    Nothing here may change the program's exit status: the program may have closed
    stdout or stderr, or named its script with bytes that are not UTF-8, so every
    failure is one line on stderr (when stderr is still there to say it).
    """
    with contextlib.suppress(OSError, ValueError):  # a stdout the program closed: python alone says nothing
        sys.stdout.flush()  # the program's output first, where both go to one terminal
    if not args.quiet:
        try:
            sys.stderr.write(render(trace, "text", color=wants_color(sys.stderr)) + "\n")
            sys.stderr.flush()
        except (OSError, ValueError) as error:
            say(f"{PROG}: error: cannot print the log ({why(error)}); save it with --json instead")
    outputs = (
        (args.json, json_at, "log", trace.save),
        (args.html, html_at, "HTML report", lambda path: write_html(trace, path)),
    )
    for given, path, what, writer in outputs:
        if path:
            save(path, what, writer, quiet=args.quiet, given=given)
