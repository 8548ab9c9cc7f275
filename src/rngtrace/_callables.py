"""What a library frame ran, and where the user built the object it ran on: read, never guessed.

A fix that proposes an argument (``random_state=0``) must name a call that takes
it. A recorded frame is a file, a line and a function's name; this module turns
it back into the real function (importing the module only for the libraries
whose seeding argument a fix proposes, ``ARGUMENT``), reads its signature, and
finds in the user's own file the line that built an instance of its class
(``RandomForestClassifier(n_estimators=10)`` at ``grid.py:7``). Anything it
cannot resolve is None: the caller then proposes no argument.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ._model import Frame
from ._paths import is_user_file, package_tail

#: the argument that makes a library call draw from its own generator, by package
ARGUMENT = {"sklearn": "random_state", "scipy": "random_state"}
#: a user's file read for where they built an object: larger ones are not read
_MAX_SOURCE = 2_000_000
#: how long the user's call may be to be shown with the argument added; longer ones are shown as ``Name(...)``
_SHOWN_CALL = 72
_COMPREHENSIONS = ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>", "<lambda>")


def is_comprehension(frame: Frame) -> bool:
    """Whether ``frame`` is a comprehension or lambda inside a function: no call a user wrote."""
    return frame.function.rsplit(".", 1)[-1] in _COMPREHENSIONS


# -- from a frame to the function that ran ------------------------------------------------


def module_of(frame: Frame) -> Any | None:
    """The loaded module of a library frame: imported only for a package in ``ARGUMENT``; else None."""
    tail = package_tail(frame.filename)
    if tail is None or not tail.endswith(".py"):
        return None
    parts = tail[:-3].replace("\\", "/").split("/")
    if parts[-1] == "__init__":
        parts.pop()
    if not parts or not all(part.isidentifier() for part in parts):
        return None
    name = ".".join(parts)
    module = sys.modules.get(name)
    if module is None and parts[0] in ARGUMENT:
        try:
            module = importlib.import_module(name)
        except Exception:  # an environment without it, or a module that fails to import here
            return None
    return module


@functools.lru_cache(maxsize=4096)
def resolve(frame: Frame) -> tuple[Any, type | None] | None:
    """(the function that ran ``frame``, the class it is a method of or None), or None where unknown."""
    module = module_of(frame)
    if module is None:
        return None
    parts = frame.function.split(".")
    if "<locals>" in parts or not all(part.isidentifier() for part in parts):
        return None  # nested code: no attribute path reaches it
    if len(parts) == 1:  # Python 3.10 names no class (no co_qualname): find the method by its lines
        return _by_line(module, frame)
    owner: Any = module
    for part in parts[:-1]:
        owner = getattr(owner, part, None)
        if not isinstance(owner, type):
            return None
    function = inspect.getattr_static(owner, parts[-1], None) if len(parts) > 1 else getattr(module, parts[0], None)
    function = getattr(function, "__func__", function)  # a staticmethod or classmethod
    if not callable(function) or not _ran(function, frame):
        return None
    return function, owner


def _by_line(module: Any, frame: Frame) -> tuple[Any, type | None] | None:
    """A module-level function or a method of a class defined in ``module`` whose code holds ``frame``'s line."""
    name = frame.function
    function = vars(module).get(name)
    if callable(function) and not isinstance(function, type) and _ran(function, frame):
        return function, None
    for owner in vars(module).values():
        if isinstance(owner, type) and owner.__module__ == module.__name__:
            method = vars(owner).get(name)
            method = getattr(method, "__func__", method)
            if callable(method) and _ran(method, frame):
                return method, owner
    return None


def _ran(function: Any, frame: Frame) -> bool:
    """Whether ``frame`` is a line of ``function``'s own code (a decorator's wrapper is looked through)."""
    code = getattr(inspect.unwrap(function), "__code__", None)
    if code is None or os.path.normcase(code.co_filename) != os.path.normcase(frame.filename):
        return False
    lines = [line for _start, _end, line in code.co_lines() if line is not None]
    return bool(lines) and code.co_firstlineno <= frame.lineno <= max(lines)


def takes(function: Any, argument: str) -> bool:
    """Whether ``function`` (or a class's constructor) takes ``argument``, by name or documented beside ``**kwargs``."""
    try:
        parameters = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False
    found = parameters.get(argument)
    if found is not None:
        return found.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        # scipy's rvs(*args, **kwds): the signature hides it, its reference lists it as a parameter
        doc = inspect.getdoc(function) or ""
        return re.search(rf"^{re.escape(argument)}\s*:", doc, re.M) is not None
    return False


