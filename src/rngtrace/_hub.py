"""The one owner of global hooks.

The hub installs a stream's source when the first trace that wants it starts
and restores every patched attribute when the last such trace ends, always in
``finally``. Sources, the catch-all hook and the post-import hooks all go
through here, so "what is hooked right now" has one answer: ``HUB.hooked()``.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from types import FrameType
from typing import Any, Callable, Optional

from _thread import get_ident

from . import _catchall
from ._errors import GlobalRNGError, RNGDrawWarning
from ._patch import INHERITED, set_attribute
from ._stack import StackTable
from ._threads import Fingerprint, ThreadGuard, ThreadState
from .sources import SOURCES, load_source
from .sources._base import Source
from .trace import DRAW, SEED, UNATTRIBUTED, Trace

ON_DRAW = ("log", "warn", "raise")
_STRENGTH = {"log": 0, "warn": 1, "raise": 2}


class _Session:
    """One active trace and what the hub needs to know about it."""

    __slots__ = ("trace", "streams", "on_draw", "start_states")

    def __init__(self, trace: Trace, streams: frozenset, on_draw: str) -> None:
        self.trace = trace
        self.streams = streams
        self.on_draw = on_draw
        self.start_states: dict[str, dict[str, Any]] = {}


class Hub:
    """Installs and removes hooks; routes every recorded call to the active traces."""

    def __init__(self) -> None:
        #: OS thread ident -> ThreadState; read by the hot path as ``states.get(get_ident())``
        self.states: dict[int, ThreadState] = {}
        self._guards = threading.local()
        #: active sessions; replaced, never mutated, so the hot path can iterate it
        self.active: tuple[_Session, ...] = ()
        self.stacks = StackTable()
        self._lock = threading.RLock()
        self._sources: dict[str, Source] = {}
        # stream -> (source, [(parent, attr, original, wrapper)]) kept for the next install
        self._prepared: dict[str, tuple[Source, list[tuple[Any, str, Any, Any]]]] = {}
        self._undo: dict[str, list[tuple[object, str, object]]] = {}
        self._import_hooks: dict[str, Callable] = {}
        self._policy: dict[str, str] = {}
        self.strict = False  # some trace asked for "warn" or "raise"
        self._sink: Optional[tuple] = None
        self._interned = self.stacks.ids  # read by record()'s fast path
        self._depth = 0
        self._thread_names: dict[int, str] = {}
        self._base: dict[str, str] = {}
        self._catchall: Optional[_catchall.CatchAll] = None
        #: the catch-all's profile function on 3.10/3.11, which wrappers step aside from
        self.profile_hook: Optional[Callable] = None
        #: how the stack cache stays exact: "monitoring" or "profile" (frame exit events, the
        #: latter per hooked thread), "pinned" (frames held, dropped by a Sweeper), or None
        self.frame_exits: Optional[str] = None
        #: a catch-all that can start pinning frames once a trace has drawn often enough
        self.pinnable: Optional[Any] = None
        self._walks = 0  # draws captured by walking the whole stack since the catch-all came
        self._epoch = 0
        self._fork_registered = False
        self._locks: dict[str, Any] = {}
        #: stream -> its Fingerprint, made once and kept: wrappers hold it (the hot path)
        self.fingerprints: dict[str, Fingerprint] = {}
        self._warn_registry: dict[Any, Any] = {}

    def state(self) -> ThreadState:
        """This thread's ThreadState, made on first use."""
        ident = get_ident()
        st = self.states.get(ident)
        if st is None:
            st = self.states[ident] = ThreadState(ident)
            self._thread_names[st.key] = threading.current_thread().name
            # A new thread may get a dead one's ident: drop this state when the thread ends.
            self._guards.guard = ThreadGuard(self.states, ident, st)
        return st

    # -- what is hooked ----------------------------------------------------
    def hooked(self) -> dict[str, Any]:
        """Everything the hub has changed in the process right now (empty when idle)."""
        out: dict[str, Any] = {}
        if self._undo:
            out["patches"] = {name: [f"{p!r}.{a}" for p, a, _ in undo] for name, undo in self._undo.items()}
        if self._import_hooks:
            out["import_hooks"] = sorted(self._import_hooks)
        if self._catchall is not None:
            out["catchall"] = self._catchall.describe()
        if self.active:
            out["active"] = len(self.active)
        return out

    # -- starting and stopping -------------------------------------------
    def start(self, trace: Trace, streams: frozenset, on_draw: str) -> _Session:
        """Begin recording into ``trace``; install what it needs."""
        session = _Session(trace, streams, on_draw)
        trace._live = (self.stacks.resolve, self._thread_names)
        with self._lock:
            if not self._fork_registered:
                os.register_at_fork(after_in_child=self._after_fork_in_child)
                self._fork_registered = True
            try:
                for name in sorted(streams):
                    if sys.modules.get(SOURCES[name]) is not None:
                        self._install(name)
                    else:
                        self._watch_import(name)
                for name in streams:
                    if name in self._sources:
                        session.start_states[name] = self._sources[name].state()
                if not self.active:
                    self._warn_registry.clear()  # each outermost trace warns afresh
                self.active = self.active + (session,)
                self._recompute()
                if self._catchall is None and self._sources:
                    self._catchall = _catchall.install(self)
                    if self._catchall.note:
                        trace.notes.append(self._catchall.note)
                elif self._catchall is not None:
                    self._catchall.refresh()
            except BaseException:
                self._release(session)
                raise
        return session

    def stop(self, session: _Session, frame: Optional[FrameType]) -> Trace:
        """End recording into the session's trace; restore what no other trace needs."""
        with self._lock:
            try:
                if session in self.active:
                    self._check_moved(session, frame)
            finally:
                self._release(session)
            session.trace._finish(self.stacks.resolve, self._thread_names)
            if not self.active:
                self.stacks.clear()
                self.states.clear()
        return session.trace

    def _release(self, session: _Session) -> None:
        self.active = tuple(s for s in self.active if s is not session)
        wanted = set().union(*(s.streams for s in self.active)) if self.active else set()
        try:
            for name in list(self._sources):
                if name not in wanted:
                    self._uninstall(name)
            for name in list(self._import_hooks):
                if name not in wanted:
                    self._unwatch_import(name)
        finally:
            if not self._sources and self._catchall is not None:
                catchall, self._catchall = self._catchall, None
                catchall.uninstall()
            elif self._catchall is not None:
                self._catchall.refresh()
            self._recompute()

    def _recompute(self) -> None:
        policy: dict[str, str] = {}
        for s in self.active:
            for name in s.streams:
                if _STRENGTH[s.on_draw] > _STRENGTH[policy.get(name, "log")]:
                    policy[name] = s.on_draw
                policy.setdefault(name, "log")
        self._policy = policy
        self.strict = any(p != "log" for p in policy.values())
        # (raw list, max_events, stream names, trace) when exactly one trace is recording
        # and none warns: record()'s fast path. A sub-stream such as "torch.cuda:0" is
        # not in the names and takes the general path.
        self._sink: Optional[tuple] = None
        if len(self.active) == 1 and not self.strict:
            only = self.active[0]
            self._sink = (only.trace._raw, only.trace.max_events, only.streams, only.trace)
        self._depth = max((s.trace.depth for s in self.active), default=0)

    # -- sources -------------------------------------------------------------
    def _install(self, name: str) -> None:
        if name in self._sources:
            return
        prepared = self._prepared.get(name)
        # Wrappers are made once per process: a decorated function traced on every call
        # must not rebuild a hundred of them each time. They are reused only while every
        # attribute still holds the original they wrap (nobody patched it since).
        if prepared is not None and all(vars(p).get(a, INHERITED) is o for p, a, o, _ in prepared[1]):
            source, patches = prepared
            plan = ((p, a, r) for p, a, _o, r in patches)
        else:
            source, patches = load_source(name), []
            self._prepared[name] = (source, patches)
            plan = source.patches(self)
        undo: list[tuple[object, str, object]] = []
        self._sources[name] = source
        self._undo[name] = undo
        try:
            source.prepare()
            self.reseeded(name)
            fresh = not patches
            # The hub applies each patch as the source yields it (numpy binds later
            # patches to earlier ones), recording what it replaced for the undo.
            for parent, attr, replacement in plan:
                original = vars(parent).get(attr, INHERITED)
                undo.append((parent, attr, original))
                set_attribute(parent, attr, replacement)
                if fresh:
                    patches.append((parent, attr, original, replacement))
        except BaseException:
            self._prepared.pop(name, None)
            self._uninstall(name)
            raise

    def _uninstall(self, name: str) -> None:
        source = self._sources.pop(name, None)
        undo = self._undo.pop(name, [])
        self.fingerprint(name).clear()
        try:
            for parent, attr, original in reversed(undo):
                set_attribute(parent, attr, original)
        finally:
            if source is not None:
                source.forget()

    def wrappers(self) -> list[object]:
        """Every replacement currently patched in."""
        out = []
        for name, undo in self._undo.items():
            for parent, attr, _original in undo:
                out.append(vars(parent).get(attr))
        return out

    def sources(self) -> dict[str, Source]:
        """The installed sources, by stream name."""
        return dict(self._sources)

    # -- streams whose library is imported later ------------------------------
    def _watch_import(self, name: str) -> None:
        if name in self._import_hooks:
            return
        import wrapt

        def on_import(module: Any, name: str = name) -> None:
            with self._lock:
                if name not in self._import_hooks or name in self._sources:
                    return
                self._import_hooks.pop(name, None)
                wanting = [s for s in self.active if name in s.streams]
                if not wanting:
                    return
                self._install(name)
                states = self._sources[name].state()
                for s in wanting:
                    s.start_states[name] = states
                if self._catchall is None:
                    self._catchall = _catchall.install(self)
                else:
                    self._catchall.refresh()

        self._import_hooks[name] = on_import
        wrapt.register_post_import_hook(on_import, SOURCES[name])

    def _unwatch_import(self, name: str) -> None:
        hook = self._import_hooks.pop(name, None)
        if hook is None:
            return
        # wrapt has no public unregister; its hook list is the documented registry.
        import wrapt.importer as importer

        with importer._post_import_hooks_lock:
            hooks = importer._post_import_hooks.get(SOURCES[name])
            if hooks and hook in hooks:
                hooks.remove(hook)
                if not hooks:
                    del importer._post_import_hooks[SOURCES[name]]

    # -- the hot path ----------------------------------------------------------
    def stream_lock(self, stream: str) -> Any:
        """The lock a recording wrapper holds around one call to ``stream``.

        Reentrant: a finalizer the collector runs while an event is recorded may
        draw from the same stream on the same thread; it must not deadlock.
        """
        lock = self._locks.get(stream)
        if lock is None:
            lock = self._locks.setdefault(stream, threading.RLock())
        return lock

    def check(self, stream: str, api: str, frame: Optional[FrameType]) -> None:
        """Raise GlobalRNGError before a draw when a trace asked for on_draw="raise"."""
        if self._policy.get(self._base_of(stream)) == "raise":
            site = self.stacks.resolve(self.stacks.capture(frame, 1), 1)
            where = f" at {site[0]}" if site else ""
            raise GlobalRNGError(
                f"{api} draws from the global {stream} stream{where}; "
                f"use an explicit generator ({_hint(self._sources.get(self._base_of(stream)))})"
            )

    def fingerprint(self, stream: str) -> Fingerprint:
        """The stream's Fingerprint, made on first use and kept for the process."""
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is None:
            fingerprint = self.fingerprints[stream] = Fingerprint()
        return fingerprint

    def reseeded(self, stream: str) -> None:
        """A seed may have swapped what the fingerprint reads: read it afresh, and rebase."""
        source = self._sources.get(stream)
        fingerprint = self.fingerprint(stream)
        fingerprint.view = view = source.fingerprint() if source is not None else None
        fingerprint.last = view.value if view is not None else None

    def rebase(self, stream: str) -> None:
        """Take the stream's current fingerprint as explained."""
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is not None:
            fingerprint.take()

    def forget_fingerprint(self, stream: str) -> None:
        """A call is about to move the stream where no wrapper sees it finish."""
        fingerprint = self.fingerprints.get(stream)
        if fingerprint is not None:
            fingerprint.last = None

    def unattributed(self, stream: str, frame: Optional[FrameType], note: str) -> None:
        """Record that ``stream`` moved with no recorded call, noticed at ``frame``."""
        self.record(stream, UNATTRIBUTED, f"{stream} state", None, frame, note)
        self.rebase(stream)
        source = self._sources.get(self._base_of(stream))
        # Arm the profile hook only where it can see what moved the stream.
        if isinstance(self._catchall, _catchall.ArmedCatchAll) and source is not None and source.profile_visible:
            self._arm()

    def _arm(self) -> None:
        """Swap the armed catch-all for the profile hook, now that there is something to find."""
        with self._lock:
            armed = self._catchall
            if not isinstance(armed, _catchall.ArmedCatchAll):
                return
            if sys.getprofile() is not None:
                return  # another profiler took the slot: stay armed, never displace it
            armed.uninstall()
            hook = armed.arm()
            self._catchall = hook
            for session in self.active:
                if _catchall.ARMED_NOTE not in session.trace.notes:
                    session.trace.notes.append(_catchall.ARMED_NOTE)

    def record(
        self,
        stream: str,
        kind: str,
        api: str,
        count: Optional[int],
        frame: Optional[FrameType],
        detail: Optional[str] = None,
        st: Optional[ThreadState] = None,
    ) -> None:
        """Append one event to every active trace that watches ``stream``."""
        # The usual event: a draw from a loop while one trace records. Its stack is the
        # caller on top of a live frame the thread's cache knows, a node interned at an
        # earlier draw. This is StackTable.capture's first step, inlined: it runs on
        # every draw. (Every node the cache holds reached the outermost frame, so no
        # depth check is needed.)
        sink = self._sink
        if sink is not None and st is not None and frame is not None:
            known = st.frames
            if known is not None and st.epoch == self._epoch:
                parent = frame.f_back
                hit = known.get(id(parent))
                if hit is not None and hit[0] == parent.f_lasti:
                    sid = self._interned.get((hit[1], id(frame.f_code), frame.f_lasti))
                    if sid is not None and stream in sink[2]:
                        raw = (stream, kind, api, count, sid, st.key, detail)
                        if len(sink[0]) < sink[1]:
                            sink[0].append(raw)
                        else:
                            sink[3]._add(raw)
                        return
        # Any other event: walk what the cache does not know, and give it to every trace.
        active = self.active
        if not active:
            return
        if st is None:
            st = self.state()
        known = None
        exits = self.frame_exits
        if exits is None:
            pinnable = self.pinnable
            if pinnable is not None:
                self._walks += 1
                if self._walks >= pinnable.PIN_AFTER:
                    self._start_pinning()
        else:
            known = st.frames
            if known is None or st.epoch != self._epoch or (exits == "profile" and not st.hooked):
                known = self.known_frames(st)
        sid = self.stacks.capture(frame, self._depth, known, exits == "pinned")
        raw = (stream, kind, api, count, sid, st.key, detail)
        base = self._base_of(stream)
        for session in active:
            if base in session.streams:
                session.trace._add(raw)
        if self.strict and kind == DRAW and self._policy.get(base) == "warn":
            self._warn(stream, api, sid)

    def _start_pinning(self) -> None:
        with self._lock:
            pinnable = self.pinnable
            if pinnable is not None and pinnable is self._catchall:
                pinnable.start_pinning()
            self.pinnable = None

    def known_frames(self, st: ThreadState) -> Optional[dict]:
        """The thread's cache of live frames, or None where their exits are not seen."""
        mode = self.frame_exits
        if mode is None:
            return None
        if mode == "profile" and not st.hooked:
            st.frames = None  # exits on this thread went unseen: forget what it knew
            return None
        frames = st.frames
        if frames is None or st.epoch != self._epoch:
            frames = st.frames = {}
            st.epoch = self._epoch
        return frames

    def new_epoch(self) -> None:
        """Invalidate every thread's frame cache (the catch-all came or went), pins included."""
        self._epoch += 1
        self._walks = 0
        for st in list(self.states.values()):
            st.frames = None

    def _base_of(self, stream: str) -> str:
        base = self._base.get(stream)
        if base is None:
            base = self._base[stream] = stream.split(".", 1)[0]
        return base

    def _warn(self, stream: str, api: str, sid: int) -> None:
        site = self.stacks.resolve(sid, 1)
        message = f"{api} drew from the global {stream} stream; use {_hint(self._sources.get(self._base_of(stream)))}"
        if not site:
            warnings.warn(message, RNGDrawWarning, stacklevel=3)
            return
        f = site[0]
        module = os.path.splitext(os.path.basename(f.filename))[0] or "<unknown>"
        # One registry per hub: the "default" filter then warns once per site, not per draw.
        warnings.warn_explicit(message, RNGDrawWarning, f.filename, f.lineno, module, self._warn_registry)

    # -- the never-silent check ----------------------------------------------
    def _check_moved(self, session: _Session, frame: Optional[FrameType]) -> None:
        """Record an unattributed event for each stream that moved with no recorded cause."""
        for name, before in session.start_states.items():
            source = self._sources.get(name)
            if source is None:
                continue
            fingerprint = self.fingerprint(name)
            if fingerprint.view is not None and fingerprint.last not in (None, fingerprint.view.value):
                self.unattributed(name, frame, "moved after the last recorded event; noticed when the block ended")
            counts = session.trace.counts()
            explained = {stream for (stream, _kind) in counts}
            states = source.state()
            if (name, SEED) in counts:
                # torch.manual_seed() is one event on "torch" and reseeds every CUDA device too
                explained.update(states)
            for stream, state in states.items():
                old = before.get(stream)
                if stream in explained or (old is not None and source.same(old, state)):
                    continue
                note = (
                    "moved during the block with no recorded call; noticed when the block ended"
                    if old is not None
                    else "appeared during the block with no recorded call; noticed when the block ended"
                )
                sid = self.stacks.capture(frame, session.trace.depth)
                session.trace._add((stream, UNATTRIBUTED, f"{stream} state", None, sid, self.state().key, note))

    # -- fork ------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        # The child's copy of a trace is not the parent's: stop recording and
        # take the hooks off, so the child runs untraced and unchanged.
        self.active = ()
        self.states = {}
        self._lock = threading.RLock()
        try:
            for name in list(self._sources):
                self._uninstall(name)
            for name in list(self._import_hooks):
                self._unwatch_import(name)
        finally:
            if self._catchall is not None:
                catchall, self._catchall = self._catchall, None
                catchall.uninstall()


def _hint(source: Optional[Source]) -> str:
    return source.hint if source is not None else "an explicit generator object"


def validate_streams(streams: Any) -> frozenset:
    """Check a ``streams=`` argument; None means every stream."""
    if streams is None:
        return frozenset(SOURCES)
    if isinstance(streams, str):
        streams = [streams]
    names = list(streams)
    for name in names:
        if name not in SOURCES:
            raise ValueError(f"unknown stream {name!r}; choose from {', '.join(SOURCES)}")
    if not names:
        raise ValueError(f"streams is empty; choose from {', '.join(SOURCES)}, or None for all")
    return frozenset(names)


def validate_on_draw(on_draw: Any) -> str:
    """Check an ``on_draw=`` argument."""
    if on_draw not in ON_DRAW:
        raise ValueError(f"unknown on_draw {on_draw!r}; choose from {', '.join(ON_DRAW)}")
    return on_draw


HUB = Hub()

__all__ = ["HUB", "Hub", "SEED", "validate_streams", "validate_on_draw"]
