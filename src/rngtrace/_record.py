"""Recording an event: the hot path behind every wrapper, and the stack cache's mode.

``Recording`` is what sources and the catch-all are handed: ``record()`` turns
a call into a raw event for every active trace, the fingerprints notice moves
nobody recorded, and the frame mode says how a thread's cache of live frames
stays exact. The hub decides what is active and publishes it here as a
``Snapshot`` (see ``_hotpath``); nothing here installs or removes a hook.
"""

from __future__ import annotations

import threading
from _thread import get_ident
from collections.abc import Callable
from types import FrameType
from typing import Any

from ._handed import HandedStates
from ._hotpath import SPEEDUPS as _speedups
from ._hotpath import Cache, FrameMode, HotPath, Snapshot
from ._kinds import DRAW, NO_STACK, UNATTRIBUTED
from ._ondraw import OnDraw
from ._prebound import PreboundNotes
from ._stack import StackTable
from ._threads import Fingerprint, ThreadGuard, ThreadState

# Read once: on 3.11 each FrameMode.X goes through the enum type's Python __getattr__ (~150 ns),
# and record() reads several per event.
_WALK, _PINNED, _PROFILE = FrameMode.WALK, FrameMode.PINNED, FrameMode.PROFILE

#: interned stack nodes past which a table is replaced once no trace is active
TABLE_LIMIT = 50_000


