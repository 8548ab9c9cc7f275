"""Spawned and forkserver children: a target that starts the child's own trace before it runs.

A child that does not fork from here (``multiprocessing`` with spawn or forkserver)
is a fresh interpreter: no fork handler reaches it. While a trace records,
``BaseProcess.start`` (hooked by ``_hooks.ProcessHooks``) hands the child a
``SpawnedTarget`` in place of its target, which starts a trace of the child's own,
spooled like a forked child's, before it calls the target.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any


class SpawnedTarget:
    """A ``multiprocessing`` process's target, wrapped for a child that does not fork from here.

    Spawn and forkserver start a fresh interpreter that unpickles the process object:
    this object travels in it instead of the target, and in the child starts a trace
    of the child's own (spooled like a forked child's) before calling the target.
    Only the process object sent to the child holds it: the parent's keeps its target.
    """

    def __init__(self, target: Any, file: str, spec: tuple, start: str, begin: Callable[[Any], None]) -> None:
        self.target = target
        #: the hub's function that starts the child's trace: a module-level function, pickled by
        #: name, so that unpickling this object in the child imports the hub that runs it
        self.begin = begin
        #: (streams, depth, max_events, tags) of the child's trace: ``child_spec``
        self.file, self.spec, self.start = file, spec, start

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            self.begin(self)
        except Exception:  # noqa: BLE001 (a child the tracer cannot follow runs untraced)
            try:
                os.remove(self.file)  # the parent need not wait for it
            except OSError:
                pass
        return self.target(*args, **kwargs)


def child_spec(sessions: tuple) -> tuple[tuple[str, ...], int, int, tuple[int, ...]]:
    """(streams, depth, max_events, tags) of a child's trace: what every one of ``sessions`` records."""
    streams = frozenset().union(*(s.streams for s in sessions))
    return (
        tuple(sorted(streams)),
        max(s.trace.depth for s in sessions),
        max(s.trace.max_events for s in sessions),
        tuple(sorted({t for s in sessions for t in s.tags})),
    )


def start_method(process: Any) -> str | None:
    """How ``process`` (a multiprocessing BaseProcess) will start: fork, spawn or forkserver."""
    method = getattr(process, "_start_method", None)
    if method:
        return str(method)
    try:  # a plain Process: the default context's, without fixing it (get_start_method() would)
        import multiprocessing.context as context

        default = context._default_context
        return str((default._actual_context or default._default_context)._name)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return None
