"""The one owner of global hooks: which traces are active and what they need.

``start`` and ``stop`` change the set of active sessions and then bring the
process in line with it (``_reconcile``): install the sources the sessions
want, take off those they don't, keep the catch-all hook while any source is
in. Reconciling is idempotent, so whatever interrupts it (Ctrl-C between two
restores) is finished by a retry, or at the latest by the next hub call. The
usual trace, the only one active, repeats the install the last lone trace made
(``_lone``: one swap, no questions asked twice) while nothing it depends on
changed, and goes the general way otherwise. The patches live in
``_patches``, every other hook in ``_hooks``, recording in ``_record``; "what
is hooked right now" has one answer: ``HUB.hooked()``.

The hub is one object in three files, each a part it mixes in: this one starts,
stops and reconciles; ``_hubstreams`` takes the streams that arrive during a trace
(a library imported inside it, references bound before it, the catch-all armed by
a move); ``_hubchildren`` is its side of child processes.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

from . import _catchall, _lone
from ._blockend import check_moved, read_settings
from ._childlogs import Spool
from ._hooks import ImportWatch, ProcessHooks
from ._hubchildren import HubChildren
from ._hublock import call_if_free, call_locked, call_when_free
from ._hubstreams import HubStreams
from ._patches import Patches
from ._processes import ChildWriter
from ._record import Recording
from ._roles import untraced_children
from ._session import ON_DRAW, Session, install_order, validate_on_draw, validate_streams
from ._store import RawStore
from .sources import load_source, module_of


def _start_spawned(target: Any) -> None:
    """What a spawned child's ``SpawnedTarget`` calls first: pickled by name, so unpickling imports the hub."""
    HUB.start_spawned(target)


