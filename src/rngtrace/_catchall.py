"""The catch-all: see calls to a stream through references the patches miss.

``from numpy.random import rand`` at import, ``r = random.random``, or the
singleton scikit-learn hands out from ``check_random_state(None)`` all reach
the stream without touching a patched attribute. On 3.12+ ``sys.monitoring``
CALL events see every call made from Python code, and a call site that calls
anything else is disabled after its first call, so it costs next to nothing;
the sites a trace disabled are enabled again for rngtrace's tool alone when it
ends (``restart_events()`` would re-enable every other tool's as well).
On 3.10/3.11 a ``c_call`` profile hook does the same job, more slowly: it runs
on every call in the program, so it is armed, installed the first time a stream
moves with no recorded call, and only when no other profiler is, so it never
clobbers one; a ``threading.setprofile`` hook keeps reaching new threads, with
ours chained after it. Both also report frame exits, which keep the stack
cache exact.
"""

from __future__ import annotations

import functools
import sys
import threading
import weakref
from _thread import get_ident
from collections.abc import Callable
from types import CodeType, FrameType
from typing import Any

from ._caller import is_stand_in
from ._hotpath import SPEEDUPS as _speedups
from ._hotpath import FrameMode
from ._paths import PACKAGE_DIR as _PACKAGE_DIR
from ._threads import Sweeper
from .sources._base import INTERNAL

_TOOL_NAME = "rngtrace"
OURS = object()  # lookup marker: one of rngtrace's own recording wrappers
# (key, (by_id, keep types, refs)) of the last table built: most traces reuse it
_LAST: tuple | None = None


def _shielded(callback: Callable, main_thread: int | None) -> Callable:
    """``callback``, made never to raise into the call it reports (``_speedups.Shielded``).

    A Ctrl-C landing in a monitoring callback would otherwise skip the program's next call,
    a ``with`` statement's ``__exit__`` among them, and leave its lock held. Without the
    accelerator this protection is missing: a Python wrapper would itself be a place for the
    interrupt to land.
    """
    if _speedups is None or main_thread is None:
        return callback
    return _speedups.Shielded(callback, main_thread)


def _own_failure(error: Exception) -> bool:
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

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self._by_id: dict[int, Any] = {}
        self._keep: tuple[type, ...] = ()
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
            self._by_id, self._keep, self._refs = _LAST[1]
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
        self._by_id, self._keep, self._refs = by_id, tuple(keep), refs
        _LAST = (key, (by_id, self._keep, refs))

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
        if profile:
            hub.hook_found()
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
        # later traces record it through a wrapper, with no hook.
        hub.learn(source.name, start)
        return None

    def describe(self) -> str:
        return type(self).__name__

    def after_fork(self, child: Any) -> None:
        """In a forked child that records (``child``: its spool writer): what a parent's thread held is set right."""

    def uninstall(self) -> None:
        """Take the hook off."""