def subclasses(cls: type) -> Iterator[type]:
    """``cls`` and every class derived from it that is loaded, each once."""
    seen: set[type] = set()
    stack = [cls]
    while stack:
        c = stack.pop()
        if c in seen:
            continue
        seen.add(c)
        yield c
        try:
            stack.extend(c.__subclasses__())
        except TypeError:  # type.__subclasses__ needs an argument
            pass


# -- where the user built an object ---------------------------------------------------------


@dataclass(frozen=True)
class Built:
    """A call in the user's file that built an instance of a library class."""

    cls: type
    filename: str
    lineno: int
    #: the call as the user wrote it (one line, not too long), or "" where it is not shown
    text: str
    #: (name, start, end) in ``text`` of each keyword the call gives
    keywords: tuple[tuple[str, int, int], ...] = ()

    def with_argument(self, argument: str, value: str = "0") -> str:
        """``RandomForestClassifier(n_estimators=10, random_state=0)``: the user's call, seeded."""
        if not self.text:
            return f"{self.cls.__name__}(..., {argument}={value})"
        for name, start, end in self.keywords:
            if name == argument:  # random_state=None given: its value is replaced
                return self.text[:start] + f"{argument}={value}" + self.text[end:]
        inside = self.text[self.text.index("(") + 1 : -1].strip()
        sep = ", " if inside and not inside.endswith(",") else ""
        return self.text[:-1].rstrip() + f"{sep}{argument}={value})"


def built_before(frame: Frame, classes: list[type]) -> Built | None:
    """Where the user's file of ``frame`` builds one of ``classes``: the nearest call at or above ``frame``'s line,
    else the first below; None where it builds none, or the file cannot be read."""
    if not is_user_file(frame.filename):
        return None
    by_name: dict[str, type] = {}
    for c in classes:
        by_name.setdefault(c.__name__, c)  # the first of a name wins: the class itself before its subclasses
    found = [c for c in _calls(frame.filename) if c[0] in by_name]
    if not found:
        return None
    above = [c for c in found if c[1] <= frame.lineno]
    name, lineno, text, keywords = above[-1] if above else found[0]
    return Built(by_name[name], frame.filename, lineno, text, keywords)


Call = tuple[str, int, str, tuple[tuple[str, int, int], ...]]


@functools.lru_cache(maxsize=64)
def _calls_cached(filename: str, mtime: float) -> tuple[Call, ...]:
    try:
        if os.path.getsize(filename) > _MAX_SOURCE:
            return ()
        with open(filename, encoding="utf-8") as f:
            source = f.read()
        tree = ast.parse(source)
    except (OSError, ValueError, SyntaxError):
        return ()
    lines = source.splitlines()
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
        if name is None or not name[:1].isupper():
            continue  # a class is built by its name: RandomForestClassifier, not fit
        out.append((name, node.lineno, *_shown(node, lines)))
    out.sort(key=lambda c: c[1])
    return tuple(out)


def _calls(filename: str) -> tuple[Call, ...]:
    """(name, line, shown text, its keywords) of each call of a capitalised name in ``filename``, by line."""
    try:
        mtime = os.path.getmtime(filename)
    except OSError:
        return ()
    return _calls_cached(filename, mtime)


def _shown(node: ast.Call, lines: list[str]) -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """The call's text where it is one short line without ``**``, and its keywords' places in it."""
    end_col = node.end_col_offset
    if node.end_lineno != node.lineno or end_col is None or any(k.arg is None for k in node.keywords):
        return "", ()
    raw = lines[node.lineno - 1].encode("utf-8")  # ast's columns count UTF-8 bytes

    def chars(byte: int) -> int:
        return len(raw[node.col_offset : byte].decode("utf-8", "replace"))

    text = raw[node.col_offset : end_col].decode("utf-8", "replace")
    if len(text) > _SHOWN_CALL or not text.endswith(")"):
        return "", ()
    return text, tuple((k.arg or "", chars(k.col_offset), chars(k.end_col_offset or 0)) for k in node.keywords)


@functools.lru_cache(maxsize=1024)
def public_owner(method: Frame, line: Frame) -> str | None:
    """The class the user built at or above ``line`` whose ``method`` ran: ``GridSearchCV`` for ``BaseSearchCV.fit``."""
    found = resolve(method)
    if found is None or found[1] is None:
        return None
    built = built_before(line, [c for c in subclasses(found[1]) if not c.__name__.startswith(("_", "Base"))])
    return built.cls.__name__ if built is not None else None
