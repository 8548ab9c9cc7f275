"""The 3.12+ catch-all: ``sys.monitoring`` CALL events under a tool id of our own.

CALL events see every call made from Python code, and a call site that calls
anything else is disabled after its first call, so it costs next to nothing;
the sites a trace disabled are enabled again for rngtrace's tool alone when it
ends (``restart_events()`` would re-enable every other tool's as well). Frame
exits (returns, yields, unwinds) keep the stack cache exact.

Turning global events on or off re-instruments every code object running, and
later each one run, so they go on as the last step of a trace's start and off
as the first of the last trace's end (``begin``, ``pause``): rngtrace's own code
runs unseen. The catch-all object is made once and attached again by each trace;
between traces it holds no tool id.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import weakref
from _thread import get_ident
from collections.abc import Callable
from types import CodeType
from typing import Any

from ._blocks import BOUND_EXIT_TYPES
from ._caller import is_stand_in
from ._catchall_common import OURS, CatchAll, own_failure, shielded
from ._hotpath import FrameMode
from ._paths import PACKAGE_DIR as _PACKAGE_DIR
from .sources._base import INTERNAL

TOOL_NAME = "rngtrace"


def _ours(func: Any) -> bool:
    """Whether ``func`` is a Python function of rngtrace's own."""
    code = getattr(func, "__code__", None)
    return isinstance(code, CodeType) and code.co_filename.startswith(_PACKAGE_DIR)


