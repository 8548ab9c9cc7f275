"""The 3.10/3.11 catch-all: a ``c_call`` profile hook on every thread.

It runs on every call in the program, so ``_catchall`` arms it: installed the
first time a stream moves with no recorded call, and only when no other
profiler is, so it never clobbers one; a ``threading.setprofile`` hook keeps
reaching new threads, with ours chained after it. Its ``return`` events keep the
stack cache exact.
"""

from __future__ import annotations

import sys
import threading
from _thread import get_ident
from collections.abc import Callable
from types import FrameType
from typing import Any

from ._caller import is_stand_in
from ._catchall_common import OURS, CatchAll, own_failure
from ._hotpath import FrameMode
from ._paths import PACKAGE_DIR as _PACKAGE_DIR


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
                if not own_failure(error):
                    raise

        self._profile = profile
        # threading.setprofile promises the user's hook to every new thread: ours rides along.
        self._thread_hook = profile if user is None else chained(user, profile, hub)
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


def chained(user: Callable, profile: Callable, hub: Any) -> Callable:
    """A new thread's profile function: the user's ``threading.setprofile`` hook, then rngtrace's."""

    def both(frame: FrameType, event: str, arg: Any) -> None:
        user(frame, event, arg)
        if hub.active:
            profile(frame, event, arg)
        elif sys.getprofile() is both:
            sys.setprofile(user)  # the trace is over: the thread goes back to the user's hook alone

    return both
