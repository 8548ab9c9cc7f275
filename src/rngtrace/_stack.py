"""Cheap stack capture and interning: the hot path.

A captured stack is a tuple of ``(code, f_lasti)`` pairs, innermost first,
interned to a small int. Reading ``f_lineno`` is costly on 3.11+, so line
numbers are computed from ``f_lasti`` only when a trace is finished.
"""

from __future__ import annotations

import os
import sys
from types import CodeType, FrameType

from .trace import Frame

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


class StackTable:
    """Interns captured stacks; one table serves every active trace."""

    def __init__(self) -> None:
        self._ids: dict[tuple, int] = {}
        self._stacks: list[tuple] = []
        self._own: dict[str, bool] = {}  # co_filename -> is it rngtrace's own file
        self._lines: dict[tuple[CodeType, int], int] = {}

    def capture(self, frame: FrameType | None, depth: int) -> int:
        """Intern the stack starting at ``frame`` (innermost), rngtrace frames left out."""
        own = self._own
        out = []
        f = frame
        while f is not None and len(out) < depth:
            code = f.f_code
            filename = code.co_filename
            is_own = own.get(filename)
            if is_own is None:
                is_own = own[filename] = os.path.abspath(filename).startswith(_PACKAGE_DIR)
            if not is_own:
                out.append((code, f.f_lasti))
            f = f.f_back
        key = tuple(out)
        sid = self._ids.get(key)
        if sid is None:
            sid = self._ids[key] = len(self._stacks)
            self._stacks.append(key)
        return sid

    def resolve(self, sid: int, depth: int) -> tuple[Frame, ...]:
        """Turn an interned stack into Frames, at most ``depth`` of them."""
        return tuple(
            Frame(code.co_filename, self._lineno(code, lasti), _qualname(code))
            for code, lasti in self._stacks[sid][:depth]
        )

    def _lineno(self, code: CodeType, lasti: int) -> int:
        key = (code, lasti)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = lineno_at(code, lasti)
        return line

    def clear(self) -> None:
        self._ids.clear()
        self._stacks.clear()
        self._lines.clear()


def lineno_at(code: CodeType, lasti: int) -> int:
    """The source line of the instruction at byte offset ``lasti``."""
    line = code.co_firstlineno
    for start, end, lineno in code.co_lines():
        if start <= lasti < end:
            return lineno if lineno is not None else line
        if lineno is not None and start <= lasti:
            line = lineno
    return line


def _qualname(code: CodeType) -> str:
    return getattr(code, "co_qualname", code.co_name) if sys.version_info >= (3, 11) else code.co_name
