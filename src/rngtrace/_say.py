"""What the command-line faces share: the program's name, its one-line messages and usage errors, colour, sizes."""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Any

from ._logfile import MAX_LOG_SIZE, size_words

PROG = "rngtrace"


class UsageError(Exception):
    """A mistake on the command line, said in one line; exit status 2."""


def say(line: str) -> None:
    """Write ``line`` to stderr; say nothing where the program closed it."""
    try:
        print(line, file=sys.stderr, flush=True)
    except (OSError, ValueError):  # the program closed stderr: nothing more can be said
        pass


def wants_color(out: Any) -> bool:
    """Whether ``out`` is a terminal that takes colour (``NO_COLOR`` turns it off)."""
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def size(text: str) -> int:
    """A size in bytes from ``300M``, ``2G``, ``1.5GiB``, ``4096``; --max-log-size's type."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?\s*", text, re.IGNORECASE)
    if match is None or float(match.group(1)) <= 0:
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 2G, got {text!r}")
    return int(float(match.group(1)) * 1024 ** " kmg".index(match.group(2).lower() or " "))


def add_max_log_size(command: Any) -> None:
    """The ``--max-log-size`` option every command that reads a log takes."""
    command.add_argument(
        "--max-log-size",
        type=size,
        default=MAX_LOG_SIZE,
        metavar="SIZE",
        help=f"refuse a log larger than this (default {size_words(MAX_LOG_SIZE)}; e.g. 1G to read a bigger one)",
    )
