"""Which line is the user's: decided here, once, for every finding, renderer, diff and report.

The user's line is the innermost frame of a stack in the user's own code
(``_paths.is_user_file``: not the standard library, not an installed package,
not rngtrace). ``call_of`` adds the call made there: the outermost library
frame, past generic wrappers and private base classes (``KMeans.fit``, not
``_BaseKMeans.fit_predict``). Where no frame is the user's, a headline names the
innermost frame (``line_to_name``): the call that drew. ``import_of`` tells the
module being imported when an event was made (its ``<module>`` frame, right
below the import system's), read from the stack alone.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ._callables import is_comprehension, public_owner, resolve
from ._model import Event, Frame
from ._paths import IMPORT_MACHINERY, is_user_file, package_of, short_path

#: how a library's generic call wrappers are named: the user-facing call is the frame below them
_WRAPPERS = frozenset(
    {
        "wrapper",
        "inner",
        "wrapped",
        "decorator",
        "_wrapper",
        "decorate_context",
        "_call_impl",
        "_wrapped_call_impl",
        "__call__",
    }
)


@dataclass(frozen=True)
class Import:
    """The import an event was made in: the module whose body was running."""

    #: the dotted name of the module being imported (``reseedlib.legacy``)
    module: str
    #: the position in the stack of that module's ``<module>`` frame
    index: int
    #: whether the module imported is one of the user's own files
    yours: bool


def import_of(stack: Sequence[Frame], outermost: bool = False) -> Import | None:
    """The module being imported when ``stack`` was recorded: the innermost one (or the outermost), or None.

    Its ``<module>`` frame is the one right inside the import system's own frames;
    a draw in a function that body called is made at its import too.
    """
    found = None
    for i in range(len(stack) - 1):
        frame = stack[i]
        if frame.function == "<module>" and stack[i + 1].filename.startswith(IMPORT_MACHINERY):
            found = Import(module_name(frame.filename), i, is_user_file(frame.filename))
            if not outermost:
                break
    return found


def library_import(event: Event) -> Import | None:
    """The library module being imported when ``event`` was made, or None (not at import, or the user's module)."""
    imported = import_of(event.stack)
    return imported if imported is not None and not imported.yours else None


def module_name(filename: str) -> str:
    """``reseedlib.legacy`` for ``.../site-packages/reseedlib/legacy.py``: a module's dotted name, from its file."""
    path = short_path(filename)
    if path.startswith("<stdlib>/"):
        path = path[len("<stdlib>/") :]
    elif os.path.isabs(path):  # the user's file outside the working directory: its own name
        path = os.path.basename(path)
    path = path.replace("\\", "/")
    for ending in ("/__init__.py", ".py"):
        if path.endswith(ending):
            path = path[: -len(ending)]
            break
    return path.replace("/", ".")


def is_yours(frame: Frame | None) -> bool:
    """Whether ``frame`` is a line of the user's own code."""
    return frame is not None and is_user_file(frame.filename)


def user_index(stack: Sequence[Frame]) -> int | None:
    """The position of the first (innermost) frame of ``stack`` in the user's own code, or None."""
    for i, frame in enumerate(stack):
        if is_user_file(frame.filename):
            return i
    return None


def user_frame(stack: Sequence[Frame]) -> Frame | None:
    """The first (innermost) frame of ``stack`` in the user's own code, or None."""
    i = user_index(stack)
    return stack[i] if i is not None else None


def line_to_name(event: Event) -> Frame | None:
    """The line a headline names for ``event``: the user's own, else the innermost recorded one."""
    return user_frame(event.stack) or event.frame


@dataclass(frozen=True)
class Call:
    """Where a draw entered other code: the user's line and the call it made there."""

    line: Frame  # the user's line that made the call
    callee: Frame | None  # the outermost library frame it called (None: the user's line drew itself)
    package: str | None  # the installed package called, or None for another of the user's files

    @property
    def name(self) -> str:
        """``train_test_split``, ``KMeans.fit``, ``Linear`` (a constructor), or the function drawn in."""
        frame = self.callee or self.line
        if self.callee is not None and self.callee.function == "<module>":  # a package drew as it was imported
            return f"the import of {self.package or short_path(self.callee.filename)}"
        parts = [p for p in frame.function.split(".") if p not in ("<locals>", "")] or [frame.function or "?"]
        if self.callee is not None and len(parts) == 1:  # Python 3.10 names no class: read it from the code
            found = resolve(self.callee)
            if found is not None and found[1] is not None:
                parts.insert(0, found[1].__name__)
        if parts[-1] == "__init__" and len(parts) > 1:
            return parts[-2]
        if self.callee is not None and len(parts) > 1 and parts[-2].startswith(("_", "Base")):
            public = public_owner(self.callee, self.line)  # the class the user built: GridSearchCV.fit
            if public:
                parts[-2] = public
            elif frame.function == parts[-1]:
                del parts[-2]  # a private class read from the code (3.10): the method alone, as before
        return ".".join(parts[-2:])


def call_of(stack: Sequence[Frame]) -> Call | None:
    """The user's line an event came from and the library call made there; None without a user frame."""
    u = user_index(stack)
    if u is None:
        return None
    if u == 0:
        return Call(stack[0], None, None)
    return call_at(stack, u)


def call_at(stack: Sequence[Frame], k: int) -> Call:
    """The call made at ``stack[k]`` (k > 0) into the frames inside it."""
    callee = _callee(stack[:k])
    return Call(stack[k], callee, package_of(callee.filename))


def _callee(inside: Sequence[Frame]) -> Frame:
    """The user-facing call among the frames a user's line called into (innermost first, not empty)."""
    # Outermost first: the first frame that is not a generic wrapper; where that is a private base
    # class's method (_BaseKMeans.fit_predict), the public class's method it calls names the call better.
    frames = [
        f
        for f in reversed(inside)
        if f.function.rsplit(".", 1)[-1] not in _WRAPPERS
        and not is_comprehension(f)  # fit.<listcomp> is no call a user wrote
        and not f.filename.startswith(IMPORT_MACHINERY)
    ] or [inside[-1]]
    callee = frames[0]
    if _private_owner(callee):
        package = package_of(callee.filename)
        callee = next(
            (
                f
                for f in frames[1:]
                if "." in f.function
                and not _private_owner(f)
                and not f.function.rsplit(".", 1)[-1].startswith("_")  # GridSearchCV._run_search: no user's call
                and package_of(f.filename) == package
            ),
            callee,
        )
    return callee


def _private_owner(frame: Frame) -> bool:
    """Whether ``frame`` is a method of a class the user does not name (``_BaseKMeans``, ``BaseShuffleSplit``)."""
    parts = [p for p in frame.function.split(".") if p != "<locals>"]
    return len(parts) > 1 and parts[-2].startswith(("_", "Base"))
