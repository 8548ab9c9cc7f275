"""The catch-all: see calls to a stream through references the patches miss.

``from numpy.random import rand`` at import, ``r = random.random``, or the
singleton scikit-learn hands out from ``check_random_state(None)`` all reach
the stream without touching a patched attribute. ``install`` picks the best hook
this Python allows: ``sys.monitoring`` CALL events on 3.12+
(``_catchall_monitoring``), a ``c_call`` profile hook, armed at the first
unattributed move, on 3.10/3.11 (``_catchall_profile``); where none can go in
without displacing another tool's, frames are pinned and a sweeper lets them go.
"""

from __future__ import annotations

import sys
import threading
from types import FrameType
from typing import Any

from ._caller import is_stand_in
from ._catchall_common import OURS, CatchAll, own_failure
from ._catchall_profile import ProfileCatchAll, chained
from ._hotpath import SPEEDUPS as _speedups
from ._hotpath import FrameMode
from ._paths import PACKAGE_DIR as _PACKAGE_DIR
from ._threads import Sweeper

__all__ = [
    "ARMED_NOTE",
    "EARLY_NOTE",
    "HOOK_NAME",
    "MONITORING",
    "NO_TOOL_NOTE",
    "OURS",
    "ArmedCatchAll",
    "CProfileCatchAll",
    "CatchAll",
    "NoCatchAll",
    "PROFILE_HOOKS",
    "PinningCatchAll",
    "hook_free",
    "install",
    "profile_hook",
]


def _sweeper(rec: Any, thread: bool = True) -> Sweeper:
    """The Sweeper of ``rec``'s pinned frames, letting go of the call-site memo's finished frames too."""
    return Sweeper(rec.states, thread=thread, also=lambda: rec.forget_sites(finished_only=True))


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
            self._sweeper = _sweeper(rec)
            rec.set_mode(FrameMode.PINNED)
        rec.pinnable = None

    def after_fork(self, child: Any) -> None:
        """In a forked child that records: the sweeper's thread did not survive the fork; pin afresh.

        The child's spool writer (``child``) has a thread already, which sweeps: pinning
        costs no thread of its own there, so it starts at once, not after ``PIN_AFTER``
        walks (without it a DataLoader worker walked every stack in Python for good).
        """
        rec = self.hub.rec
        # the parent's thread is not in this process
        self._sweeper = _sweeper(rec, thread=False)
        rec.set_mode(FrameMode.PINNED)  # drops the inherited pins too, which nothing here would sweep
        rec.pinnable = None
        rec.ready_frames()  # the child's first draw walks in C, as every later one does
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


class CProfileCatchAll(PinningCatchAll):
    """Python 3.10/3.11 with the accelerator: the ``c_call`` profile hook as a C function.

    ``_speedups.ProfileHook`` returns at once on every event but a C call of a
    stream's callee, and calls Python (``seen``) only for those: a fraction of
    the Python hook's cost on code that calls many functions. It sees no returns,
    so the stack cache pins frames, as it did before the hook was armed.
    """

    SEES_CALLS = True

    def __init__(self, hub: Any) -> None:
        self._hook: Any = None
        super().__init__(hub)
        handle, user = self.handle, threading.getprofile()
        self._previous_threading = user

        def seen(source: Any, callee: Any, frame: FrameType) -> None:
            try:
                if not hub.active:
                    # A thread started during a trace outlived it: take the hook off here.
                    if sys.getprofile() is hook:
                        sys.setprofile(None)
                    return
                if not is_stand_in(frame.f_code):
                    handle(source, callee, frame, True)
            except (RecursionError, MemoryError):  # as in the Python hook (_catchall_profile)
                return
            except Exception as error:  # noqa: BLE001
                if not own_failure(error):
                    raise

        assert _speedups is not None  # profile_hook() makes this one only with the accelerator
        hook = self._hook = _speedups.ProfileHook(self._by_id, OURS, seen, _PACKAGE_DIR, hub.rec.states)

        def new_thread(frame: FrameType, event: str, arg: Any) -> None:
            # threading.setprofile set this one through sys.setprofile: the C one from here on.
            if hook.install():
                hook(frame, event, arg)
            elif sys.getprofile() is new_thread:
                sys.setprofile(None)  # a thread started as the trace ended: nothing to hook

        # threading.setprofile promises the user's hook to every new thread: ours rides along.
        self._thread_hook = new_thread if user is None else chained(user, hook, hub)
        hub.catchall = self  # before any hook goes in (see ProfileCatchAll)
        threading.setprofile(self._thread_hook)
        hook.install()

    def refresh(self) -> None:
        super().refresh()
        if self._hook is not None:
            self._hook.set_table(self._by_id)

    def describe(self) -> str:
        return "c_call profile hook (C, frames pinned)"

    def uninstall(self) -> None:
        try:
            self._hook.off()  # this thread's at once, any other's at its next C call
        finally:
            try:
                if threading.getprofile() is self._thread_hook:  # a hook the user set inside the block stays
                    threading.setprofile(self._previous_threading)
            finally:
                super().uninstall()


