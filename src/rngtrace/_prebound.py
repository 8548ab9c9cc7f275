"""References to a stream's originals bound before tracing began: found and noted in the log.

``from numpy.random import rand`` run before the trace began binds the original,
which no patch reaches (without the C accelerator; with it that bound method
records in place): where it drew, the move is unattributed. ``rngtrace run``
imports the program inside the trace, where the same line binds rngtrace's
recorder, so it would have attributed the call; the log says so.
"""

from __future__ import annotations

import functools
import os
import weakref
from types import BuiltinMethodType, FrameType, MethodType
from typing import Any

from ._paths import is_user_file


class PreboundNotes:
    """What each trace has searched already, and the notes it adds."""

    def __init__(self) -> None:
        #: id of a trace -> (a weak reference to it, the (stream, id of a module namespace) already searched
        #: for references bound before it); not a WeakKeyDictionary, whose callback is Python (_searched_by)
        self._searched: dict[int, tuple[weakref.ref, set]] = {}

    def note(self, source: Any, base: str, frame: FrameType | None, depth: int, traces: list) -> None:
        """Note in ``traces`` each module on the stack that holds one of ``source``'s originals.

        Only the modules of the noticing call's frames are searched (the call through the
        reference was most likely made from one of them): a few dicts, on a path that is
        already slow.
        """
        if source is None or frame is None or not traces:
            return
        # A module is searched once per trace: a loop's thousand moves cost one search.
        searched = [self._searched_by(trace) for trace in traces]
        try:
            found = prebound(source, base, frame, depth, searched)
        except Exception:  # noqa: BLE001 (a user's odd global must never fail the draw that noticed it)
            return
        for filename, name, api in found:
            note = (
                f"{os.path.basename(filename)} binds `{name}` to {api} before tracing began, out of the patches' "
                "reach: a move made through it is unattributed here, and `rngtrace run` would have attributed it"
            )
            for trace in traces:
                if note not in trace.notes:
                    trace.notes.append(note)

    def _searched_by(self, trace: Any) -> set:
        """What was searched already for ``trace``: forgotten by a C callback when the trace goes.

        A Python callback (a WeakKeyDictionary's) runs wherever the trace happens to be freed,
        and a Ctrl-C landing in it would be printed and lost.
        """
        key = id(trace)
        entry = self._searched.get(key)
        if entry is None or entry[0]() is not trace:
            entry = (weakref.ref(trace, functools.partial(self._searched.pop, key)), set())
            self._searched[key] = entry
        return entry[1]


def prebound(source: Any, base: str, frame: FrameType, depth: int, searched: list[set]) -> list[tuple[str, str, str]]:
    """(filename, global name, api) for each original of ``source`` a user module on the stack holds.

    A module namespace already in every set of ``searched`` is skipped; one searched
    now is added to them all.
    """
    namespaces = []
    f: FrameType | None = frame
    for _ in range(max(depth, 1)):
        if f is None:
            break
        key = (base, id(f.f_globals))
        if not all(key in done for done in searched):
            for done in searched:
                done.add(key)
            # `rngtrace run` reaches files the program imports, not a notebook's cells or <stdin>.
            filename = f.f_code.co_filename
            if not filename.startswith("<") and is_user_file(filename):
                namespaces.append((filename, f.f_globals))
        f = f.f_back
    if not namespaces:
        return []
    owners = {id(owner) for owner in source.owners()}
    functions = {id(function) for function in source.functions()}
    found = []
    for filename, namespace in namespaces:
        for name, value in list(namespace.items()):
            if id(value) not in functions and not (
                value.__class__ in (MethodType, BuiltinMethodType) and id(value.__self__) in owners
            ):
                continue
            if hasattr(value, "__wrapped__"):
                continue  # rngtrace's own recorder, bound to the singleton during the trace
            hit = source.classify(value, None, False)
            if hit.__class__ is tuple:  # a draw or a seed (reading the state, say, is no move)
                found.append((filename, name, hit[2]))
    return found
