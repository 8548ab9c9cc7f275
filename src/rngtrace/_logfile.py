"""Reading a saved log's file: bounded, streamed, then every field checked against docs/log-format.md.

A log is untrusted input (people attach them to bug reports), so reading one
must end in a Trace or in one line that says what is wrong: never a traceback,
never unbounded memory. The file is refused before it is read when it is not a
regular file or is larger than the limit; a log in the writer's layout is read
a block of lines at a time, never held whole, and any other text is read whole;
the big arrays (``events``, ``overflow``) are parsed one row at a time into
compact tuples with shared strings, so the parsed rows are never held twice; then every field is checked
in the documented order and the first bad one is named. Parsing is ``_logjson``'s,
checking the fields ``_logfields``'.
"""

from __future__ import annotations

import itertools
import json
import os
import stat
from collections.abc import Iterator
from typing import Any

from ._errors import LogError
from ._logfields import LogDamage
from ._logjson import NotLines, parse, parse_lines

#: the largest log read unless the caller raises it (Trace.load(max_size=...), --max-log-size)
MAX_LOG_SIZE = 256 * 2**20
PASS_A_LOG = "pass a file written by `rngtrace run --json` or Trace.save()"
#: how much of a log is read at a time when it is read line by line
_BLOCK = 1 << 20


# -- reading the file ------------------------------------------------------------


def size_words(size: int) -> str:
    """``256 MiB``, ``1.5 GiB``, ``12 KiB``, ``900 bytes``: a size as a reader says it."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


def read(path: str | os.PathLike[str], name: str, max_size: int) -> Any:
    """The parsed JSON of ``path`` (its ``events`` and ``overflow`` rows as tuples), or a LogError.

    Only a regular file is read, and at most ``max_size`` bytes of it: a device
    (``/dev/zero``), a FIFO or a directory is refused before anything is read. A log
    in the writer's layout is read line by line (``parse_lines``), never held whole;
    any other text, or any error, is read whole and parsed again, to say what is wrong.
    """
    fd = _open(path, name, max_size)
    try:
        with open(fd, "rb", buffering=0, closefd=False) as src:
            try:
                return parse_lines(itertools.chain.from_iterable(_lines(src, name, max_size)))
            except NotLines:
                src.seek(0)
            text = _read_text(src, name, max_size)
    except OSError as exc:
        raise LogError(f"cannot read {name} ({exc.strerror}); check its permissions") from None
    finally:
        os.close(fd)
    if not text.strip():
        raise LogError(f"{name} is empty; record the log again")
    try:
        return parse(text)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        if text.lstrip().startswith("{") and '"rngtrace"' in text[:200]:
            raise LogError(f"{name} is a truncated or damaged rngtrace log ({where}); record it again") from None
        raise LogError(f"{name} is not JSON ({where}); {PASS_A_LOG}") from None
    except LogDamage as exc:
        if not text.lstrip().startswith("{"):  # a deep list, say: JSON perhaps, but no rngtrace log
            raise LogError(f"{name} is not an rngtrace log (no \"format\": \"rngtrace\"); {PASS_A_LOG}") from None
        raise LogError(f"{name} is a truncated or damaged rngtrace log ({exc}); record it again") from None


def _open(path: str | os.PathLike[str], name: str, max_size: int) -> int:
    """A descriptor of ``path`` opened for reading, once it is known to be a regular file of at most ``max_size``."""
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused right after.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LogError(f"no such file: {name}; check the path") from None
    except IsADirectoryError:
        raise LogError(f"{name} is a directory; {PASS_A_LOG}") from None
    except OSError as exc:
        if os.path.isdir(path):  # Windows cannot open a directory at all
            raise LogError(f"{name} is a directory; {PASS_A_LOG}") from None
        raise LogError(f"cannot read {name} ({exc.strerror}); check its permissions") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise LogError(f"{name} is a directory; {PASS_A_LOG}")
        if not stat.S_ISREG(info.st_mode):
            raise LogError(f"{name} is {_file_kind(info.st_mode)}, not a regular file; {PASS_A_LOG}")
        if info.st_size > max_size:
            raise LogError(_too_big(name, f"is {size_words(info.st_size)}", max_size, info.st_size))
    except OSError as exc:
        os.close(fd)
        raise LogError(f"cannot read {name} ({exc.strerror}); check its permissions") from None
    except BaseException:
        os.close(fd)
        raise
    return fd


def _lines(src: Any, name: str, max_size: int) -> Iterator[list[bytes]]:
    """``src``'s lines (without their newlines), a block's worth at a time; never more than ``max_size`` bytes read."""
    total = 0
    rest = b""
    while True:
        block = src.read(_BLOCK)
        if not block:
            break
        total += len(block)
        if total > max_size:
            raise LogError(_too_big(name, "has grown", max_size, max_size + 1))
        lines = (rest + block).split(b"\n")
        rest = lines.pop()
        yield lines
    if rest:
        yield [rest]


def _read_text(src: Any, name: str, max_size: int) -> str:
    data = _read_at_most(src, max_size + 1, os.fstat(src.fileno()).st_size)
    if len(data) > max_size:
        raise LogError(_too_big(name, "has grown", max_size, len(data)))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(f"{name} is not JSON (not UTF-8 text); {PASS_A_LOG}") from None


def _read_at_most(src: Any, limit: int, expected: int) -> bytes:
    """Up to ``limit`` bytes of ``src``: what fstat said it holds first (read(n) allocates n bytes at once),
    then in chunks, for a file that grew since or does not know its size (/proc)."""
    chunks = []
    total = 0
    want = min(expected + 1, limit)
    while total < limit:
        chunk = src.read(want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = min(1 << 20, limit - total)
    return b"".join(chunks)


def _too_big(name: str, what: str, limit: int, size: int) -> str:
    need = f"{-(-size // 2**20)}M"  # the size rounded up to a whole MiB: a limit that reads this file
    return (
        f"{name} {what}, more than the {size_words(limit)} a log may have; to read it, raise the limit: "
        f"rngtrace show/diff --max-log-size {need}, or Trace.load(path, max_size=...)"
    )


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "not a file")
