"""Cheap stack capture and interning: the hot path.

A captured stack is a flat tuple ``(id(code), f_lasti, ...)``, innermost
first, interned to a small int; the table holds the code objects. Reading ``f_lineno`` is costly on 3.11+, so line
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
        # id(code) -> (code, is it rngtrace's own); holding the code keeps its id unique
        self._codes: dict[int, tuple[CodeType, bool]] = {}
        self._lines: dict[tuple[CodeType, int], int] = {}

    def capture(self, frame: FrameType | None, depth: int) -> int:
        """Intern the stack starting at ``frame`` (innermost), rngtrace frames left out."""
        codes = self._codes
        key: list[int] = []
        f = frame
        limit = 2 * depth
        # Keys are ints (code id, offset): hashing a code object hashes its bytecode.
        while f is not None and len(key) < limit:
            code = f.f_code
            entry = codes.get(id(code))
            if entry is None:
                entry = codes[id(code)] = (code, _is_own(code))
            if not entry[1]:
                key.append(id(code))
                key.append(f.f_lasti)
            f = f.f_back
        frozen = tuple(key)
        sid = self._ids.get(frozen)
        if sid is None:
            sid = self._ids[frozen] = len(self._stacks)
            self._stacks.append(frozen)
        return sid

    def resolve(self, sid: int, depth: int) -> tuple[Frame, ...]:
        """Turn an interned stack into Frames, at most ``depth`` of them."""
        key = self._stacks[sid]
        frames = []
        for i in range(0, min(len(key), 2 * depth), 2):
            code = self._codes[key[i]][0]
            frames.append(Frame(code.co_filename, self._lineno(code, key[i + 1]), _qualname(code)))
        return tuple(frames)

    def _lineno(self, code: CodeType, lasti: int) -> int:
        key = (code, lasti)
        line = self._lines.get(key)
        if line is None:
            line = self._lines[key] = lineno_at(code, lasti)
        return line

    def clear(self) -> None:
        self._ids.clear()
        self._stacks.clear()
        self._codes.clear()
        self._lines.clear()


def _is_own(code: CodeType) -> bool:
    return os.path.abspath(code.co_filename).startswith(_PACKAGE_DIR)


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