#: the 3.10/3.11 profile hooks, which the hub takes off again once what they found is patched
PROFILE_HOOKS = (ProfileCatchAll, CProfileCatchAll)


def profile_hook(hub: Any) -> CatchAll:
    """The 3.10/3.11 profile hook, installed now: in C where the accelerator is on."""
    if _speedups is not None:
        return CProfileCatchAll(hub)
    return ProfileCatchAll(hub)


class ArmedCatchAll(PinningCatchAll):
    """No hook yet; the first unattributed move installs one (3.10/3.11: the profile hook, 3.12+: ``sys.monitoring``).

    A profile hook runs on every call and return in the program (about 1.2x on a
    small training loop), and turning ``sys.monitoring``'s events on and off costs
    a trace some 20 µs (every code object run after is instrumented again), so
    the hook goes in only once a stream has moved with no recorded call, that is,
    once there is something for it to find. The streams' own builtins record in
    place, and their Python functions are patched, so most traces never need it.
    """

    #: the last one taken off whole, made ready again by the next lone trace's install (no new object per block)
    _spare: ArmedCatchAll | None = None

    @classmethod
    def again(cls, hub: Any) -> ArmedCatchAll:
        """An armed catch-all for ``hub``: the one the last trace took off, where it was, else a new one."""
        spare = cls._spare
        if spare is None or spare.hub is not hub:
            return cls(hub)
        cls._spare = None
        hub.rec.offer_pinning(spare)  # as __init__ does; the rest is as a new one has it
        return spare

    def uninstall(self) -> None:
        PinningCatchAll.uninstall(self)  # not super(): no proxy object at every trace's end
        ArmedCatchAll._spare = self  # only once off whole: an undo cut short makes a new one next time

    def arm(self) -> CatchAll | None:
        """The hook, installed now (the caller checked that it displaces nobody's); None where none could go in."""
        if MONITORING:
            return _monitoring_now(self.hub)
        return profile_hook(self.hub)

    def describe(self) -> str:
        return f"{HOOK_NAME} armed (frames pinned)"


#: 3.12+: the catch-all is ``sys.monitoring``'s CALL events; before, a ``c_call`` profile hook
MONITORING = sys.version_info >= (3, 12)
HOOK_NAME = "sys.monitoring catch-all" if MONITORING else "c_call profile hook"
_PYTHONS = "Python 3.12+" if MONITORING else "Python 3.10/3.11"
EARLY_NOTE = (
    f"the previous trace saw calls through references bound before tracing, so rngtrace's {HOOK_NAME} "
    f"was on from the start ({_PYTHONS})"
)
ARMED_NOTE = (
    f"an unattributed move armed rngtrace's {HOOK_NAME}: from then on, calls through "
    f"references bound before tracing are attributed ({_PYTHONS})"
)
NO_TOOL_NOTE = (
    "every sys.monitoring tool id is taken; calls through references bound before tracing show as unattributed"
)


def _monitoring_now(hub: Any) -> CatchAll | None:
    """3.12+: the ``sys.monitoring`` catch-all, its events on now; None where every tool id is taken."""
    from . import _catchall_monitoring  # here: 3.10/3.11 (a traced child's start there) never import it

    made = _catchall_monitoring.install(hub)
    if made is not None:
        made.begin()
    return made


def hook_free() -> bool:
    """Whether the catch-all's hook can go in now without displacing another tool's."""
    if MONITORING:
        return True  # a free tool id is looked for as it goes in
    return sys.getprofile() is None


def install(hub: Any, hook: bool = False) -> CatchAll:
    """Install the best catch-all this Python allows, never displacing another tool.

    ``hook`` installs the hook at once instead of arming it (an earlier trace saw
    moves only it can attribute); its events go on with ``begin``.
    """
    if MONITORING:
        if not hook:
            return ArmedCatchAll.again(hub)
        from . import _catchall_monitoring  # here: 3.10/3.11 (a traced child's start there) never import it

        made = _catchall_monitoring.install(hub)
        if made is not None:
            made.note = EARLY_NOTE
            return made
        return NoCatchAll(hub, NO_TOOL_NOTE)
    if sys.getprofile() is not None:
        return NoCatchAll(
            hub,
            "another profiler is active, so rngtrace did not install its "
            "profile hook; calls through references bound before tracing "
            "show as unattributed",
        )
    if hook:
        catchall = profile_hook(hub)
        catchall.note = EARLY_NOTE
        return catchall
    return ArmedCatchAll.again(hub)
