"""What a stack capture does with a code object, and the line an instruction is on: the hot path's leaves.

A frame is kept, hidden (rngtrace's, runpy's, a stand-in for its caller, torch's
``_disable_dynamo`` wrapper) or ends the stack (a traced program's runner, marked
with ``program_entry``); decided once per code object and table by ``code_kind``.
Line numbers are read from ``f_lasti`` when a trace is finished, never per draw.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from types import CodeType
from typing import TypeVar

from ._caller import is_stand_in
from ._hotpath import SPEEDUPS
from ._paths import is_hidden

# What a capture does with a frame, by its code object (decided once per code and table).
KEEP, HIDE, END = 0, 1, 2  # recorded; skipped (rngtrace's, runpy's); ends the stack (a program's runner)
# What a call-site form reads of a kept frame's code, in the bits above its kind: the user's file, a
# module's body, the import system's own code (what ``_yours.user_frame`` and ``import_of`` look at).
USER, MODULE, IMPORTING = 4, 8, 16
# id(code) -> code of every program_entry; holding the code keeps its id unique
_ENTRIES: dict[int, CodeType] = {}
_F = TypeVar("_F", bound=Callable)
_c_lineno_at = SPEEDUPS.lineno_at if SPEEDUPS is not None else None


def program_entry(func: _F) -> _F:
    """Mark ``func`` as the runner of a traced program: its frame and every frame outside it are never recorded."""
    _ENTRIES[id(func.__code__)] = func.__code__
    return func


def code_kind(code: CodeType) -> int:
    """What a capture does with a frame running ``code``: KEEP, HIDE or END."""
    if id(code) in _ENTRIES:
        return END
    # A stand-in carries its caller's file and line (see _caller): seen by name, it would be
    # the caller's line twice in a stack drawn from below it (a finalizer inside a shuffle).
    if _is_hidden_file(code.co_filename) or is_stand_in(code) or _is_disable_wrapper(code):
        return HIDE
    return KEEP


#: torch's ``_disable_dynamo`` decorator (torch/_compile.py's ``inner``, then Dynamo's ``_fn``): the
#: wrappers torch._dynamo puts around ``torch.manual_seed`` when it is imported, and libraries around
#: their own functions. Skipped like rngtrace's own frames, so that a seed is shown at the line that
#: called it (transformers' ``set_seed``), not inside the decorator. By qualified name: Dynamo's
#: compiled-code wrapper is also an ``_fn`` of that file, and marks compiled calls (3.10, with no
#: qualified names, skips only ``inner``).
_DISABLE_WRAPPERS = {
    ("torch/_compile.py", "_disable_dynamo.<locals>.inner"),
    ("torch/_dynamo/eval_frame.py", "DisableContext.__call__.<locals>._fn"),
}


def _is_disable_wrapper(code: CodeType) -> bool:
    if code.co_name not in ("inner", "_fn"):
        return False
    qualname = getattr(code, "co_qualname", "_disable_dynamo.<locals>.inner")
    filename = code.co_filename.replace("\\", "/")
    return any(filename.endswith(f) and qualname == q for f, q in _DISABLE_WRAPPERS)


# Cached for the process: every outermost trace starts a new table.
_is_hidden_file = functools.lru_cache(maxsize=4096)(is_hidden)


def lineno_at(code: CodeType, lasti: int) -> int:
    """The source line of the instruction at byte offset ``lasti``."""
    if _c_lineno_at is not None:
        line = _c_lineno_at(code, lasti)  # None: no line of its own there, found below
        if line is not None:
            return line
    return lineno_from_table(code, lasti)


def lineno_from_table(code: CodeType, lasti: int) -> int:
    """``lineno_at`` from ``co_lines()``: the reference, and what an instruction with no line gets."""
    line = code.co_firstlineno
    for start, end, lineno in code.co_lines():
        if start <= lasti < end:
            return lineno if lineno is not None else line
        if lineno is not None and start <= lasti:
            line = lineno
    return line


def qualname(code: CodeType) -> str:
    """``code``'s qualified name where the Python has one (3.11+), else its name."""
    return getattr(code, "co_qualname", code.co_name) if sys.version_info >= (3, 11) else code.co_name
