"""State the hot path reads: per thread (without threading.local's lookup per read), and per stream."""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable
from typing import Any

from ._store import new_thread_key

#: The most frames a thread's stack cache pins: past it the cache lets them all go,
#: so memory stays bounded even where the Sweeper is stalled or gone.
MAX_PINNED = 4096


class ThreadGuard:
    """Lives in a thread's threading.local: when the thread ends, its ThreadState goes too."""

    __slots__ = ("states", "ident", "state")

    def __init__(self, states: dict, ident: int, state: Any) -> None:
        self.states, self.ident, self.state = states, ident, state

    def __del__(self) -> None:
        if self.states.get(self.ident) is self.state:
            del self.states[self.ident]


class ThreadState:
    """What the hot path keeps per thread (a plain object: threading.local costs a lookup per read)."""

    __slots__ = ("key", "busy", "pending", "hooked", "frames", "epoch")

    def __init__(self, ident: int) -> None:
        # Events name their thread by this key, unique per thread even where the OS reuses idents.
        self.key = new_thread_key()
        # Inside a recorded call: the caller's frame (True where there is none), False otherwise.
        # Calls made from that frame (by C code) or by the library are part of the call.
        self.busy: Any = False
        self.pending: tuple | None = None  # (id(frame), f_lasti) the catch-all recorded just before the call
        self.hooked = False  # 3.10/3.11: the catch-all's profile hook runs on this thread
        self.frames: dict | None = None  # live frame id -> (f_lasti, stack node); see _stack
        self.epoch = -1  # the hub epoch ``frames`` belongs to


class Fingerprint:
    """A stream's cheap state view (``Source.fingerprint()``) and its value after the last recorded call.

    One per stream for the process: wrappers hold it and read its slots directly,
    cheaper on the hot path than two dict lookups. ``last`` None means unknown.
    """

    __slots__ = ("view", "last")

    def __init__(self) -> None:
        self.view: Any = None
        self.last: Any = None

    def take(self) -> None:
        """Take the state as it is now as explained (after a recorded call)."""
        if self.view is not None:
            self.last = self.view.value

    def clear(self) -> None:
        self.view = self.last = None


class _Flag:
    """``threading.Event``'s ``set`` and ``is_set``, where no thread waits on it."""

    __slots__ = ("_set",)

    def __init__(self) -> None:
        self._set = False

    def set(self) -> None:
        self._set = True

    def is_set(self) -> bool:
        return self._set


class Sweeper:
    """Drops pinned frames soon after they finish, where no hook reports frame exits.

    Without exit events (3.10/3.11 before the profile hook is armed) the stack
    cache holds the frames it knows, so an id can never name a new frame. A
    frame object becomes GC-tracked only once it outlives its execution, so
    every few milliseconds this thread lets go of each pinned frame that has
    finished: its locals are freed a few milliseconds late, never kept for good.
    Memory never depends on this thread keeping up: the stack cache also
    drops its pins past ``MAX_PINNED``, so a stalled sweeper costs speed only;
    and the C recorder's walk lets go of finished pins each time it pins a new
    frame (``take_finished_pins``), so a loop's fresh frames do not pile up
    between passes.
    """

    INTERVAL = 0.005

    def __init__(self, states: dict, thread: bool = True, also: Callable[[], Any] | None = None) -> None:
        """``thread``: False where a thread already running calls ``sweep`` (a forked child's writer).

        ``also``: called on each pass as well (the C recorder's call-site memo lets go of its finished frames).
        """
        self._states = states
        self._also = also
        # A forked child's writer calls ``sweep``: no thread waits on the flag, so no Event
        # (a Condition and its locks, hundreds of microseconds in a child just forked).
        self._stop: Any = threading.Event() if thread else _Flag()
        self._thread: threading.Thread | None = None
        if thread:
            self._thread = threading.Thread(target=self._run, name="rngtrace-sweeper", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.INTERVAL):
            self.sweep()

    def sweep(self) -> None:
        """One pass: let go of every pinned frame that has finished."""
        if self._stop.is_set():
            return
        try:
            if self._also is not None:
                self._also()
            self._sweep()
        except Exception:
            # Whatever went wrong, the next pass reads everything afresh; a sweeper
            # that died here would leave every later frame pinned.
            pass

    def _sweep(self) -> None:
        is_tracked = gc.is_tracked
        # dict.copy() allocates nothing tracked while it copies, so no collection (and no
        # finalizer that changes these dicts or releases the GIL) runs halfway through;
        # list(d.items()) allocates a tuple per item and could fail or see a torn dict.
        for st in self._states.copy().values():
            frames = st.frames
            if not frames:
                continue
            for key, entry in frames.copy().items():
                if len(entry) > 2 and is_tracked(entry[2]):
                    frames.pop(key, None)

    def stop(self) -> None:
        """Stop the thread and wait for it."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