class MonitoringCatchAll(CatchAll):
    """Python 3.12+: ``sys.monitoring`` CALL events under a tool id of our own."""

    def __init__(self, hub: Any, tool: int) -> None:
        super().__init__(hub)
        self.tool = tool
        self._freed = False
        mon = sys.monitoring  # type: ignore[attr-defined]
        disable = mon.DISABLE
        lookup, handle, keep = self.lookup, self.handle, self

        own: set[int] = set()  # ids of rngtrace's code objects, which live as long as we do
        # Code objects with a site this tool disabled, to enable again at uninstall. A
        # DISABLE outlives the tool id: a later trace (or tool) under the same id would
        # otherwise never see those sites. Weak: a code that is gone needs nothing.
        # Keyed by id, not a WeakSet: hashing a code object walks all its bytecode (3.12+), and
        # a site is disabled once per call site -- a 200-site function cost 36 µs per site.
        # An entry goes when its code does, before that id can name another code.
        # Its callback is C (dict.pop(key, ref)): no bytecode runs as a code object is freed, so
        # no Ctrl-C can land in it, where it would be printed and lost.
        disabled: dict[int, weakref.ref] = {}
        self._disabled = disabled
        forget = disabled.pop

        def remember(code: CodeType) -> None:
            key = id(code)
            if key not in disabled:
                disabled[key] = weakref.ref(code, functools.partial(forget, key))

        def on_call(code: CodeType, offset: int, callee: Any, arg0: Any) -> Any:
            try:
                if id(code) in own:
                    return disable
                if code.co_filename.startswith(_PACKAGE_DIR):
                    # Our own wrappers and the hub: disabled for good, never enabled again at
                    # uninstall. Each event runs this callback, and a Ctrl-C landing in it before
                    # a `with lock:`'s exit call would leave the hub's lock held.
                    own.add(id(code))
                    return disable
                if is_stand_in(code):
                    # The one-line stand-in a Python wrapper calls the original through (it carries
                    # the caller's file name): a call recorded already. Not kept in ``own``: it can
                    # be freed, and its id reused by the user's code.
                    return disable
                source = lookup(callee, arg0)
                if (
                    source is None
                    and keep._keep
                    and (isinstance(arg0, keep._keep) or isinstance(getattr(callee, "__self__", None), keep._keep))
                ):
                    return None
                # None: calls something else; OURS: a patched wrapper, which records the call itself.
                if source is None or source is OURS or handle(source, callee, sys._getframe(1), False) is INTERNAL:
                    remember(code)
                    return disable
                return None
            except (RecursionError, MemoryError):
                # Its own failure stays here (at the recursion limit it can call nothing): the call
                # goes ahead as untraced, and a move it did not record shows as unattributed.
                return None
            except Exception as error:  # noqa: BLE001
                if _own_failure(error):
                    return None
                raise

        states = hub.rec.states
        getframe = sys._getframe

        def on_exit(code: CodeType, offset: int, value: Any) -> None:
            # A frame the stack cache knows is leaving: its id may name another frame next.
            try:
                st = states.get(get_ident())
                if st is not None and st.frames:
                    st.frames.pop(id(getframe(1)), None)
            except BaseException as error:
                # Only an interrupt (or no memory) lands here: this calls no Python code (and where it
                # gets no frame at the limit, the frame leaving was never cached: a capture needs more
                # room above it). The exit went unseen, so an id the cache holds may name a frame gone.
                st = states.get(get_ident())
                if st is not None:
                    st.frames = None
                if not isinstance(error, (RecursionError, MemoryError)):
                    raise  # the program's (a Ctrl-C): the accelerator raises it at its next safe point

        self._callback = on_call
        self._on_exit = on_exit
        self._exit_codes: list[CodeType] = []
        hub.catchall = self  # before any callback goes in (see ProfileCatchAll)
        ev = mon.events
        main = threading.main_thread().ident
        mon.register_callback(tool, ev.CALL, _shielded(on_call, main))
        shielded_exit = _shielded(on_exit, main)
        for event in (ev.PY_RETURN, ev.PY_YIELD, ev.PY_UNWIND):
            mon.register_callback(tool, event, shielded_exit)
        # No restart_events(): it would re-enable the sites every other tool disabled.
        # Ours from an earlier trace were enabled again when it ended (see uninstall).
        # PY_UNWIND cannot be asked for per code object; exceptions leaving frames are rare.
        mon.set_events(tool, ev.CALL | ev.PY_UNWIND)
        hub.rec.stacks.watch_code = self._watch_exits
        hub.rec.set_mode(FrameMode.MONITORING)

    def _watch_exits(self, code: CodeType) -> None:
        """Ask for the returns and yields of a code object whose frames the stack cache holds."""
        mon = sys.monitoring  # type: ignore[attr-defined]
        self._exit_codes.append(code)
        mon.set_local_events(self.tool, code, mon.events.PY_RETURN | mon.events.PY_YIELD)

    def describe(self) -> str:
        return f"sys.monitoring tool {self.tool}"

    def uninstall(self) -> None:
        if self._freed:
            return  # a retry after an interrupted uninstall: the tool id is already given back
        mon = sys.monitoring  # type: ignore[attr-defined]
        hub = self.hub
        hub.rec.stacks.watch_code = None
        hub.rec.set_mode(FrameMode.WALK)
        try:
            mon.set_events(self.tool, 0)
            for code in list(self._exit_codes):
                mon.set_local_events(self.tool, code, 0)
            self._exit_codes.clear()
            # A code not run since keeps its DISABLEd sites for this tool. Turning its
            # CALL events on and off again for this tool alone re-instruments it now:
            # the next trace sees every site afresh, another tool's are left as they were.
            call = mon.events.CALL
            # Copied in one C step: another thread's call may still add a code meanwhile, and
            # iterating the dict itself would then fail.
            for ref in list(self._disabled.values()):
                code = ref()  # type: ignore[assignment]
                if code is None:
                    continue
                mon.set_local_events(self.tool, code, call)
                mon.set_local_events(self.tool, code, 0)
            self._disabled.clear()
            ev = mon.events
            for event in (ev.CALL, ev.PY_RETURN, ev.PY_YIELD, ev.PY_UNWIND):
                mon.register_callback(self.tool, event, None)
        finally:
            mon.free_tool_id(self.tool)
            self._freed = True


