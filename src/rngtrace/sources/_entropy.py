"""Generators made from OS entropy: ``np.random.default_rng()``, ``random.Random()``, ``torch.Generator().seed()``.

Such a generator is no global stream, so its making is no draw and no seed: it is an
event of its own kind (``ENTROPY``) on its library's stream, which moves nothing the
fingerprints watch. Its wrapper is rare and not on the hot path: it records in Python.
What the standard library makes for itself (``tempfile``'s name sequence), or a package as it is
imported, is no event.
"""

from __future__ import annotations

import sys
from _thread import get_ident
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from .._caller import is_stand_in
from .._kinds import ENTROPY
from .._paths import PACKAGE_DIR, is_user_file, package_of
from ._wrapping import named

if TYPE_CHECKING:
    import ast

#: decides, from the call's arguments and the frame that called it, the (api, frame) of an event, or None: no event
Judge = Callable[[tuple, dict, FrameType], "tuple[str, FrameType] | None"]


#: rngtrace's functions between a recording wrapper and what it calls (the pure-Python path): passed through
_PASSING = frozenset({"rngtrace_wrapper", "call_as", "record_call", "checked_call", "call_busy"})


def caller(depth: int = 2) -> FrameType | None:
    """The frame that called the wrapper, past a recording wrapper in front; None: rngtrace's own code called."""
    try:
        frame: FrameType | None = sys._getframe(depth)
    except ValueError:
        return None
    while frame is not None and (
        is_stand_in(frame.f_code)
        or (frame.f_code.co_name in _PASSING and frame.f_code.co_filename.startswith(PACKAGE_DIR))
    ):
        frame = frame.f_back
    if frame is not None and frame.f_code.co_filename.startswith(PACKAGE_DIR):
        return None  # rngtrace reading a stream's layout makes a generator of its own: nobody's draw
    return frame


def entropy_wrapper(rec: Any, stream: str, original: Callable, judge: Judge) -> Callable:
    """``original``, recording an ``entropy`` event on ``stream`` where ``judge`` names one.

    A call inside another recorded call (``np.random.seed()`` drawing its entropy) is
    part of that call. The event is recorded after the call returns: one that raised
    made no generator.
    """
    hot = rec.hot

    def rngtrace_entropy(*args: Any, **kwargs: Any) -> Any:
        now = hot.now
        if not now.active:
            return original(*args, **kwargs)
        st = hot.states.get(get_ident()) or rec.state()
        frame = caller()
        if st.busy or frame is None:
            return original(*args, **kwargs)
        try:
            event = judge(args, kwargs, frame)
        except Exception:  # noqa: BLE001 (a call it cannot judge is the library's business, never a failure)
            event = None
        result = original(*args, **kwargs)
        if event is not None and not _for_itself(event[1]):
            rec.record(stream, ENTROPY, event[0], None, event[1], None, st)
        return result

    return named(rngtrace_entropy, original)


def _for_itself(frame: FrameType) -> bool:
    """Whether a library makes the generator for its own use: the standard library, or a package as it is
    imported (sympy's ``random.Random()`` in a module or class body), which no seed of the user's could reach."""
    if package_of(frame.f_code.co_filename) == "stdlib":
        return True
    f: FrameType | None = frame
    while f is not None and not is_user_file(f.f_code.co_filename):
        if f.f_code.co_name == "<module>":
            return True
        f = f.f_back
    return False


# -- naming the call a frame is making ---------------------------------------------------


def enclosing_calls(frame: FrameType) -> list[ast.Call]:
    """The calls of ``frame``'s source that enclose the one it is making now, outermost first.

    Python 3.11 and later say where the running instruction is (its positions); 3.10
    only its line, where every call on the line counts. Empty where the source is gone.
    """
    import ast  # in the functions that parse: a traced child's start imports neither ast nor linecache

    code = frame.f_code
    key = (id(code), frame.f_lasti, frame.f_lineno)
    cached = _CALLS.get(key)
    if cached is not None and cached[0] is code:
        return cached[1]  # a loop making generators: its line is parsed and searched once
    span = _span(code, frame.f_lasti) or (frame.f_lineno, frame.f_lineno, None, None)
    tree = _tree(code.co_filename, frame.f_globals)
    found: list[ast.Call] = []
    if tree is not None and span[0] is not None:
        found = [node for node in ast.walk(tree) if isinstance(node, ast.Call) and _encloses(node, span)]
        found.sort(key=lambda n: (n.lineno, n.col_offset, -(n.end_lineno or 0), -(n.end_col_offset or 0)))
    if len(_CALLS) > 1024:
        _CALLS.clear()
    _CALLS[key] = (code, found)  # the code held: its id names no other while cached
    return found


def _span(code: Any, lasti: int) -> tuple | None:
    positions = getattr(code, "co_positions", None)
    if positions is None or lasti < 0:
        return None
    try:
        return list(positions())[lasti // 2]
    except IndexError:
        return None


def _encloses(node: ast.Call, span: tuple) -> bool:
    line, end_line, col, end_col = span
    end_line = end_line or line
    if col is None or end_col is None:  # 3.10: a call on the running line
        return node.lineno <= line <= (node.end_lineno or node.lineno)
    start = (node.lineno, node.col_offset)
    end = (node.end_lineno or node.lineno, node.end_col_offset or 0)
    return start <= (line, col) and (end_line, end_col) <= end


_TREES: dict[str, tuple[list[str], ast.AST | None]] = {}
#: (id of a code, its instruction, its line) -> (the code, the calls enclosing that instruction)
_CALLS: dict[tuple[int, int, int], tuple[Any, list[ast.Call]]] = {}


def _tree(filename: str, module_globals: dict) -> ast.AST | None:
    """The parsed source of ``filename`` (cached while its lines stay the same), or None."""
    import ast
    import linecache

    lines = linecache.getlines(filename, module_globals)
    if not lines:
        return None
    cached = _TREES.get(filename)
    if cached is not None and cached[0] is lines:
        return cached[1]
    try:
        tree: ast.AST | None = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        tree = None
    if len(_TREES) > 256:
        _TREES.clear()
    _TREES[filename] = (lines, tree)
    return tree


#: what ``_value`` gives for an expression it does not evaluate
_UNKNOWN = object()


def callee(node: ast.Call, frame: FrameType) -> Any:
    """The object a call's name (``np.random.default_rng``) names in ``frame``, or None for any other expression."""
    found = _value(node.func, frame)
    return None if found is _UNKNOWN else found


def _value(node: ast.expr, frame: FrameType) -> Any:
    """A name's or an attribute chain's value in ``frame`` (no call is made), else ``_UNKNOWN``."""
    import ast

    if isinstance(node, ast.Name):
        for space in (frame.f_locals, frame.f_globals, frame.f_builtins):
            if node.id in space:
                return space[node.id]
        return _UNKNOWN
    if isinstance(node, ast.Attribute):
        parent = _value(node.value, frame)
        return _UNKNOWN if parent is _UNKNOWN else getattr(parent, node.attr, _UNKNOWN)
    return _UNKNOWN


def seed_given(node: ast.Call, frame: FrameType, keyword: str) -> bool:
    """Whether the call passes a seed: a first argument or ``keyword=`` that is not None."""
    import ast

    given = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == keyword), None)
    if given is None:
        return False
    if isinstance(given, ast.Constant):
        return given.value is not None
    # An expression it does not evaluate is taken as a seed: no line is blamed that did not draw.
    return _value(given, frame) is not None