class Recording:
    """Routes each recorded call to the active traces; owns the stack table and per-thread state."""

    def __init__(self) -> None:
        self.stacks = StackTable()
        self.mode = FrameMode.WALK
        empty = Snapshot((), None, False, None, Cache(self.stacks, self.mode))
        self.hot = HotPath(empty, self.record, self.unattributed, self.raised, self.seed_recorded, self._count_walk)
        self.states = self.hot.states
        self._guards = threading.local()
        #: ThreadState.key -> thread name, for the live threads and those seen by an active trace
        self.thread_names: dict[int, str] = {}
        #: stream -> its Fingerprint, made once and kept: wrappers hold it
        self.fingerprints: dict[str, Fingerprint] = {}
        self._locks: dict[str, Any] = {}
        #: each stream's strongest on_draw= among the active traces
        self.on_draw = OnDraw()
        self._depth = 0
        #: the Snapshot published when no trace is active, reused while its cache and hook are current
        self._idle: Snapshot | None = None
        self._base: dict[str, str] = {}
        #: the installed sources, by stream name (the hub keeps it current)
        self.sources: dict[str, Any] = {}
        #: a catch-all that can start pinning frames once a trace has drawn often enough
        self.pinnable: Any | None = None
        self._walks = 0
        #: called with a stream that moved with no recorded call and the frame that noticed it (the hub
        #: may patch references on its stack, or arm the profile hook)
        self.on_unattributed: Callable[[str, FrameType | None], None] | None = None
        #: called with ``pinnable`` once a trace has drawn often enough to start pinning
        self.on_pin: Callable[[Any], None] | None = None
        #: called with a stream after a recorded seed (the hub notes where processes start anew)
        self.on_seed: Callable[[str], None] | None = None
        #: the modules searched for references bound before each trace (``_prebound``)
        self.prebound = PreboundNotes()
        #: the states the streams' getters handed out during the traces (a restore puts one back)
        self.handed = HandedStates()

    # -- what the hub publishes ------------------------------------------------
    def publish(self, sessions: tuple) -> None:
        """Make ``sessions`` the active ones: one new Snapshot, read whole by every wrapper."""
        now = self.hot.now
        if not sessions:  # every trace's end: the one idle Snapshot, while the cache and hook are its own
            self.on_draw.set(sessions)
            self._depth = 0
            idle = self._idle
            if idle is None or idle.cache is not now.cache or idle.profile_hook is not now.profile_hook:
                idle = self._idle = Snapshot((), None, False, now.profile_hook, now.cache)
            self.hot.now = idle
            return
        strict = self.on_draw.set(sessions)  # only then is a policy read (check() and record()'s warning)
        sink = None
        if len(sessions) == 1:
            only = sessions[0]
            self._depth = only.trace.depth
            if not strict:
                sink = (only.trace.raw, only.trace.max_events, only.streams, only.trace, only.trace.depth)
        elif sessions:
            self._depth = max(s.trace.depth for s in sessions)
        else:
            self._depth = 0
        self.hot.now = Snapshot(sessions, sink, strict, now.profile_hook, now.cache)

    def set_mode(self, mode: FrameMode, profile_hook: Callable | None = None) -> None:
        """Change how frame caches stay exact; every thread's cache (and every pin) is dropped."""
        self.mode = mode
        self._walks = 0
        now = self.hot.now
        self.hot.now = Snapshot(now.active, now.sink, now.strict, profile_hook, Cache(self.stacks, mode))
        for st in list(self.states.values()):
            st.frames = None
        self.forget_sites()

    def forget_sites(self, finished_only: bool = False) -> None:
        """Let go of the frames the C recorder's call-site memo holds (past max_events, see store.c).

        Every one when a trace ends (the hub), the frame mode changes or a child was forked;
        only the finished ones on the Sweeper's pass.
        """
        if _speedups is not None:
            _speedups.forget_sites(finished_only)

    def new_table(self) -> None:
        """Once no trace is active: start a fresh stack table if this one has grown large.

        Kept otherwise, so a decorated function's call sites are interned once, not
        at every call. Replaced, never cleared: whoever still reads the old one (a
        thread finishing a draw, a trace resolving its stacks) finds it whole.
        """
        # Every live thread's state was named when it was made: more names than states means
        # some thread has ended (or a child forked) since, and only then is there one to drop.
        if len(self.thread_names) > len(self.states):
            live = {st.key for st in list(self.states.values())}
            for key in [k for k in self.thread_names if k not in live]:
                self.thread_names.pop(key, None)
        if self.stacks.size() < TABLE_LIMIT:
            return
        watch = self.stacks.watch_code
        self.stacks = StackTable()
        self.stacks.watch_code = watch
        self.set_mode(self.mode, self.hot.now.profile_hook)
        for st in list(self.states.values()):
            st.pending = None

    def went_idle(self) -> None:
        """The last trace ended (the hub calls this once it took its thread names): nothing records now."""
        self.new_table()
        self.handed.forget()
        st = self.states.get(get_ident())
        if st is None or not st.busy:  # (inside a recorded call, its own exit lets go: read before busy is reset below)
            # The stream locks this thread holds outside any recorded call. Without the accelerator, the
            # 3.12+ catch-all's callback is Python code that runs just before a recorded call's ``with
            # lock:`` exit, each time that site is instrumented anew (code run while the events are off
            # loses its DISABLE). A Ctrl-C landing there skips the exit, and the next draw from another
            # thread would wait for good. (The accelerator raises such an interrupt after the call instead.)
            for lock in list(self._locks.values()):
                while lock._is_owned():
                    lock.release()
        # Without the accelerator a Ctrl-C at the first line of a wrapper's finally leaves this
        # thread marked inside a recorded call, and every later trace would take its moves for
        # part of that call: it is not in one.
        if st is not None:
            st.busy, st.pending = False, None

    def offer_pinning(self, pinnable: Any) -> None:
        """Let ``pinnable`` start pinning once this trace has walked PIN_AFTER stacks."""
        self._walks = 0
        self.pinnable = pinnable

    def stream_locks_held(self) -> list[str]:
        """The streams whose lock this thread holds: inside a recorded call, or left held (see below)."""
        return [stream for stream, lock in list(self._locks.items()) if lock._is_owned()]

    def after_fork(self) -> None:
        """In a forked child: only the forking thread exists, and no lock may be held."""
        for lock in list(self._locks.values()):
            lock._at_fork_reinit()
        me = get_ident()
        for ident in [i for i in self.states if i != me]:
            self.states.pop(ident, None)
        st = self.states.get(me)
        if st is not None:
            st.busy, st.pending, st.frames = False, None, None
        self.pinnable = None
        self.forget_sites()

    # -- per thread, per stream -------------------------------------------------
    def state(self) -> ThreadState:
        """This thread's ThreadState, made on first use."""
        ident = get_ident()
        st = self.states.get(ident)
        if st is None:
            st = ThreadState(ident)
            self.thread_names[st.key] = threading.current_thread().name
            self.states[ident] = st
            # A new thread may get a dead one's ident: drop this state when the thread ends.
            self._guards.guard = ThreadGuard(self.states, ident, st)
        return st

    def stream_lock(self, stream: str) -> Any:
        """The lock a recording wrapper holds around one call to ``stream``.

        Reentrant: a finalizer the collector runs while an event is recorded may
        draw from the same stream on the same thread; it must not deadlock.
        """
        lock = self._locks.get(stream)
        if lock is None:
            lock = self._locks.setdefault(
                stream, _speedups.StreamLock() if _speedups is not None else threading.RLock()
            )
        return lock

    def fingerprint(self, stream: str) -> Fingerprint:
        """The stream's Fingerprint, made on first use and kept for the process."""
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is None:
            fingerprint = self.fingerprints.setdefault(stream, Fingerprint())
        return fingerprint

    def reseeded(self, stream: str) -> None:
        """A seed may have swapped what the fingerprint reads: read it afresh, and rebase."""
        source = self.sources.get(stream)
        fingerprint = self.fingerprints.get(stream) or self.fingerprint(stream)
        fingerprint.view = view = source.fingerprint() if source is not None else None
        fingerprint.last = view.value if view is not None else None

    def seed_recorded(self, stream: str, where: str | None = None) -> None:
        """A seed of ``stream`` was recorded (on ``where``, else on ``stream``): re-key, then tell the hub.

        ``reseeded`` and ``seeded`` in one call: pytest-randomly seeds six times per test.
        """
        source = self.sources.get(stream)
        fingerprint = self.fingerprints.get(stream) or self.fingerprint(stream)
        fingerprint.view = view = source.fingerprint() if source is not None else None
        fingerprint.last = view.value if view is not None else None
        if self.on_seed is not None:
            try:
                self.on_seed(stream if where is None else where)
            except Exception:  # noqa: BLE001 (never failing the seed)
                pass

    def seeded(self, stream: str) -> None:
        """A seed was recorded on ``stream``: tell the hub (never failing the seed)."""
        if self.on_seed is not None:
            try:
                self.on_seed(stream)
            except Exception:  # noqa: BLE001
                pass

    def rebase(self, stream: str) -> None:
        """Take the stream's current fingerprint as explained."""
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is not None:
            fingerprint.take()

    def raised(
        self, stream: str, kind: str, api: str, frame: FrameType | None, st: ThreadState | None, error: Any
    ) -> None:
        """A recorded call raised: record it where it moved the stream first (it drew, then failed).

        A call that raised before drawing (bad arguments) moved nothing and is no event.
        Either way the state as it is now is taken as explained.
        """
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is not None and fingerprint.view is not None and fingerprint.last is not None:
            if fingerprint.view.value != fingerprint.last:
                name = error.__name__ if isinstance(error, type) else type(error).__name__
                self.record(stream, kind, api, None, frame, f"raised {name} after it moved the stream", st)
        self.rebase(stream)

    def forget_fingerprint(self, stream: str) -> None:
        """A call is about to move the stream where no wrapper sees it finish."""
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is not None:
            fingerprint.last = None

    def base_of(self, stream: str) -> str:
        base = self._base.get(stream)
        if base is None:
            base = self._base[stream] = stream.split(".", 1)[0]
        return base

    # -- events ----------------------------------------------------------------------
    def unattributed(self, stream: str, frame: FrameType | None, note: str) -> None:
        """Record that ``stream`` moved with no recorded call, noticed at ``frame``."""
        now = self.hot.now
        if now.active:
            base = self.base_of(stream)
            traces = [session.trace for session in now.active if base in session.streams]
            # Past max_events the event is only counted, and the noticing stack is not kept with it.
            noticed = not traces or not all(trace.full() for trace in traces)
            raw = self.moved_event(stream, frame if noticed else None, note, self._depth)
            for trace in traces:
                trace.add(raw)
            self.note_prebound(base, frame, traces)
        self.rebase(stream)
        if self.on_unattributed is not None:
            self.on_unattributed(self.base_of(stream), frame)

    def moved_event(self, stream: str, frame: FrameType | None, note: str, depth: int) -> tuple:
        """The raw event of a move no recorded call made, noticed at ``frame``.

        The call at ``frame`` found the stream moved; it did not move it. So the event
        has no stack, and the noticing stack goes in its detail, one end of the window
        the move happened in (the other, the stream's previous event, is found when the
        trace is read): nothing here resolves a line or looks for an event.
        """
        st = self.state()
        cache = self.hot.now.cache
        known = self.known_frames(st, cache)
        noticed = cache.table.capture(frame, depth, known, cache.mode is _PINNED)
        return (stream, UNATTRIBUTED, f"{stream} state", None, NO_STACK, st.key, (note, noticed))

    def note_prebound(self, base: str, frame: FrameType | None, traces: list) -> None:
        """Note in ``traces`` each module on the stack that holds one of the stream's originals (``_prebound``)."""
        self.prebound.note(self.sources.get(base), base, frame, self._depth, traces)

    def check(self, stream: str, api: str, frame: FrameType | None) -> None:
        """Raise GlobalRNGError before a draw when a trace asked for on_draw="raise"."""
        if self.on_draw.of(self.base_of(stream)) == "raise":
            self.on_draw.raise_at(stream, api, frame, self.hot.now.cache.table, self.hint(stream))

    def hint(self, stream: str) -> str:
        source = self.sources.get(self.base_of(stream))
        return (source.stream.own_generator if source is not None else "") or "an explicit generator object"

    def record(
        self,
        stream: str,
        kind: str,
        api: str,
        count: int | None,
        frame: FrameType | None,
        detail: str | None = None,
        st: ThreadState | None = None,
    ) -> None:
        """Append one event to every active trace that watches ``stream``."""
        now = self.hot.now  # read once: sessions, sink and stack table belong together
        cache = now.cache
        sink = now.sink
        # The usual event: a draw from a loop while one trace records. Its stack is the
        # caller on top of a live frame the thread's cache knows, a node interned at an
        # earlier draw: StackTable.capture's first step, inlined (it runs on every draw).
        if sink is not None and st is not None and frame is not None and stream in sink[2]:
            sid = None
            known = st.frames
            if len(sink[0]) >= sink[1]:
                # Past max_events: only the call-site form of the stack is interned and counted.
                sid = self._site(frame, kind, st, cache)
            elif known is not None and st.epoch is cache:
                parent = frame.f_back
                hit = known.get(id(parent))
                if hit is not None and hit[0] == parent.f_lasti:  # type: ignore[union-attr]
                    sid = cache.ids.get((hit[1], id(frame.f_code), frame.f_lasti))
            elif cache.mode is _WALK:
                # A short trace's draw (no frames pinned yet): walked whole, the same as below.
                if kind == DRAW:  # seeds never start pinning: pytest-randomly's come from fresh stacks
                    self._count_walk()
                sid = cache.table.capture(frame, self._depth)
            if sid is not None:
                raw = (stream, kind, api, count, sid, st.key, detail)
                if len(sink[0]) < sink[1]:
                    sink[0].append(raw)
                else:
                    sink[3].add(raw)
                return
        # Any other event: walk what the cache does not know, and give it to every trace.
        active = now.active
        if not active:
            return
        if st is None:
            st = self.state()
        base = self.base_of(stream)
        traces = [session.trace for session in active if base in session.streams]
        full = [trace.full() for trace in traces]
        if traces and all(full):
            sid = self._site(frame, kind, st, cache)  # every trace only counts it: its call-site form
        else:
            known = self.known_frames(st, cache)
            if cache.mode is _WALK and kind == DRAW:
                self._count_walk()
            sid = cache.table.capture(frame, self._depth, known, cache.mode is _PINNED)
        raw = counted = (stream, kind, api, count, sid, st.key, detail)
        if any(full) and not all(full):  # a trace past max_events beside one keeping events: the form for it
            counted = (stream, kind, api, count, self._site(frame, None, st, cache), st.key, detail)
        for trace, past in zip(traces, full):
            trace.add(counted if past else raw)
        if now.strict and kind == DRAW and self.on_draw.of(base) == "warn":
            self.on_draw.warn(stream, api, sid, cache.table, self.hint(stream))

    def _site(self, frame: FrameType | None, kind: str | None, st: ThreadState, cache: Cache) -> int:
        """The call-site form of the stack at ``frame``, walked as far as ``capture`` would walk it.

        ``kind`` None: the draw's walk was counted already (its whole stack was captured too).
        """
        mode = cache.mode
        if mode is _WALK and kind == DRAW:
            self._count_walk()  # frame modes change at the same draw as with no max_events
        if mode is _WALK or (mode is _PROFILE and not st.hooked):  # no cache of live frames: capture_flat's walk
            return cache.table.capture_site(frame, self._depth, 2 * self._depth)
        return cache.table.capture_site(frame, self._depth)  # as a thread's cache walks: to the outermost frame

    def _count_walk(self) -> None:
        # Pinning pays for its sweeper thread only where a trace draws often: after PIN_AFTER walks.
        pinnable = self.pinnable
        if pinnable is not None:
            self._walks += 1
            if self._walks >= pinnable.PIN_AFTER and self.on_pin is not None:
                self.pinnable = None
                self.on_pin(pinnable)

    def known_frames(self, st: ThreadState, cache: Cache) -> dict | None:
        """The thread's cache of live frames under ``cache``, or None where their exits are not seen."""
        mode = cache.mode
        if mode is _WALK:
            return None
        if mode is _PROFILE and not st.hooked:
            st.frames = None  # exits on this thread went unseen: forget what it knew
            return None
        frames = st.frames
        if frames is None or st.epoch is not cache:
            frames = st.frames = {}
            st.epoch = cache  # type: ignore[assignment]  # the cache object stands for its epoch
        return frames

    def ready_frames(self) -> None:
        """This thread's cache of live frames made now, where its first draw would make it in Python."""
        st = self.states.get(get_ident())
        if st is not None:
            self.known_frames(st, self.hot.now.cache)

    def new_warnings(self) -> None:
        """Each outermost trace warns afresh."""
        self.on_draw.new_warnings()
