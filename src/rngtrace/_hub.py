"""The one owner of global hooks: which traces are active and what they need.

``start`` and ``stop`` change the set of active sessions and then bring the
process in line with it (``_reconcile``): install the sources the sessions
want, take off those they don't, keep the catch-all hook while any source is
in. Reconciling is idempotent, so whatever interrupts it (Ctrl-C between two
restores) is finished by a retry, or at the latest by the next hub call. The
usual trace, the only one active, repeats the install the last lone trace made
(``_lone``: one swap, no questions asked twice) while nothing it depends on
changed, and goes the general way otherwise. The patches live in
``_patches``, recording in ``_record``; "what is hooked right now" has one
answer: ``HUB.hooked()``.
"""

from __future__ import annotations

import itertools
import os
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

from . import _catchall, _lone, _processes
from ._hotpath import SPEEDUPS as _speedups
from ._model import SEED
from ._patches import ImportWatch, Patches
from ._record import Recording
from ._store import RawStore
from .sources import declared, load_source, source_class
from .sources import stream as stream_info
from .sources._base import same_state, unmoved

ON_DRAW = ("log", "warn", "raise")
#: module namespaces remembered as searched (each held, so the table is bounded)
LEARNED_FROM_LIMIT = 1024


def _call_unlocked(lock: Any, fn: Callable, *args: Any) -> Any:
    # Without the accelerator: a try-acquire in Python could be interrupted before its release
    # is guarded, leaving the lock held for good, so the check runs as before, without it.
    return fn(*args)


_call_if_free = _speedups.call_if_free if _speedups is not None else _call_unlocked


def _under(lock: Any, blocking: bool, fn: Callable, args: tuple) -> Any:
    """``fn(*args)`` holding the RLock ``lock`` (NotImplemented where ``blocking`` is False and it is taken).

    Without the accelerator. Not a with statement, nor acquire() then try: a profile
    hook (the catch-all's, or another tool's) runs before each call and after it, so a
    Ctrl-C can land right after the acquire, or just before the release is called, and
    keep the lock for good. The outer ``try`` lets go of it wherever it landed.
    """
    if lock._is_owned():
        return fn(*args)  # this thread's already: taken again by nothing, let go by nothing
    try:
        if not lock.acquire(blocking):
            return NotImplemented
        try:
            return fn(*args)
        finally:
            lock.release()
    except BaseException:
        if lock._is_owned():
            lock.release()
        raise


def _try_locked(lock: Any, fn: Callable, *args: Any) -> Any:
    return _under(lock, False, fn, args)


# fn(*args) under the lock where no other thread holds it, else NotImplemented (fn not called);
# in C, taken and released with no point between for a Ctrl-C to land.
_call_when_free = _speedups.call_if_free if _speedups is not None else _try_locked


def _call_with(lock: Any, fn: Callable, *args: Any) -> Any:
    return _under(lock, True, fn, args)


# The hub's lock is taken and released in C where the accelerator is built: on 3.12+ the
# catch-all's monitoring callback runs before a `with` statement's __exit__ call, and a Ctrl-C
# landing in it would leave the lock held for good.
_call_locked = _speedups.call_locked if _speedups is not None else _call_with


#: the streams of each set of streams in install order (sorted: the same whichever trace installs them)
_ORDER: dict[frozenset, tuple[str, ...]] = {}
_TOKENS = itertools.count(1)


def install_order(streams: frozenset) -> tuple[str, ...]:
    """``streams`` sorted, made once per set of streams."""
    return _ORDER.get(streams) or _ORDER.setdefault(streams, tuple(sorted(streams)))


