"""The hub's side of child processes (``_hub.Hub`` mixes it in).

In the parent: before each fork under a trace, the child's spool file is made and the
streams' digests read (``_before_fork``); at a trace's end what its children spooled
is merged (``_merge_children``). In a child forked or spawned under a trace: a session
of its own, which only logs, and its writer (``_processes.ChildWriter``), whose ways
out and queues the hub hooks (``set_process_hooks``); the child's trace ends with the
child (``end_child``, ``leave_child``) or when its parent's does (``stop_recording``).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

from ._blockend import check_moved
from ._childlogs import Spool
from ._processes import ChildWriter
from ._record import Recording
from ._session import Session, child_session, note_origins
from ._spawned import SpawnedTarget, child_spec, start_method
from ._store import RawStore


class HubChildren:
    """Forks and spawns under a trace: the parent's spool, the child's own session and writer."""

    # What this part uses of the rest of the hub (``_hub.Hub`` makes them).
    rec: Recording
    spool: Spool
    catchall: Any
    _child: ChildWriter | None
    _lock: Any
    _pending_imports: set[str]
    _orphans: list[Session]
    _import_states: dict[str, dict]
    _unsettled: bool
    begin_spawned: Callable[[Any], None]

    if TYPE_CHECKING:

        @property
        def active(self) -> tuple[Session, ...]: ...
        def _locked(self, fn: Callable, *args: Any) -> Any: ...
        def _holding(self, fn: Callable, *args: Any) -> Any: ...
        def _settle(self, sessions: tuple) -> None: ...
        def _stop(self, session: Session, frame: FrameType | None) -> None: ...
        def abandon(self, session: Session) -> None: ...
        def set_process_hooks(self, sessions: tuple) -> None: ...

    @property
    def recording_child(self) -> ChildWriter | None:
        """This process's writer where it is a recording child (its ways out and queues hooked); None elsewhere."""
        return self._child

    # -- the parent's side -----------------------------------------------------------------
    def _merge_children(self, session: Session) -> None:
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
                        note_origins((session,), source, "start")

    def note_end_states(self, trace: RawStore) -> None:
        """Note the full state each of ``trace``'s streams ends in (``rngtrace check`` compares them)."""
        self._locked(self._note_end_states, trace)

    def _note_end_states(self, trace: RawStore) -> None:
        for session in self.active:
            if session.trace is trace:
                for name in session.order:
                    source = self.rec.sources.get(name)
                    if source is not None:
                        note_origins((session,), source, "end")

    def _seeded(self, stream: str) -> None:
        """A recorded seed: where processes are traced or runs compared, note the state each starts from anew."""
        if self.spool.path is None and self._child is None:
            for session in self.active:  # a loop, not any() over a generator: once per seed
                if session.compared:
                    break
            else:
                return  # nothing to compare with: no full-state read per seed
        source = self.rec.sources.get(self.rec.base_of(stream))
        if source is not None:
            note_origins(self.active, source, "seed")

    def spawning(self, process: Any, start: Callable) -> None:
        """``process.start()`` under a trace: a spawn or forkserver child gets a target that records."""
        sessions = self.active
        target = getattr(process, "_target", None)
        method = start_method(process) if sessions and target is not None else None
        if method not in ("spawn", "forkserver"):
            return start(process)  # fork: os.register_at_fork does it; no target: run() overridden
        try:
            wrapped = SpawnedTarget(target, self.spool.reserve(), child_spec(sessions), method, self.begin_spawned)
        except Exception:  # noqa: BLE001 (a process must start whatever the tracer cannot do)
            return start(process)
        process._target = wrapped  # pickled into the child now, by start()
        try:
            return start(process)
        finally:
            process._target = target

    # -- the child's side ------------------------------------------------------------------
    def _after_fork_in_child(self) -> None:
        # The parent's other threads are gone, and any lock one of them held would never be
        # released: reset them all. Under a trace the child goes on recording, into a trace of
        # its own that its parent's merges (_processes); else it runs untraced and unchanged, and
        # whatever hooks it inherited (a recording parent's ways out) come off with the settle below.
        self._lock._at_fork_reinit()
        self._pending_imports.clear()
        self._orphans.clear()  # the parent's: the child ends its own session when it exits
        self._import_states.clear()
        self.rec.after_fork()
        parents, self._child = self.active, None
        if not parents and not self._unsettled:
            # Forked while nothing recorded, and no trace was starting or ending: every hook is
            # off already, so the child has nothing to settle (each fork of a process that traced
            # once, a DataLoader's workers after the block, paid ~0.3 ms here for nothing).
            self.spool.forget()
            return
        child = None
        if parents and self.spool.reserved is not None:
            try:
                child = self._start_child(parents)
            except Exception:  # noqa: BLE001 (a child the tracer cannot follow runs untraced)
                child, writer, self._child = None, self._child, None
                try:
                    os.remove(self.spool.reserved)  # the parent need not wait for it
                except OSError:
                    pass
                if writer is not None:  # made before what failed: it stops, and SIGTERM kills at once again
                    writer.stop_recording()
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

    def _start_child(self, parents: tuple) -> Session:
        """A session of the child's own, recording what its parents recorded, spooled to their folder."""
        session = child_session(*child_spec(parents))
        # CPython reseeds `random` in every forked child (os.register_at_fork): the child starts
        # from its streams as they are now, not from the parent's last recorded call. A fork
        # swaps no generator, so each fingerprint's view still reads the right memory: taken, not remade.
        for name in session.streams:
            if name in self.rec.sources:
                self.rec.rebase(name)
        # Its ways out and its queues call its writer from the settle that follows the publish.
        self._begin_child(session, self.spool.reserved, "fork")  # type: ignore[arg-type]
        return session

    def _begin_child(self, session: Session, file: str, start: str) -> None:
        """A child's session, published already: note where its streams start, and spool it to ``file``."""
        session.trace.go_live(self.rec.stacks.resolve, self.rec.thread_names)
        for name in session.streams:
            source = self.rec.sources.get(name)
            if source is not None:
                session.start_states[name] = source.snapshot()
        # Read in the child: a forked child's `random` was reseeded; a spawned one's streams are new
        # (a forked child's other streams are where the parent's read before the fork left them).
        session.origins.extend((stream, digest, start, 0) for stream, digest in self.spool.digests.read(self.rec))
        self._child = ChildWriter(self, session, file, session.tags, start)

    def start_spawned(self, target: Any) -> None:
        """In a spawned child, before its target runs: record into a trace of its own, spooled to the parent.

        Whatever cuts the start short (an error, a Ctrl-C) ends that trace again and takes
        off every hook it put on: the child then runs untraced.
        """
        session = child_session(*target.spec)
        try:
            self._locked(self._start_spawned_locked, session, target)
        except BaseException:
            writer = self._child
            if writer is not None and writer.session is session:
                writer.stop_recording()  # its thread ends at its next look; SIGTERM's default is back
            self.abandon(session)
            raise

    def _start_spawned_locked(self, session: Session, target: Any) -> None:
        self.spool.path = os.path.dirname(target.file)  # its own children write there too
        self.rec.publish((session,))
        self._settle((session,))
        self._begin_child(session, target.file, target.start)
        self.set_process_hooks(self.active)  # its ways out and its queues now call its writer

    def end_child(self, session: Session) -> None:
        """The child's trace ends (it exits, or its parent's trace ended): the same end as a block's."""
        if session not in self.active:
            return
        self._child = None
        self._locked(self._stop, session, None)

    def leave_child(self, session: Session) -> None:
        """The child leaves through ``os._exit``: note the moves no call made, and stop recording.

        Nothing of the child runs after this, so its hooks go with the process: taking
        them off (and joining the sweeper) would only lengthen its parent's wait for it.
        """
        if session not in self.active:
            return
        self._child = None
        self._holding(self._leave_child_locked, session)

    def _leave_child_locked(self, session: Session) -> None:
        try:
            check_moved(self.rec, session, None)
        finally:
            self.rec.publish(tuple(s for s in self.active if s is not session))