class ProfileCatchAll(CatchAll):
    """Python 3.10/3.11: a ``c_call`` profile hook on every thread."""

    def __init__(self, hub: Any) -> None:
        super().__init__(hub)
        lookup, handle = self.lookup, self.handle
        user = self._previous_threading = threading.getprofile()

        states = hub.rec.states

        def profile(frame: FrameType, event: str, arg: Any) -> None:
            try:
                if event != "c_call":
                    if event == "return":  # also on exceptions and yields: the frame is leaving
                        st = states.get(get_ident())
                        if st is not None and st.frames:
                            st.frames.pop(id(frame), None)
                    return
                if not hub.active:
                    # A thread started during a trace outlived it: take the hook off here.
                    if sys.getprofile() is profile:
                        sys.setprofile(None)
                    return
                source = lookup(arg)
                code = frame.f_code
                if source is None or source is OURS or code.co_filename.startswith(_PACKAGE_DIR) or is_stand_in(code):
                    return
                handle(source, arg, frame, True)
            # A hook that raises is taken off by Python, its error raised in the program. At the
            # recursion limit even its C calls fail (3.10/3.11 count them); a frame it then fails to
            # drop was never cached: a capture needs more room above a frame than this hook does.
            except (RecursionError, MemoryError):
                return
            except Exception as error:  # noqa: BLE001
                if not _own_failure(error):
                    raise

        self._profile = profile
        # threading.setprofile promises the user's hook to every new thread: ours rides along.
        self._thread_hook = profile if user is None else _chained(user, profile, hub)
        # The hub holds this catch-all before any hook goes in: whatever interrupts the rest
        # (Ctrl-C), the hub's retry or next call finds it and takes off what went in.
        hub.catchall = self
        threading.setprofile(self._thread_hook)
        sys.setprofile(profile)
        hub.rec.set_mode(FrameMode.PROFILE, profile)

    def describe(self) -> str:
        return "c_call profile hook"

    def uninstall(self) -> None:
        self.hub.rec.set_mode(FrameMode.WALK)
        try:
            if sys.getprofile() is self._profile:
                sys.setprofile(None)
        finally:
            # Only if it is still ours: a hook the user set inside the block stays theirs.
            if threading.getprofile() is self._thread_hook:
                threading.setprofile(self._previous_threading)


def _chained(user: Callable, profile: Callable, hub: Any) -> Callable:
    """A new thread's profile function: the user's ``threading.setprofile`` hook, then rngtrace's."""

    def chained(frame: FrameType, event: str, arg: Any) -> None:
        user(frame, event, arg)
        if hub.active:
            profile(frame, event, arg)
        elif sys.getprofile() is chained:
            sys.setprofile(user)  # the trace is over: the thread goes back to the user's hook alone

    return chained


