"""The catch-all's common part: which stream a callee belongs to, and recording what a hook saw.

A catch-all sees calls to a stream through references the patches miss
(``from numpy.random import rand`` at import, ``r = random.random``, the singleton
scikit-learn hands out from ``check_random_state(None)``). The hooks themselves
live in ``_catchall_monitoring`` (3.12+) and ``_catchall_profile`` (3.10/3.11);
``_catchall`` picks one.
"""

from __future__ import annotations

from collections.abc import Callable
from types import FrameType
from typing import Any

from ._hotpath import SPEEDUPS as _speedups
from ._paths import PACKAGE_DIR as _PACKAGE_DIR
from .sources._base import INTERNAL

OURS = object()  # lookup marker: one of rngtrace's own recording wrappers
# (key, (by_id, keep types, refs)) of the last table built: most traces reuse it
_LAST: tuple | None = None


def shielded(callback: Callable, main_thread: int | None) -> Callable:
    """``callback``, made never to raise into the call it reports (``_speedups.Shielded``).

    A Ctrl-C landing in a monitoring callback would otherwise skip the program's next call,
    a ``with`` statement's ``__exit__`` among them, and leave its lock held. Without the
    accelerator this protection is missing: a Python wrapper would itself be a place for the
    interrupt to land.
    """
    if _speedups is None or main_thread is None:
        return callback
    return _speedups.Shielded(callback, main_thread)


def own_failure(error: Exception) -> bool:
    """Whether a callback's ``error`` is its own, not one a signal handler raised while it ran.

    A callback never raises its own error (the recursion limit reached, a bug) into the
    program. An exception a signal handler raised in it (a timeout's) is the program's: it
    goes on, and the accelerator's ``Shielded`` raises it at the program's next safe point.
    A handler's frame is the innermost of the traceback.
    """
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return tb is None or tb.tb_frame.f_code.co_filename.startswith(_PACKAGE_DIR)


class CatchAll:
    """Common part: classify a callee and record it through the hub."""

    note: str | None = None
    #: whether a hook sees calls, and so needs the table ``lookup`` reads
    SEES_CALLS = True
    #: the profile hook found a call that no patch can reach (3.10/3.11): it is not taken off
    needed = False
    #: whether ``begin`` and ``pause`` do anything (``sys.monitoring``'s events on and off); the hub
    #: calls neither where not: every trace's start and end would call two no-ops
    SWITCHES = False

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self._by_id: dict[int, Any] = {}
        self.keep: tuple[type, ...] = ()  # types whose calls are never disabled (they may reach a stream)
        self._refs: list[object] = []  # keep every id in _by_id alive, so ids stay unique
        self.refresh()

    def refresh(self) -> None:
        """Re-read the installed sources' singletons and functions, where they changed."""
        global _LAST
        if not self.SEES_CALLS:
            return  # no hook: nothing looks a callee up (an armed one builds its own when it arms)
        sources = self.hub.rec.sources
        # The sources and their wrappers are made once per process: the table only changes
        # with the set of sources or a singleton (a CUDA generator appears).
        key = tuple([(id(src), src.owners_version()) for src in sources.values()])
        if _LAST is not None and _LAST[0] == key:
            self._by_id, self.keep, self._refs = _LAST[1]
            return
        by_id: dict[int, Any] = {}
        keep: list[type] = []
        refs: list[object] = []
        for source in sources.values():
            for obj in (*source.owners(), *source.functions()):
                by_id[id(obj)] = source
                refs.append(obj)
            keep.extend(source.keep_types())
        for wrapper in self.hub.wrappers():
            by_id[id(wrapper)] = OURS  # the wrapper records the call itself
            refs.append(wrapper)
        self._by_id, self.keep, self._refs = by_id, tuple(keep), refs
        _LAST = (key, (by_id, self.keep, refs))

    def lookup(self, callee: Any, arg0: Any = None) -> Any:
        """The source a callee belongs to, OURS for one of our wrappers, or None.

        A callee is the stream's when it is one of its functions, a method bound
        to a singleton, or (3.12+ method calls pass self as ``arg0``) a method of
        the singleton's class called on the singleton.
        """
        by_id = self._by_id
        source = by_id.get(id(callee))
        if source is None:
            # A Python wrapper reached through the singleton is bound anew at each lookup.
            func = getattr(callee, "__func__", None)
            if func is not None and by_id.get(id(func)) is OURS:
                return OURS
            owner = getattr(callee, "__self__", None)
            if owner is not None:
                source = by_id.get(id(owner))
            if source is None and arg0 is not None:
                source = by_id.get(id(arg0))
                if source is not None and getattr(type(arg0), getattr(callee, "__name__", ""), None) is not callee:
                    source = None
        return source

    def handle(self, source: Any, callee: Any, frame: FrameType, profile: bool) -> Any:
        """Record a call the hook saw; returns INTERNAL for a site never worth seeing again."""
        hub = self.hub
        if not hub.active:
            return None
        rec = hub.rec
        st = rec.state()
        if st.busy:
            return None
        if profile:
            st.hooked = True
        hit = source.classify(callee, frame, profile)
        if hit is None or hit is INTERNAL:
            return hit
        stream, kind, api, start, detail = hit
        if kind == "draw":
            rec.check(stream, api, start)
        rec.record(stream, kind, api, None, start, detail, st)
        # An id: rngtrace keeps no frame alive. With the code: a later frame at the same address and
        # offset (a pending left by a C call no wrapper ran inside) is another call, not this one.
        st.pending = (id(frame), frame.f_lasti, frame.f_code)
        # The call happens after this hook returns: its move is explained, not yet seen.
        rec.forget_fingerprint(stream)
        # Where the reference lives in the caller's module, patch it: later calls and
        # later traces record it through a wrapper, with no hook (3.10/3.11: the hub takes it off).
        if not hub.learn(source.name, start, callee):
            self.needed = True  # a call no patch reaches: the hook stays, and the next trace has it from its start
            hub.hook_found()
        return None

    def describe(self) -> str:
        return type(self).__name__

    def begin(self) -> None:
        """The trace's start is done: from here on the hook sees the program (a no-op where it always does)."""

    def pause(self) -> None:
        """The last trace is ending: the hook need not see rngtrace's own code that ends it."""

    def after_fork(self, child: Any) -> None:
        """In a forked child that records (``child``: its spool writer): what a parent's thread held is set right."""

    def uninstall(self) -> None:
        """Take the hook off."""