class _Session:
    """One active trace and what the hub needs to know about it."""

    __slots__ = ("trace", "streams", "order", "on_draw", "start_states", "token", "tags", "origins", "compared", "gone")

    def __init__(self, trace: RawStore, streams: frozenset, on_draw: str, tags: tuple = ()) -> None:
        self.trace = trace
        #: names this session in its children's spool files
        self.token = next(_TOKENS)
        #: the sessions a child's events are merged into: its own, or (in a child) its parent's
        self.tags = tags or (self.token,)
        #: (sub-stream, digest of its full state, why, index of the next event): where it starts
        #: from anew, at a fork or a seed (two processes drawing from one digest draw alike)
        self.origins: list[tuple[str, str, str, int]] = []
        self.streams = streams
        #: the streams in install order (sorted: the same order whichever trace installs them)
        self.order = install_order(streams)
        self.on_draw = on_draw
        #: stream -> the quick states (``Source.snapshot()``) of its sub-streams at the start
        self.start_states: dict[str, dict[str, Any]] = {}
        #: its log is meant to be compared with other runs' (rngtrace run, log_dir=): the full state
        #: each stream starts from is noted, and after each seed (see ``compare_states``)
        self.compared = False
        #: None, or whether the code that would end it is gone without having done so (see ``end_gone``)
        self.gone: Callable[[], bool] | None = None