class PinningCatchAll(CatchAll):
    """No hook sees calls or frame exits: the stack cache may pin frames, a Sweeper lets them go.

    Pinning costs a thread, which pays off only where a trace draws often: the
    first ``PIN_AFTER`` draws walk the whole stack, and only then does the hub
    call ``start_pinning`` (a decorated function drawing a few times never starts it).
    """

    PIN_AFTER = 64
    SEES_CALLS = False

    def __init__(self, hub: Any) -> None:
        super().__init__(hub)
        self._sweeper: Sweeper | None = None
        hub.rec.offer_pinning(self)

    def start_pinning(self) -> None:
        """Switch the stack cache on: pin frames, sweep the finished ones."""
        rec = self.hub.rec
        if self._sweeper is None:
            self._sweeper = Sweeper(rec.states)
            rec.set_mode(FrameMode.PINNED)
        rec.pinnable = None

    def after_fork(self, child: Any) -> None:
        """In a forked child that records: the sweeper's thread did not survive the fork; pin afresh.

        The child's spool writer (``child``) has a thread already, which sweeps: pinning
        costs no thread of its own there, so it starts at once, not after ``PIN_AFTER``
        walks (without it a DataLoader worker walked every stack in Python for good).
        """
        rec = self.hub.rec
        self._sweeper = Sweeper(rec.states, thread=False)  # the parent's thread is not in this process
        rec.set_mode(FrameMode.PINNED)  # drops the inherited pins too, which nothing here would sweep
        rec.pinnable = None
        child.sweep = self._sweeper.sweep

    def uninstall(self) -> None:
        rec = self.hub.rec
        rec.pinnable = None
        if self._sweeper is not None:
            rec.set_mode(FrameMode.WALK)  # drops every pin
            # Forgotten only once stopped: an interrupted join is retried by the hub.
            self._sweeper.stop()
            self._sweeper = None


class NoCatchAll(PinningCatchAll):
    """No hook could be installed without displacing another tool's."""

    def __init__(self, hub: Any, note: str) -> None:
        super().__init__(hub)
        self.note = note

    def describe(self) -> str:
        return "none (frames pinned)"


class ArmedCatchAll(PinningCatchAll):
    """3.10/3.11: no hook yet; the first unattributed move installs the profile hook.

    A profile hook runs on every call and return in the program (about 1.2x on a
    small training loop), so it is installed only once a stream has moved with
    no recorded call, that is, once there is something for it to find.
    """

    def arm(self) -> CatchAll:
        """The profile hook, installed now (the caller checked that the slot is free)."""
        return ProfileCatchAll(self.hub)

    def describe(self) -> str:
        return "profile hook armed (frames pinned)"


EARLY_NOTE = (
    "the previous trace saw calls through references bound before tracing, so rngtrace's c_call "
    "profile hook was on from the start (Python 3.10/3.11)"
)
ARMED_NOTE = (
    "an unattributed move armed rngtrace's c_call profile hook: from then on, calls through "
    "references bound before tracing are attributed (Python 3.10/3.11)"
)


def install(hub: Any, hook: bool = False) -> CatchAll:
    """Install the best catch-all this Python allows, never displacing another tool.

    On 3.10/3.11, ``hook`` installs the profile hook at once instead of arming it
    (an earlier trace saw moves only it can attribute).
    """
    if sys.version_info >= (3, 12):
        mon = sys.monitoring
        for tool in (4, 3, 5, 1, 2, 0):
            if mon.get_tool(tool) is None:
                try:
                    # Claimed inside the try: a Ctrl-C landing just after the claim is undone too.
                    mon.use_tool_id(tool, _TOOL_NAME)
                    return MonitoringCatchAll(hub, tool)
                except BaseException:
                    if mon.get_tool(tool) == _TOOL_NAME:  # not another tool that took the id first
                        mon.free_tool_id(tool)
                    made = hub.catchall
                    if isinstance(made, MonitoringCatchAll) and made.tool == tool:
                        made._freed = True  # what it registered goes with the tool id
                        hub.catchall = None
                    raise
        return NoCatchAll(
            hub,
            "every sys.monitoring tool id is taken; calls through references bound before tracing show as unattributed",
        )
    if sys.getprofile() is not None:
        return NoCatchAll(
            hub,
            "another profiler is active, so rngtrace did not install its "
            "profile hook; calls through references bound before tracing "
            "show as unattributed",
        )
    if hook:
        catchall = ProfileCatchAll(hub)
        catchall.note = EARLY_NOTE
        return catchall
    return ArmedCatchAll(hub)