class MonitoringCatchAll(CatchAll):
    """Python 3.12+: ``sys.monitoring`` CALL events under a tool id of our own."""

    def __init__(self, hub: Any) -> None:
        super().__init__(hub)
        self.tool = -1  # the tool id it holds while attached (``attach``)
        self.freed = True
        self._on = False  # whether the global events are on (``begin``, ``pause``)
        # Code objects with a site this tool disabled, to enable again at uninstall. A
        # DISABLE outlives the tool id: a later trace (or tool) under the same id would
        # otherwise never see those sites. Weak: a code that is gone needs nothing.
        # Keyed by id, not a WeakSet: hashing a code object walks all its bytecode (3.12+), and
        # a site is disabled once per call site -- a 200-site function cost 36 µs per site.
        # An entry goes when its code does, before that id can name another code.
        self._disabled: dict[int, weakref.ref] = {}
        self._callback = self._make_on_call()
        self._on_exit = self._make_on_exit()
        self._exit_codes: list[CodeType] = []
        #: (pid, shielded CALL callback, shielded exit callback): made once per process, whose main
        #: thread they know
        self._shielded: tuple[int, Callable, Callable] | None = None

    def attach(self, tool: int) -> None:
        """Register the callbacks under ``tool`` (claimed by the caller); the events stay off until ``begin``."""
        self.tool, self.freed = tool, False
        hub = self.hub
        hub.catchall = self  # before any callback goes in (see ProfileCatchAll)
        mon = sys.monitoring  # type: ignore[attr-defined]
        ev = mon.events
        made = self._shielded
        pid = os.getpid()
        if made is None or made[0] != pid:  # a forked child's main thread has an ident of its own
            main = threading.main_thread().ident
            made = self._shielded = (pid, shielded(self._callback, main), shielded(self._on_exit, main))
        _pid, on_call, on_exit = made
        mon.register_callback(tool, ev.CALL, on_call)
        for event in (ev.PY_RETURN, ev.PY_YIELD, ev.PY_UNWIND):
            mon.register_callback(tool, event, on_exit)
        hub.rec.stacks.watch_code = self._watch_exits
        hub.rec.set_mode(FrameMode.MONITORING)

    def _make_on_call(self) -> Callable:
        """The CALL callback: record a call to a stream, disable every other site."""
        disable = sys.monitoring.DISABLE  # type: ignore[attr-defined]
        lookup, handle, table = self.lookup, self.handle, self
        own: set[int] = set()  # ids of rngtrace's code objects, which live as long as we do
        disabled = self._disabled
        # Its callback is C (dict.pop(key, ref)): no bytecode runs as a code object is freed, so
        # no Ctrl-C can land in it, where it would be printed and lost.
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
                if type(callee) in BOUND_EXIT_TYPES and _ours(callee.func):
                    # A with statement's exit of ours (``_blocks.ExitSlot`` binds it, a partial or in C): the
                    # site ends a block, never draws. Not remembered: enabling it again at uninstall
                    # would re-instrument the user's function, twice, after every block.
                    return disable
                source = lookup(callee, arg0)
                if (
                    source is None
                    and table.keep
                    and (isinstance(arg0, table.keep) or isinstance(getattr(callee, "__self__", None), table.keep))
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
                if own_failure(error):
                    return None
                raise

        return on_call

    def _make_on_exit(self) -> Callable:
        """The return/yield/unwind callback: a frame the stack cache knows is leaving."""
        states = self.hub.rec.states
        getframe = sys._getframe

        def on_exit(code: CodeType, offset: int, value: Any) -> None:
            # Its id may name another frame next.
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

        return on_exit

    SWITCHES = True  # begin and pause turn its events on and off

    def begin(self) -> None:
        """Turn the events on, as the last step of a trace's start: rngtrace's own code runs unseen."""
        if self._on:
            return
        mon = sys.monitoring  # type: ignore[attr-defined]
        # No restart_events(): it would re-enable the sites every other tool disabled.
        # Ours from an earlier trace were enabled again when it ended (see uninstall).
        # PY_UNWIND cannot be asked for per code object; exceptions leaving frames are rare.
        mon.set_events(self.tool, mon.events.CALL | mon.events.PY_UNWIND)
        self._on = True

    def pause(self) -> None:
        """Turn the events off, as the first step of the last trace's end."""
        if self._on:
            self._on = False
            sys.monitoring.set_events(self.tool, 0)  # type: ignore[attr-defined]

    def _watch_exits(self, code: CodeType) -> None:
        """Ask for the returns and yields of a code object whose frames the stack cache holds."""
        mon = sys.monitoring  # type: ignore[attr-defined]
        self._exit_codes.append(code)
        mon.set_local_events(self.tool, code, mon.events.PY_RETURN | mon.events.PY_YIELD)

    def describe(self) -> str:
        return f"sys.monitoring tool {self.tool}"

    def uninstall(self) -> None:
        if self.freed:
            return  # a retry after an interrupted uninstall: the tool id is already given back
        mon = sys.monitoring  # type: ignore[attr-defined]
        hub = self.hub
        hub.rec.stacks.watch_code = None
        hub.rec.set_mode(FrameMode.WALK)
        try:
            self._on = False
            mon.set_events(self.tool, 0)
            # First: the next trace asks again for the exits of each code it caches a frame of, or a
            # frame of a code watched before leaves unseen and a new one at its address is taken for it.
            hub.rec.stacks.forget_watched()
            for code in list(self._exit_codes):
                mon.set_local_events(self.tool, code, 0)
            self._exit_codes.clear()
            self._enable_disabled()
            ev = mon.events
            for event in (ev.CALL, ev.PY_RETURN, ev.PY_YIELD, ev.PY_UNWIND):
                mon.register_callback(self.tool, event, None)
        finally:
            mon.free_tool_id(self.tool)
            self.freed = True

    def _enable_disabled(self) -> None:
        """Enable again, for this tool alone, the sites it disabled in code not run since."""
        mon = sys.monitoring  # type: ignore[attr-defined]
        # Turning a code's CALL events on and off again for this tool re-instruments it now: the
        # next trace sees every site afresh, another tool's are left as they were.
        call = mon.events.CALL
        # Copied in one C step: another thread's call may still add a code meanwhile, and
        # iterating the dict itself would then fail.
        for ref in list(self._disabled.values()):
            code = ref()
            if code is None:
                continue
            mon.set_local_events(self.tool, code, call)
            mon.set_local_events(self.tool, code, 0)
        self._disabled.clear()


# The catch-all of the last trace, attached again by the next: its callbacks, its table and
# its set of rngtrace's own code are made once. Between traces it holds no tool id.
_KEPT: MonitoringCatchAll | None = None


def install(hub: Any) -> CatchAll | None:
    """Claim a free tool id and attach the catch-all under it; None when every id is taken."""
    global _KEPT
    mon = sys.monitoring  # type: ignore[attr-defined]
    for tool in (4, 3, 5, 1, 2, 0):
        if mon.get_tool(tool) is None:
            try:
                # Claimed inside the try: a Ctrl-C landing just after the claim is undone too.
                mon.use_tool_id(tool, TOOL_NAME)
                made = _KEPT
                if made is None or made.hub is not hub:
                    made = _KEPT = MonitoringCatchAll(hub)
                else:
                    made.refresh()
                made.note = None  # the caller says why this trace has it (_catchall.EARLY_NOTE), if it does
                made.needed = False
                made.attach(tool)
                return made
            except BaseException:
                if mon.get_tool(tool) == TOOL_NAME:  # not another tool that took the id first
                    mon.free_tool_id(tool)
                made = hub.catchall
                if isinstance(made, MonitoringCatchAll) and made.tool == tool:
                    made.freed = True  # what it registered goes with the tool id
                    hub.catchall = None
                raise
    return None
