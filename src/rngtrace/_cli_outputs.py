"""What the command line writes, and the checks before it does: each failure one line on stderr.

An output file is checked before a long run, not after it (``check_output``); a
file that cannot be written, a stream that cannot print a character, a name
that was not UTF-8: each is said in one line, never a traceback.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from ._logfields import escape_surrogates
from ._paths import current_dir
from ._say import PROG, UsageError, say
from .render import RENDERERS, render
from .trace import Trace


def save(path: str, what: str, writer: Callable[[str], None], *, quiet: bool, given: str | None = None) -> bool:
    """Write one output file; say where (as the user ``given`` it), or say in one line why it could not be written."""
    shown = given or path
    try:
        writer(path)
    except (OSError, ValueError) as error:  # ValueError: an encoding error among them
        say(f"{PROG}: error: cannot write {shown!r} ({why(error)}); check the path")
        return False
    if not quiet:
        say(f"{PROG}: {what} saved to {printable_name(shown)}")
    return True


def why(error: BaseException) -> str:
    """An error in a few words: its strerror, or its type and first line."""
    strerror = getattr(error, "strerror", None)
    if strerror:
        return str(strerror)
    first = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {first[:200]}" if first else type(error).__name__


def write_html(trace: Trace, path: str) -> None:
    """Write ``trace``'s HTML report to ``path``."""
    html = render(trace, "html")
    # backslashreplace: a lone surrogate (a script name that is not UTF-8) shows as its escape, \\udcff.
    with open(path, "w", encoding="utf-8", errors="backslashreplace") as out:
        out.write(html)


def write(stream: Any, text: str) -> None:
    """Write ``text``; characters the stream's encoding lacks (an ASCII terminal) as backslash escapes."""
    try:
        stream.write(text)
    except UnicodeEncodeError:
        encoding = getattr(stream, "encoding", None) or "ascii"
        stream.write(text.encode(encoding, "backslashreplace").decode(encoding))


def printable_name(path: str) -> str:
    """A path as given, with bytes that were not UTF-8 (kept as surrogates) shown as ``\\xff``."""
    return path if path.isascii() else escape_surrogates(path)


def output_path(path: str | None) -> str | None:
    """``path`` made absolute, once it is checked to be writable."""
    check_output(path)
    return os.path.abspath(path) if path else path


def check_output(path: str | None) -> None:
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


def check_renderer(name: str) -> None:
    if name not in RENDERERS:
        raise UsageError(f"this rngtrace has no {name} renderer (it has {', '.join(RENDERERS)}); upgrade rngtrace")