class Hub:
    """Starts and stops traces; installs and removes what they need."""

    def __init__(self) -> None:
        self.rec = Recording()
        self.rec.on_unattributed = self._unattributed
        self.rec.on_pin = self._start_pinning
        self.rec.on_seed = self._seeded
        self.patches = Patches()
        self.imports = ImportWatch()
        self._lock = threading.RLock()
        self.catchall: _catchall.CatchAll | None = None
        self._fork_registered = False
        #: the folder forked children spool their events to, while any trace records
        self.spool = _processes.Spool()
        #: in a forked child that records: what writes its events out
        self._child: _processes.ChildWriter | None = None
        #: multiprocessing's Process.start wrapped while a trace records (spawn, forkserver)
        self.spawns = _processes.SpawnWatch()
        #: streams whose library finished importing while another thread held the lock
        self._pending_imports: set[str] = set()
        #: sessions whose block is gone without having ended them, to end once the lock is free
        self._orphans: list[_Session] = []
        #: an install or undo began and has not finished (a Ctrl-C cut it short): see ``abandon``
        self._unsettled = False
        #: stream -> its state where its library was imported inside a trace (``_note_import_state``)
        self._import_states: dict[str, dict] = {}
        #: (stream, id of a module's globals) -> those globals, already searched for references
        #: bound before tracing. The dict is held so that its id cannot be reused by another.
        self._learned_from: dict[tuple[str, int], dict] = {}
        #: a move no patch saw, in the current or last trace: the next installs the profile hook at once
        self._hook_wanted = False
        #: the last lone trace's install, repeated in one step by the next lone trace that wants it
        self.plan: _lone.Plan | None = None

    @property
    def active(self) -> tuple:
        """The active sessions."""
        return self.rec.hot.now.active

    def hooked(self) -> dict[str, Any]:
        """Everything the hub has changed in the process right now (empty when idle)."""
        out: dict[str, Any] = {}
        patches = self.patches.hooked()
        if patches:
            out["patches"] = patches
        if self.imports.watching():
            out["import_hooks"] = self.imports.watching()
        if self.catchall is not None:
            out["catchall"] = self.catchall.describe()
        spawn = self.spawns.describe()  # its wrapper, or the import hook waiting for multiprocessing
        if spawn:
            out["spawn"] = spawn
        if self.active:
            out["active"] = len(self.active)
        return out

    # -- starting and stopping -------------------------------------------
    # A face makes its session first and starts it inside a ``try`` whose handler ends it
    # (``abandon``): a Ctrl-C landing anywhere after the start, even before ``start`` has
    # returned, then still finds the session to end.
    def session(self, trace: RawStore, streams: frozenset, on_draw: str) -> _Session:
        """A session recording into ``trace``, not started yet (``start``)."""
        return _Session(trace, streams, on_draw)

    def start(self, session: _Session) -> None:
        """Begin recording into the session's trace; install what it needs."""
        self._locked(self._start, session)

    def _start(self, session: _Session) -> None:
        self._end_gone()
        rec, trace = self.rec, session.trace
        if not self._fork_registered:
            os.register_at_fork(before=self._before_fork, after_in_child=self._after_fork_in_child)
            self._fork_registered = True
        try:
            sessions = self.active + (session,)
            if len(sessions) == 1:
                rec.new_warnings()  # each outermost trace warns afresh
                # (an inner trace leaves this to the outer one, whose children follow it)
                trace.untraced, notes = _processes.untraced_children()
                trace.notes.extend(notes)
            trace.go_live(rec.stacks.resolve, rec.thread_names)
            self._unsettled = True  # until the hooks are what the sessions need (see abandon)
            # Published first, so a watched library imported meanwhile (another thread)
            # finds the session that wants it.
            rec.publish(sessions)
            if len(sessions) > 1 or not _lone.install_alone(self, session):
                self._settle(sessions)
                if len(sessions) == 1:
                    self.plan = _lone.make_plan(self, session)
            self._unsettled = False
            for name in session.streams:
                source = rec.sources.get(name)
                if source is not None:
                    session.start_states[name] = source.snapshot()
            if self.catchall is not None and self.catchall.note and self.catchall.note not in trace.notes:
                trace.notes.append(self.catchall.note)
        except BaseException:
            self._release(session)
            if not self.active:
                self.rec.new_table()
            raise

    def stop(self, session: _Session, frame: FrameType | None) -> RawStore:
        """End recording into the session's trace; restore what no other trace needs."""
        self._locked(self._stop, session, frame)
        return session.trace

    def abandon(self, session: _Session) -> None:
        """End ``session`` if it is still active, and finish an install or undo cut short (a Ctrl-C).

        Every face calls this once its block is over, whatever ended it: a Ctrl-C can land
        where no ``try`` of the hub's covers it yet (the first instruction of a call), and
        leave a session running or hooks that no session wants; this finishes the job.
        """
        if session in self.active or self._unsettled:
            self._locked(self._finish_cut_short, session)

    def _finish_cut_short(self, session: _Session) -> None:
        self._stop_active(session)
        if self._unsettled:
            self._settle(self.active)

    def orphaned(self, session: _Session, *_: Any) -> None:
        """The block of ``session`` is gone without having ended it: end it now, or once the lock is free.

        A callback for whatever the block's end is noticed by (``_blocks.Binding.on_lost``):
        it may run inside any code, which may hold the lock, so it only queues unless the
        lock is free, and whoever holds the lock ends the session when it lets go.
        """
        if session in self.active:
            self._orphans.append(session)
            self._after_unlock()

    def _end_gone(self) -> None:
        """End the sessions whose ``gone()`` says the code that would end them cannot any more.

        A decorated generator's relay is killed, finally blocks unrun, where a Python profile
        hook raises at its yield (a Ctrl-C landing in the hook): its session is ended here,
        by the next start or end of any trace.
        """
        for s in self.active:
            if s.gone is not None and s.gone():
                self._stop(s, None)

    def _stop_active(self, session: _Session) -> None:
        if session in self.active:  # asked again under the lock: another thread may have ended it
            self._stop(session, None)

    def _stop(self, session: _Session, frame: FrameType | None) -> None:
        session.gone = None
        self._end_gone()
        try:
            if session in self.active:
                self._check_moved(session, frame)
        finally:
            try:
                self._release(session)
            finally:
                trace = session.trace
                trace.finish(trace.live[0] if trace.live else None, self.rec.thread_names)
                self._read_settings(trace)
                if session.origins:
                    trace.origins.extend((trace.pid, *origin) for origin in session.origins)
                if self.spool.path is not None:
                    self._merge_children(session)
                if not self.active:
                    self.rec.new_table()  # after the trace took its thread names
                    # Nothing records now. Without the accelerator a Ctrl-C at the first line of a
                    # wrapper's finally leaves this thread marked inside a recorded call, and every
                    # later trace would take its moves for part of that call: it is not in one.
                    st = self.rec.states.get(threading.get_ident())
                    if st is not None:
                        st.busy, st.pending = False, None

    def _release(self, session: _Session) -> None:
        self._unsettled = True
        sessions = tuple(s for s in self.active if s is not session)
        if not sessions:
            try:
                if _lone.uninstall_alone(self):
                    self._unsettled = False
                    return
            except BaseException:
                # Interrupted half-way (Ctrl-C): the general way finishes the job, then it is raised.
                self.rec.publish(())
                self._settle(())
                raise
        self.rec.publish(sessions)  # first: wrappers stop recording into it at once
        self._settle(sessions)

    def _settle(self, sessions: tuple) -> None:
        """Reconcile, finishing the job whatever interrupts it.

        An interruption (Ctrl-C, SystemExit) is raised once the job is done; an error
        only if every retry failed: a user's block must not fail for one that passed.
        """
        interruption: BaseException | None = None
        for attempt in range(4):
            try:
                self._reconcile(sessions)
                break
            except Exception:
                if attempt == 3:
                    raise
            except BaseException as e:  # noqa: BLE001 (Ctrl-C between two restores: finish first)
                if interruption is None:
                    interruption = e
        self._unsettled = False
        if interruption is not None:
            raise interruption

    def _reconcile(self, sessions: tuple) -> None:
        """Make the hooks exactly what ``sessions`` need (idempotent)."""
        rec, patches = self.rec, self.patches
        # First: a wrapper of ours put back by another tool goes, before a set is applied again.
        if patches.strays:
            patches.settle_strays()
        if len(sessions) == 1:
            wanted: Any = sessions[0].streams
            order: Any = sessions[0].order
        else:
            wanted = set().union(*(s.streams for s in sessions)) if sessions else ()
            order = sorted(wanted)
        installed = rec.sources
        if installed:
            leaving = [n for n in installed if n not in wanted]
            if leaving:
                patches.undo_many(leaving)  # raises before anything below if interrupted
                self.forget_streams(leaving)
        if self.imports.hooks:
            for name in self.imports.watching():
                if name not in wanted:
                    self.imports.unwatch(name)
        if len(installed) < len(wanted):
            arriving = []
            for name in order:
                if name in installed:
                    continue
                if sys.modules.get(declared()[name].module) is not None:
                    arriving.append(name)
                else:
                    self.imports.watch(name, declared()[name].module, self._imported)
            if arriving:
                applied = patches.apply_many(arriving)
                if applied is None:  # one at a time: each set installed is at once known as installed
                    for name in arriving:
                        installed[name] = patches.apply(name, load_source, rec).source
                        rec.reseeded(name)
                else:
                    for name, patch_set in zip(arriving, applied):
                        installed[name] = patch_set.source
                    for name in arriving:
                        rec.reseeded(name)
        catchall = self.catchall
        if installed and catchall is None:
            self.put_catchall()
        elif not installed and catchall is not None:
            self.take_catchall()
        elif catchall is not None:
            catchall.refresh()
        self.spawns.set(bool(sessions), self)

    def forget_streams(self, names: list[str]) -> None:
        """Streams whose patches came off: no longer installed, their fingerprints unknown."""
        installed, fingerprint = self.rec.sources, self.rec.fingerprint
        for name in names:
            installed.pop(name).forget()
            fingerprint(name).clear()

    def put_catchall(self) -> None:
        # 3.10/3.11: the last trace found moves through references the patches miss, so
        # the profile hook goes in at once, to attribute (and learn) them from the first.
        self.catchall = _catchall.install(self, hook=self._hook_wanted)
        self._hook_wanted = False  # this trace says again whether the next one needs it

    def take_catchall(self) -> None:
        if self.catchall is not None:  # idempotent: an interrupted one is completed by the retry
            self.catchall.uninstall()
        self.catchall = None

    # -- sources -------------------------------------------------------------
    def _imported(self, name: str) -> None:
        """A watched library was imported inside a trace: install its stream now, or soon.

        Called by the import system with the module's import lock held. Waiting for
        the hub's lock here could deadlock with a thread that holds it and is itself
        importing that module (to install its stream), so the stream is only queued
        unless the lock is free; whoever holds it takes the queue when it lets go.
        """
        self._note_import_state(name)
        self._pending_imports.add(name)
        self._after_unlock()

    def _note_import_state(self, name: str) -> None:
        """The state a library's stream starts from, read where it is imported, before any draw.

        Where the lock is taken, the stream is installed only once it is let go, and the
        draws made meanwhile (the importing thread's first ones) are recorded by no
        wrapper: measured from here, the end-of-block check reports them, never silent.
        """
        if not any(name in s.streams and name not in s.start_states for s in self.active):
            return
        try:
            self._import_states[name] = load_source(name).snapshot()
        except Exception:  # noqa: BLE001 (the stream is still installed; measured from then on)
            self._import_states.pop(name, None)

    def _take_imports(self) -> None:
        """Install the streams whose library was imported while a trace wanted them (lock held)."""
        while self._pending_imports:
            name = self._pending_imports.pop()
            sessions = self.active
            wanting = [s for s in sessions if name in s.streams and name not in s.start_states]
            if not wanting:
                self._import_states.pop(name, None)
                continue
            self._settle(sessions)
            source = self.rec.sources.get(name)
            imported = self._import_states.pop(name, None)
            if source is not None:
                states = source.snapshot()
                if imported is not None and not unmoved(source, imported, states):
                    # Drawn from between the import and now, while the lock was taken: no wrapper saw it.
                    self.rec.unattributed(
                        name,
                        None,
                        f"moved after {declared()[name].module} was imported, "
                        "before rngtrace could put its wrappers in place",
                    )
                for s in wanting:
                    s.start_states[name] = states
                    if s.compared:
                        _note_origins((s,), source, "start")  # e.g. numpy imported by the program rngtrace run runs

    def _locked(self, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` under the hub's lock; then the imports queued meanwhile are taken."""
        result = _call_locked(self._lock, fn, *args)
        self._after_unlock()
        return result

    def _after_unlock(self) -> None:
        """Do what was queued while the lock was taken: the sessions ``orphaned`` and the imports ``_imported``.

        Called by whoever lets go of the lock, and by the hooks themselves: work queued
        while the lock was held is taken by its holder once it lets go, whichever hub call
        that was (a draw starting the sweeper holds it too). Never waits for the lock (a
        hook runs with an import lock held), and never from inside a holder's own work.
        """
        lock = self._lock
        while (self._pending_imports or self._orphans) and not lock._is_owned():  # type: ignore[attr-defined]
            if _call_when_free(lock, self._take_pending) is NotImplemented:
                break

    def _take_pending(self) -> None:
        """End the orphaned sessions, then install the streams queued meanwhile (lock held)."""
        orphans = self._orphans
        while orphans:
            self._stop_active(orphans.pop())
        self._take_imports()

    def wrappers(self) -> list[object]:
        """Every replacement currently patched in."""
        return self.patches.wrappers()

    def learn(self, stream: str, frame: FrameType | None) -> None:
        """The catch-all saw ``frame`` reach ``stream`` around the patches: patch its module's references.

        Once per module and stream; only when the hub's lock is free, since the
        catch-all runs inside any code, which may be waiting for it (a later call learns).
        """
        if frame is None:
            return
        namespace = frame.f_globals
        key = (stream, id(namespace))
        if (
            key in self._learned_from
            or _call_when_free(self._lock, self._learn, stream, key, namespace) is NotImplemented
        ):
            return
        self._after_unlock()

    def _learn(self, stream: str, key: tuple[str, int], namespace: dict) -> None:
        if len(self._learned_from) >= LEARNED_FROM_LIMIT:
            self._learned_from.clear()  # searched again if met again: a bound, not a loss
        self._learned_from[key] = namespace
        self.patches.learn(stream, namespace)

    def _start_pinning(self, pinnable: Any) -> None:
        self._locked(self._start_pinning_locked, pinnable)

    def _start_pinning_locked(self, pinnable: Any) -> None:
        # Any thread may get here: only the catch-all still installed may start its sweeper.
        if pinnable is self.catchall:
            pinnable.start_pinning()  # type: ignore[union-attr]  # the profile hook's, which pins

    # -- the profile hook, armed by the first move it could have seen ---------
    def _unattributed(self, stream: str) -> None:
        source = self.rec.sources.get(stream)
        # Arm the profile hook only where it can see what moved the stream.
        if source is not None and source.profile_visible:
            self._hook_wanted = True
            if isinstance(self.catchall, _catchall.ArmedCatchAll):
                self._arm()

    def hook_found(self) -> None:
        """The profile hook attributed a call: the next trace should have it from its start too."""
        self._hook_wanted = True

    def _arm(self) -> None:
        """Swap the armed catch-all for the profile hook, now that there is something to find."""
        self._locked(self._arm_locked)

    def _arm_locked(self) -> None:
        armed = self.catchall
        if not isinstance(armed, _catchall.ArmedCatchAll):
            return
        if sys.getprofile() is not None:
            return  # another profiler took the slot: stay armed, never displace it
        armed.uninstall()
        self.catchall = None
        self.catchall = armed.arm()
        for session in self.active:
            if _catchall.ARMED_NOTE not in session.trace.notes:
                session.trace.notes.append(_catchall.ARMED_NOTE)

    # -- the never-silent check ----------------------------------------------
    def _check_moved(self, session: _Session, frame: FrameType | None) -> None:
        """Record an unattributed event for each stream that moved with no recorded cause."""
        rec = self.rec
        explained: set | None = None
        sources, fingerprints = rec.sources, rec.fingerprints
        for name, before in session.start_states.items():
            source = sources.get(name)
            if source is None:
                continue
            if not _moved_since_recorded(fingerprints.get(name)):
                now = source.snapshot()
                if unmoved(source, before, now):
                    # Where nothing moved there is nothing to report, whatever another thread is
                    # doing: only a stream that moved needs its lock to tell who moved it.
                    continue
                if explained is None:  # the streams with an event: made only once one moved
                    explained = session.trace.streams_with_events()
                if _all_in(now, explained):
                    continue  # each sub-stream has an event, and none moved after its last one
            elif explained is None:
                explained = session.trace.streams_with_events()
            # Another thread inside a recorded call holds the stream's lock: its draw has moved
            # the stream and is about to be recorded. Comparing now would report that move as
            # unattributed, and waiting could deadlock (a wrapper may want the hub's lock), so
            # the stream is left to that call, which rebases the fingerprint when it is done.
            _call_if_free(rec.stream_lock(name), self._check_stream, session, name, before, source, frame, explained)

    def _check_stream(
        self, session: _Session, name: str, before: dict, source: Any, frame: FrameType | None, explained: set
    ) -> None:
        """The end-of-block check for one stream (its lock held).

        Its notes end in ``trace.BLOCK_END``: a reader closes their windows at the block's end.
        """
        rec = self.rec
        raws = session.trace.raw
        if _moved_since_recorded(rec.fingerprints.get(name)):
            rec.unattributed(name, frame, "moved after the last recorded event; noticed when the block ended")
            explained.add(name)
        states = source.snapshot()  # again, now under the lock: the read without it only said "moved"
        if any(raw[0] == name and raw[1] == SEED for raw in raws):
            # torch.manual_seed() is one event on "torch" and reseeds every CUDA device too
            explained.update(states)
        for stream, state in states.items():
            old = before.get(stream)
            if stream in explained or (old is not None and same_state(source, old, state)):
                continue
            note = (
                "moved during the block with no recorded call; noticed when the block ended"
                if old is not None
                else "appeared during the block with no recorded call; noticed when the block ended"
            )
            # For this trace alone: another active trace compares its own start states.
            session.trace.add(rec.moved_event(stream, frame, note, session.trace.depth))
            rec.note_prebound(name, frame, [session.trace])

    # -- child processes ---------------------------------------------------------
    def _read_settings(self, trace: RawStore) -> None:
        """Each traced library's flags at the trace's end (torch's determinism), where it has an event."""
        for name in trace.streams:
            info = stream_info(name)
            if info is not None and sys.modules.get(info.module) is not None and trace.touched(name):
                trace.settings.update(source_class(name).settings())

    def _merge_children(self, session: _Session) -> None:
        """Merge what the children forked under ``session`` spooled; the last trace removes the folder."""
        try:
            logs = self.spool.collect(session.token)
            for log in logs:
                session.trace.merge_child(log)
        finally:
            if not self.active:
                self.spool.remove()

    def _before_fork(self) -> None:
        """In the parent, about to fork under a trace: make the spool folder, note where streams stand."""
        sessions = self.active
        if not sessions:
            return
        try:
            # The child's file is made here, before the fork: a block ending before the child
            # has run at all still knows to wait for it.
            self.spool.reserve()
            digests = self.spool.digests.read(self.rec)
        except Exception:  # noqa: BLE001 (a fork must never fail for the tracer)
            return
        for session in sessions:
            at = len(session.trace.raw)
            session.origins.extend((stream, digest, "fork", at) for stream, digest in digests)

    def compare_states(self, trace: RawStore) -> None:
        """``trace``'s log will be compared with other runs': note the full state each stream starts from.

        One full-state read per stream where the trace first sees it, and one per seed
        (``_seeded``): never per draw, and only for traces that ask (``rngtrace run``,
        ``log_dir=``), since a read costs tens of microseconds.
        """
        self._locked(self._compare_states, trace)

    def _compare_states(self, trace: RawStore) -> None:
        for session in self.active:
            if session.trace is trace and not session.compared:
                session.compared = True
                for name in session.order:
                    source = self.rec.sources.get(name)
                    if source is not None:
                        _note_origins((session,), source, "start")

    def note_end_states(self, trace: RawStore) -> None:
        """Note the full state each of ``trace``'s streams ends in (``rngtrace check`` compares them)."""
        self._locked(self._note_end_states, trace)

    def _note_end_states(self, trace: RawStore) -> None:
        for session in self.active:
            if session.trace is trace:
                for name in session.order:
                    source = self.rec.sources.get(name)
                    if source is not None:
                        _note_origins((session,), source, "end")

    def _seeded(self, stream: str) -> None:
        """A recorded seed: where processes are traced or runs compared, note the state each starts from anew."""
        if self.spool.path is None and self._child is None and not any(s.compared for s in self.active):
            return  # nothing to compare with: no full-state read per seed
        source = self.rec.sources.get(self.rec.base_of(stream))
        if source is not None:
            _note_origins(self.active, source, "seed")

    def _after_fork_in_child(self) -> None:
        # The parent's other threads are gone, and any lock one of them held would never be
        # released: reset them all. Under a trace the child goes on recording, into a trace of
        # its own that its parent's merges (_processes); else it runs untraced and unchanged.
        self._lock._at_fork_reinit()  # type: ignore[attr-defined]
        self._pending_imports.clear()
        self._orphans.clear()  # the parent's: the child ends its own session when it exits
        self._import_states.clear()
        self.rec.after_fork()
        parents, self._child = self.active, None
        child = None
        if parents and self.spool.reserved is not None:
            try:
                child = self._start_child(parents)
            except Exception:  # noqa: BLE001 (a child the tracer cannot follow runs untraced)
                child = None
                try:
                    os.remove(self.spool.reserved)  # the parent need not wait for it
                except OSError:
                    pass
        if child is None:
            self.spool.forget()
        elif self.catchall is not None:
            self.catchall.after_fork(self._child)  # a sweeper of the parent's is gone: the child pins afresh
        self.rec.publish((child,) if child is not None else ())
        try:
            self._settle(self.active)
        finally:
            if child is None:
                self.rec.new_table()

    def _start_child(self, parents: tuple) -> _Session:
        """A session of the child's own, recording what its parents recorded, spooled to their folder."""
        session = _child_session(*_processes.child_spec(parents))
        # CPython reseeds `random` in every forked child (os.register_at_fork): the child starts
        # from its streams as they are now, not from the parent's last recorded call. A fork
        # swaps no generator, so each fingerprint's view still reads the right memory: taken, not remade.
        for name in session.streams:
            if name in self.rec.sources:
                self.rec.rebase(name)
        self._begin_child(session, self.spool.reserved, "fork")  # type: ignore[arg-type]
        return session

    def _begin_child(self, session: _Session, file: str, start: str) -> None:
        """A child's session, published already: note where its streams start, and spool it to ``file``."""
        session.trace.go_live(self.rec.stacks.resolve, self.rec.thread_names)
        for name in session.streams:
            source = self.rec.sources.get(name)
            if source is not None:
                session.start_states[name] = source.snapshot()
        # Read in the child: a forked child's `random` was reseeded; a spawned one's streams are new
        # (a forked child's other streams are where the parent's read before the fork left them).
        session.origins.extend((stream, digest, start, 0) for stream, digest in self.spool.digests.read(self.rec))
        self._child = _processes.ChildWriter(self, session, file, session.tags, start)

    def spawning(self, process: Any, start: Callable) -> None:
        """``process.start()`` under a trace: a spawn or forkserver child gets a target that records."""
        sessions = self.active
        target = getattr(process, "_target", None)
        method = _processes.start_method(process) if sessions and target is not None else None
        if method not in ("spawn", "forkserver"):
            return start(process)  # fork: os.register_at_fork does it; no target: run() overridden
        try:
            wrapped = _processes.SpawnedTarget(
                target, self.spool.reserve(), _processes.child_spec(sessions), method, _start_spawned
            )
        except Exception:  # noqa: BLE001 (a process must start whatever the tracer cannot do)
            return start(process)
        process._target = wrapped  # pickled into the child now, by start()
        try:
            return start(process)
        finally:
            process._target = target

    def start_spawned(self, target: Any) -> None:
        """In a spawned child, before its target runs: record into a trace of its own, spooled to the parent."""
        self._locked(self._start_spawned_locked, _child_session(*target.spec), target)

    def call_if_free(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` under the hub's lock unless this thread holds it already (a hook fired inside the hub)."""
        _call_if_free(self._lock, fn)

    def _start_spawned_locked(self, session: _Session, target: Any) -> None:
        self.spool.path = os.path.dirname(target.file)  # its own children write there too
        self.rec.publish((session,))
        self._settle((session,))
        self._begin_child(session, target.file, target.start)

    def end_child(self, session: _Session) -> None:
        """The child's trace ends (it exits, or its parent's trace ended): the same end as a block's."""
        if session not in self.active:
            return
        self._child = None
        self._locked(self._stop, session, None)

    def leave_child(self, session: _Session) -> None:
        """The child leaves through ``os._exit``: note the moves no call made, and stop recording.

        Nothing of the child runs after this, so its hooks go with the process: taking
        them off (and joining the sweeper) would only lengthen its parent's wait for it.
        """
        if session not in self.active:
            return
        self._child = None
        _call_locked(self._lock, self._leave_child_locked, session)

    def _leave_child_locked(self, session: _Session) -> None:
        try:
            self._check_moved(session, None)
        finally:
            self.rec.publish(tuple(s for s in self.active if s is not session))


def _start_spawned(target: Any) -> None:
    """What a spawned child's ``SpawnedTarget`` calls first: pickled by name, so unpickling imports the hub."""
    HUB.start_spawned(target)


def _child_session(streams: tuple[str, ...], depth: int, max_events: int, tags: tuple[int, ...]) -> _Session:
    """A child process's own session (``_processes.child_spec``): it only logs, whatever its parents asked."""
    return _Session(RawStore(streams, depth, max_events), frozenset(streams), "log", tags)


def _note_origins(sessions: Sequence[_Session], source: Any, why: str) -> None:
    """Note the digest of each of ``source``'s sub-streams, read once, as where ``sessions`` start anew."""
    try:
        digests = _processes.state_digests(source)
    except Exception:  # noqa: BLE001 (a state that cannot be read is no finding, never an error)
        return
    for session in sessions:
        at = len(session.trace.raw)
        session.origins.extend((sub, digest, why, at) for sub, digest in digests.items())


def _moved_since_recorded(fingerprint: Any) -> bool:
    """Whether a stream's fingerprint moved after its last recorded call (False where it cannot tell)."""
    return (
        fingerprint is not None
        and fingerprint.view is not None
        and fingerprint.last is not None
        and fingerprint.last != fingerprint.view.value
    )


def _all_in(states: dict, streams: set) -> bool:
    # A loop, not all() over a generator: see sources._base.unmoved.
    for stream in states:
        if stream not in streams:
            return False
    return True


def validate_streams(streams: Any) -> frozenset:
    """Check a ``streams=`` argument; None means every stream."""
    if streams is None:
        return frozenset(declared())
    if isinstance(streams, str):
        streams = [streams]
    names = list(streams)
    for name in names:
        if name not in declared():
            raise ValueError(f"unknown stream {name!r}; choose from {', '.join(declared())}")
    if not names:
        raise ValueError(f"streams is empty; choose from {', '.join(declared())}, or None for all")
    return frozenset(names)


def validate_on_draw(on_draw: Any) -> str:
    """Check an ``on_draw=`` argument."""
    if on_draw not in ON_DRAW:
        raise ValueError(f"unknown on_draw {on_draw!r}; choose from {', '.join(ON_DRAW)}")
    return on_draw


HUB = Hub()

__all__ = ["HUB", "Hub", "install_order", "validate_streams", "validate_on_draw"]
