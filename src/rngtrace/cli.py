"""The command line: ``rngtrace run``, ``show``, ``diff`` and ``ranks``, parsed and dispatched.

``rngtrace run`` is ``_cli_run``'s, ``rngtrace ranks`` is ``ranks``'; ``show`` and
``diff`` are here. A mistake on the command line or an unreadable log is one
line on stderr and exit status 2, never a traceback; what is written goes
through ``_cli_outputs``, which says in one line what it could not write.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from . import check, fix, ranks
from ._cli_outputs import check_output, check_renderer, printable_name, save, write, write_html
from ._cli_run import run_command
from ._errors import LogError
from ._hub import validate_on_draw, validate_streams
from ._say import PROG, UsageError, add_max_log_size, wants_color
from ._version import __version__
from .diff import compare
from .render import render, render_diff
from .trace import Trace

_COMMANDS = ("run", "check", "show", "diff", "ranks", "fix")


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


# -- rngtrace show / diff ----------------------------------------------------------


def show_command(args: argparse.Namespace) -> int:
    """Print a saved log as text, or write it as an HTML report."""
    if args.html:
        check_output(args.html)
        check_renderer("html")
    trace = Trace.load(args.log, max_size=args.max_log_size)
    if args.html:
        return 0 if save(args.html, "HTML report", lambda path: write_html(trace, path), quiet=False) else 2
    write(sys.stdout, render(trace, "text", color=wants_color(sys.stdout)) + "\n")
    return 0


def diff_command(args: argparse.Namespace) -> int:
    """Print where two saved runs part; exit status 0 when they drew the same, 1 when not."""
    a = Trace.load(args.a, max_size=args.max_log_size)
    b = Trace.load(args.b, max_size=args.max_log_size)
    result = compare(a, b)
    names = (printable_name(args.a), printable_name(args.b))
    write(sys.stdout, render_diff(result, names=names, color=wants_color(sys.stdout)) + "\n")
    return 0 if result.same else 1


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
        title="commands", metavar="{run,check,show,diff,ranks,fix}", required=True, parser_class=_Parser
    )
    _add_run(commands)
    _add_show(commands)
    _add_diff(commands)
    check.add_parser(commands)
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
