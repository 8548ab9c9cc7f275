"""The command line: ``rngtrace run``, ``rngtrace show`` and ``rngtrace diff``.

``rngtrace run script.py args`` runs the script as ``__main__`` the way
``python script.py args`` would (``-m module`` as ``python -m``), with every
global random stream traced, and prints the draw log to stderr when it ends,
however it ends; the program's own output and exit status are left as they are.
A mistake on the command line or an unreadable log is one line on stderr and
exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib.util
import os
import runpy
import sys
import traceback
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

from . import _subprocess, fix, ranks
from ._errors import GlobalRNGError, LogError
from ._hub import HUB, validate_on_draw, validate_streams
from ._logfile import escape_surrogates
from ._paths import current_dir, is_hidden, is_own
from ._say import add_max_log_size, wants_color
from ._stack import program_entry
from ._version import __version__
from .diff import compare
from .render import RENDERERS, render, render_diff
from .trace import Trace
from .tracer import RngTrace

PROG = "rngtrace"
_COMMANDS = ("run", "show", "diff", "ranks", "fix")


class UsageError(Exception):
    """A mistake on the command line, said in one line; exit status 2."""


def main(argv: Sequence[str] | None = None) -> int:
    """Run the rngtrace command line with ``argv`` (default ``sys.argv[1:]``); return the exit status."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        if not argv or argv[0] not in _COMMANDS and not argv[0].startswith("-"):
            said = f"unknown command {argv[0]!r}" if argv else "no command"
            raise UsageError(f"{said}; choose from {', '.join(_COMMANDS)} (see `{PROG} --help`)")
        args = _parser().parse_args(argv)
        return int(args.handler(args))
    except (UsageError, LogError) as error:
        print(f"{PROG}: error: {error}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `rngtrace show log.json | head`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


# -- rngtrace run ------------------------------------------------------------------


@program_entry  # the console script and whoever called main() are not the program: no stack goes past here
def run_command(args: argparse.Namespace) -> int:
    """Run a script or module under rng_trace, print its draw log, keep its exit status.

    The status is always the program's own: a log that cannot be printed or saved
    is said in one line on stderr. A child the program forked and that ended by
    raising SystemExit returns here too; it reports nothing, since its parent does.
    """
    run, argv, path0 = _target(args)
    # Made absolute now: the program may change or delete the working directory they are relative to.
    json_at, html_at = (_output_path(path) for path in (args.json, args.html))
    if args.html:
        _check_renderer("html")
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
    if failure is not None:
        _print_program_error(failure)
    if os.getpid() == started_in:  # not in a forked child: its copy of the trace is partial
        try:
            _report(trace, args, json_at, html_at)
        except Exception as error:  # noqa: BLE001 - a fault in rngtrace must not change the program's result
            _say(f"{PROG}: error: could not report the trace ({_why(error)}); please report this rngtrace bug")
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
            _say(f"{PROG}: error: cannot print the log ({_why(error)}); save it with --json instead")
    outputs = (
        (args.json, json_at, "log", trace.save),
        (args.html, html_at, "HTML report", lambda path: _write_html(trace, path)),
    )
    for given, path, what, save in outputs:
        if path:
            _save(path, what, save, quiet=args.quiet, given=given)


def _save(path: str, what: str, save: Callable[[str], None], *, quiet: bool, given: str | None = None) -> bool:
    """Write one output file; say where (as the user ``given`` it), or say in one line why it could not be written."""
    shown = given or path
    try:
        save(path)
    except (OSError, ValueError) as error:  # ValueError: an encoding error among them
        _say(f"{PROG}: error: cannot write {shown!r} ({_why(error)}); check the path")
        return False
    if not quiet:
        _say(f"{PROG}: {what} saved to {_printable_name(shown)}")
    return True


def _why(error: BaseException) -> str:
    """An error in a few words: its strerror, or its type and first line."""
    strerror = getattr(error, "strerror", None)
    if strerror:
        return str(strerror)
    first = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first[:200]}" if first else type(error).__name__


def _say(line: str) -> None:
    """Print one line on stderr; say nothing when the program closed or broke stderr."""
    with contextlib.suppress(OSError, ValueError):
        print(line, file=sys.stderr, flush=True)


# -- rngtrace show / diff ----------------------------------------------------------


def show_command(args: argparse.Namespace) -> int:
    """Print a saved log as text, or write it as an HTML report."""
    if args.html:
        _check_output(args.html)
        _check_renderer("html")
    trace = Trace.load(args.log, max_size=args.max_log_size)
    if args.html:
        return 0 if _save(args.html, "HTML report", lambda path: _write_html(trace, path), quiet=False) else 2
    _write(sys.stdout, render(trace, "text", color=wants_color(sys.stdout)) + "\n")
    return 0


def diff_command(args: argparse.Namespace) -> int:
    """Print where two saved runs part; exit status 0 when they drew the same, 1 when not."""
    a = Trace.load(args.a, max_size=args.max_log_size)
    b = Trace.load(args.b, max_size=args.max_log_size)
    result = compare(a, b)
    names = (_printable_name(args.a), _printable_name(args.b))
    _write(sys.stdout, render_diff(result, names=names, color=wants_color(sys.stdout)) + "\n")
    return 0 if result.same else 1