class Hub(HubStreams, HubChildren):
    """Starts and stops traces; installs and removes what they need."""

    #: handed to each spawned child's target (``HubChildren.spawning``), which calls it first
    begin_spawned = staticmethod(_start_spawned)

    def __init__(self) -> None:
        self.rec = Recording()
        self.rec.on_unattributed = self._unattributed
        self.rec.on_pin = self._start_pinning
        self.rec.on_seed = self._seeded
        self.patches = Patches()
        self.imports = ImportWatch()
        self._lock = threading.RLock()
        self.catchall: _catchall.CatchAll | None = None
        #: the folder forked children spool their events to, while any trace records
        self.spool = Spool()
        #: in a child that records: what writes its events out
        self._child: ChildWriter | None = None
        #: what child processes need hooked (BaseProcess.start; in a recording child, its ways out)
        self.hooks = ProcessHooks(self.patches, self.spawning, self.call_if_free)
        #: streams whose library finished importing while another thread held the lock
        self._pending_imports: set[str] = set()
        #: sessions whose block is gone without having ended them, to end once the lock is free
        self._orphans: list[Session] = []
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
        processes = self.hooks.describe()  # BaseProcess.start or the import hook waiting for it; a child's ways out
        if processes:
            out["processes"] = processes
        if self.active:
            out["active"] = len(self.active)
        return out

    # -- starting and stopping -------------------------------------------
    # A face makes its session first and starts it inside a ``try`` whose handler ends it
    # (``abandon``): a Ctrl-C landing anywhere after the start, even before ``start`` has
    # returned, then still finds the session to end.

    def session(self, trace: RawStore, streams: frozenset, on_draw: str) -> Session:
        """A session recording into ``trace``, not started yet (``start``)."""
        return Session(trace, streams, on_draw)

    def start(self, session: Session) -> None:
        """Begin recording into the session's trace; install what it needs."""
        call_locked(self._lock, self._start, session)
        if self._pending_imports or self._orphans:  # (``_locked``, with no call where nothing waits)
            self._after_unlock()

    def _start(self, session: Session) -> None:
        self._open(session)
        catchall = self.catchall
        if catchall is not None and catchall.SWITCHES:
            # Last, and from a small frame: turning events on re-instruments the code of every
            # frame running, so rngtrace's own start runs unseen and its big frames are not there.
            catchall.begin()

    def _open(self, session: Session) -> None:
        rec, trace = self.rec, session.trace
        if rec.hot.now.active:  # (a lone trace's start: none to ask)
            self._end_gone()
        if not self.hooks.forks_watched:  # asked first: the handlers' bound methods are made once
            self.hooks.watch_forks(self._before_fork, self._after_fork_in_child)
        try:
            sessions = self.rec.hot.now.active + (session,)
            if len(sessions) == 1:
                rec.new_warnings()  # each outermost trace warns afresh
                # (an inner trace leaves this to the outer one, whose children follow it)
                trace.untraced, notes = untraced_children()
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

    def stop(self, session: Session, frame: FrameType | None) -> RawStore:
        """End recording into the session's trace; restore what no other trace needs."""
        call_locked(self._lock, self._stop, session, frame)
        if self._pending_imports or self._orphans:
            self._after_unlock()
        return session.trace

    def abandon(self, session: Session) -> None:
        """End ``session`` if it is still active, and finish an install or undo cut short (a Ctrl-C).

        Every face calls this once its block is over, whatever ended it: a Ctrl-C can land
        where no ``try`` of the hub's covers it yet (the first instruction of a call), and
        leave a session running or hooks that no session wants; this finishes the job.
        """
        if session in self.rec.hot.now.active or self._unsettled:
            self._locked(self._finish_cut_short, session)

    def _finish_cut_short(self, session: Session) -> None:
        self._stop_active(session)
        if self._unsettled:
            self._settle(self.active)

    def orphaned(self, session: Session, *_: Any) -> None:
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
        for s in self.rec.hot.now.active:
            if s.gone is not None and s.gone():
                self._stop(s, None)

    def _stop_active(self, session: Session) -> None:
        if session in self.active:  # asked again under the lock: another thread may have ended it
            self._stop(session, None)

    def _stop(self, session: Session, frame: FrameType | None) -> None:
        catchall = self.catchall
        if catchall is not None and catchall.SWITCHES and self.rec.hot.now.active == (session,):
            catchall.pause()  # first, from a small frame (see _start): the last trace's end runs unseen
        self._close(session, frame)

    def _close(self, session: Session, frame: FrameType | None) -> None:
        session.gone = None
        self._end_gone()
        try:
            if session in self.rec.hot.now.active:
                check_moved(self.rec, session, frame)
        finally:
            try:
                self._release(session)
            finally:
                trace = session.trace
                trace.finish(trace.live[0] if trace.live else None, self.rec.thread_names)
                self.rec.forget_sites()  # the C recorder's memo holds the finished trace's rows
                read_settings(trace)
                if session.origins:
                    trace.origins.extend((trace.pid, *origin) for origin in session.origins)
                if self.spool.path is not None:
                    self._merge_children(session)
                if not self.rec.hot.now.active:
                    self.rec.went_idle()  # after the trace took its thread names

    def _release(self, session: Session) -> None:
        self._unsettled = True
        active = self.rec.hot.now.active
        sessions = () if active == (session,) else tuple(s for s in active if s is not session)
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
                if sys.modules.get(module_of(name)) is None:
                    self.watch_import(name, module_of(name))
                elif not self.imports.importing(name):  # else its hook installs it once it is made
                    arriving.append(name)
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
        self.set_process_hooks(sessions)
        if sessions and self.catchall is not None:
            self.catchall.begin()  # a stream arriving mid-trace: its catch-all sees the block at once

    def set_process_hooks(self, sessions: tuple) -> None:
        """Hook what child processes need while ``sessions`` record (``_hooks.ProcessHooks``): none without one."""
        self.hooks.set(bool(sessions), self._child if sessions else None)

    def _locked(self, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` under the hub's lock; then the imports queued meanwhile are taken."""
        result = call_locked(self._lock, fn, *args)
        self._after_unlock()
        return result

    def call_if_free(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` under the hub's lock unless this thread holds it already (a hook fired inside the hub)."""
        call_if_free(self._lock, fn)

    def _if_free(self, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` under the hub's lock where no other thread holds it; else NotImplemented, ``fn`` not called."""
        return call_when_free(self._lock, fn, *args)

    def _holding(self, fn: Callable, *args: Any) -> Any:
        """``fn(*args)`` under the hub's lock, leaving what was queued meanwhile (unlike ``_locked``)."""
        return call_locked(self._lock, fn, *args)

    def _after_unlock(self) -> None:
        """Do what was queued while the lock was taken: the sessions ``orphaned`` and the imports ``_imported``.

        Called by whoever lets go of the lock, and by the hooks themselves: work queued
        while the lock was held is taken by its holder once it lets go, whichever hub call
        that was (a draw starting the sweeper holds it too). Never waits for the lock (a
        hook runs with an import lock held), and never from inside a holder's own work.
        """
        lock = self._lock
        while (self._pending_imports or self._orphans) and not lock._is_owned():
            if call_when_free(lock, self._take_pending) is NotImplemented:
                break

    def _take_pending(self) -> None:
        """End the orphaned sessions, then install the streams queued meanwhile (lock held)."""
        orphans = self._orphans
        while orphans:
            self._stop_active(orphans.pop())
        self._take_imports()


HUB = Hub()

__all__ = ["HUB", "ON_DRAW", "Hub", "install_order", "validate_streams", "validate_on_draw"]
