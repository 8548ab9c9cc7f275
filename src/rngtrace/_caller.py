"""Calling an original from a Python wrapper as if its caller called it.

A Python recording wrapper is a frame between the user's line and the
function it stands for. Warnings find their place by counting frames
(``stacklevel``): NumPy's C code warns at level 1, ``random.randrange`` at
level 2, so under a Python wrapper a warning would name rngtrace's file and
module, fall outside a module-based filter, and go into rngtrace's
``__warningregistry__`` instead of the caller's.

So the wrapper makes the call through a one-line trampoline whose code object
carries the caller's file name, function name and current line, run with the
caller's globals: to the warnings machinery, the frame that calls the original
*is* the caller's line. One trampoline is made per call site and reused; the
table of them is bounded.
"""

from __future__ import annotations

from collections.abc import Callable
from types import CodeType, FrameType, FunctionType
from typing import Any

# All its instructions sit on its first line, so moving co_firstlineno moves every one of them. A lambda's
# code, not compile()'s: compiling source at import cost a traced child's start ~0.7 ms.
_TEMPLATE: CodeType = (lambda original, args, kwargs: original(*args, **kwargs)).__code__.replace(
    co_filename="<rngtrace>", co_firstlineno=1, co_name="call"
)
#: (id of the caller's code, line) -> (that code, a trampoline made for that line). Keyed by
#: id, the code kept in the value to check it: torch.compile guards on what it reads here, and
#: cannot write a guard whose key is a code object.
_MADE: dict[tuple[int, int], tuple[CodeType, FunctionType]] = {}
#: call sites kept before the table starts afresh (a trampoline is a few hundred bytes)
LIMIT = 4096


def call_as(frame: FrameType | None, original: Callable, args: tuple, kwargs: dict) -> Any:
    """``original(*args, **kwargs)``, made so that a warning it raises points at ``frame``'s line."""
    if frame is None:  # called by C code with no Python frame above it: nobody to stand in for
        return original(*args, **kwargs)
    code = frame.f_code
    key = (id(code), frame.f_lineno)
    made = _MADE.get(key)
    if made is None or made[0] is not code or made[1].__globals__ is not frame.f_globals:
        made = (code, _make(code, key[1], frame.f_globals))
        if len(_MADE) >= LIMIT:
            _MADE.clear()
        _MADE[key] = made
    trampoline = made[1]
    try:
        return trampoline(original, args, kwargs)
    except BaseException as error:
        # The stand-in has done its job: a traceback shows the caller's line once, not twice.
        here = error.__traceback__
        below = here.tb_next if here is not None else None
        if below is not None and below.tb_frame.f_code is trampoline.__code__:
            here.tb_next = below.tb_next  # type: ignore[union-attr]
        raise


def is_stand_in(code: CodeType) -> bool:
    """Whether ``code`` is one of the trampolines (C code called from inside one is calling back)."""
    return code.co_varnames == _TEMPLATE.co_varnames and code.co_code == _TEMPLATE.co_code


def _make(code: CodeType, line: int | None, globals_: dict) -> FunctionType:
    changes: dict[str, Any] = {"co_filename": code.co_filename, "co_name": code.co_name}
    if line is not None and line > 0:
        changes["co_firstlineno"] = line
    if hasattr(code, "co_qualname"):  # 3.11+
        changes["co_qualname"] = code.co_qualname
    # The caller's globals: its module's __name__ (warning filters) and __warningregistry__.
    return FunctionType(_TEMPLATE.replace(**changes), globals_, "rngtrace_call")