# -- shared helpers ----------------------------------------------------------------


def _write_html(trace: Trace, path: str) -> None:
    html = render(trace, "html")
    # backslashreplace: a lone surrogate (a script name that is not UTF-8) shows as its escape, \\udcff.
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
        out.write(html)


def _write(stream: Any, text: str) -> None:
    """Write ``text``; characters the stream's encoding lacks (an ASCII terminal) as backslash escapes."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))


def _printable_name(path: str) -> str:
    """A path as given, with bytes that were not UTF-8 (kept as surrogates) shown as ``\\xff``."""
    return path if path.isascii() else escape_surrogates(path)


def _output_path(path: str | None) -> str | None:
    """``path`` made absolute, once it is checked to be writable."""
    _check_output(path)
    return os.path.abspath(path) if path else path


def _check_output(path: str | None) -> None:
    """Fail before a long run, not after it, when an output file cannot be created."""
    if not path:
        return
    if not os.path.isabs(path) and not current_dir():
        raise UsageError(f"the working directory no longer exists; give an absolute path for {path!r}")
    if os.path.isdir(path):
        raise UsageError(f"{path!r} is a directory; give a file name to write")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise UsageError(f"no such directory: {folder!r}; create it first or choose another path for {path!r}")


def _check_renderer(name: str) -> None:
    if name not in RENDERERS:
        raise UsageError(f"this rngtrace has no {name} renderer (it has {', '.join(RENDERERS)}); upgrade rngtrace")


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are one line through main, not usage text and exit."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(message if ";" in message else f"{message}; see `{self.prog} --help`")


def _streams(text: str) -> frozenset:
    try:
        return validate_streams([name.strip() for name in text.split(",") if name.strip()])
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _on_draw(text: str) -> str:
    try:
        return validate_on_draw(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _whole(least: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"expected a whole number >= {least}, got {text!r}")
        return value

    parse.__name__ = f"whole number >= {least}"
    return parse


@functools.lru_cache(maxsize=1)  # built once per process: main() called in a loop (tests, tools) pays it once
def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=PROG, description="Find the code that draws from or reseeds your global random streams.")
    parser.add_argument("--version", action="version", version=f"{PROG} {__version__}")
    commands = parser.add_subparsers(
        title="commands", metavar="{run,show,diff,ranks,fix}", required=True, parser_class=_Parser
    )
    _add_run(commands)
    _add_show(commands)
    _add_diff(commands)
    ranks.add_parser(commands)
    fix.add_parser(commands)
    return parser


def _add_run(commands: Any) -> None:
    run = commands.add_parser(
        "run",
        help="run a script or module and print its draw log to stderr",
        usage=f"{PROG} run [options] script.py [args ...]\n       {PROG} run [options] -m module [args ...]",
        description="Run a Python script or module as __main__ with its global random streams traced. "
        "rngtrace's options go before the script or -m.",
    )
    run.add_argument(
        "--streams",
        type=_streams,
        default=None,
        metavar="random,numpy,torch",
        help="the streams to trace, comma-separated (default: all)",
    )
    run.add_argument("--depth", type=_whole(1), default=16, metavar="N", help="frames kept per event (default 16)")
    run.add_argument(
        "--max-events",
        type=_whole(0),
        default=100_000,
        metavar="N",
        help="events kept one by one; later ones are counted per call site (default 100000)",
    )
    run.add_argument(
        "--on-draw",
        type=_on_draw,
        default="log",
        metavar="warn|raise",
        help="warn: issue RNGDrawWarning at each draw; raise: raise GlobalRNGError before it",
    )
    run.add_argument("--json", metavar="PATH", help="save the log as JSON (read it with rngtrace show/diff)")
    run.add_argument("--html", metavar="PATH", help="save an HTML report")
    run.add_argument(
        "--log-dir",
        metavar="DIR",
        help="save the log in DIR as rank-N.json (pid-N.json with no rank): run every rank "
        "of a distributed job so, then compare them with rngtrace ranks DIR",
    )
    run.add_argument("--quiet", action="store_true", help="print no log")
    run.add_argument(
        "-m", dest="module", nargs=argparse.REMAINDER, metavar="module [args]", help="run a module as python -m does"
    )
    run.add_argument("target", nargs=argparse.REMAINDER, metavar="script.py [args]", help="the script to run")
    run.set_defaults(handler=run_command)


def _add_show(commands: Any) -> None:
    show = commands.add_parser("show", help="print a saved log", description="Print a log saved with --json.")
    show.add_argument("log", metavar="LOG", help="a log saved with rngtrace run --json or Trace.save()")
    show.add_argument("--html", metavar="PATH", help="write it as an HTML report instead")
    add_max_log_size(show)
    show.set_defaults(handler=show_command)


def _add_diff(commands: Any) -> None:
    diff = commands.add_parser(
        "diff",
        help="say where two saved runs' draws part",
        description="Compare two saved logs stream by stream and print where they first part. "
        "Exit status 0: they drew the same; 1: they differ.",
    )
    diff.add_argument("a", metavar="A", help="the first log")
    diff.add_argument("b", metavar="B", help="the second log")
    add_max_log_size(diff)
    diff.set_defaults(handler=diff_command)
