"""Child processes: a forked child keeps recording, and its events reach the parent's trace.

A process forked while a trace records (``os.fork``, ``multiprocessing`` with
fork, a fork ``Pool``, ``ProcessPoolExecutor``, a ``DataLoader``'s workers)
goes on recording in the child, into a trace of its own (spawned and
forkserver children start one too: ``_spawned``). The child writes its
events, as its trace holds them with the lines of their stacks, to a spool file
of its own in a temporary folder (``_childlogs``; marshalled records, one per
write): within about 20 ms of a pause in its draws, every 50 ms while it keeps
drawing, before each message it sends its parent through a queue, and at every
way out it can see: ``atexit`` and ``os._exit`` (multiprocessing and DataLoader
workers end through it, skipping ``atexit``); those hooks are the hub's
(``_hooks.ProcessHooks``), and call the writer here. A child killed by a
signal (``Pool.terminate``'s SIGTERM, SIGKILL) loses what it drew since its
last write, except where the accelerator lets SIGTERM wake the writer first.
When a parent's trace ends, the events its children spooled for it are merged
into it, each keeping its pid; the outermost trace removes the folder, and a
child still running then finds it gone, stops recording and takes its hooks off.
Where each stream started from in each process is ``_digests``'.

Nothing here runs on the hot path: the child's wrappers record as the
parent's do, and one thread copies what they recorded out of the trace (and,
in a forked child, lets go of the frames the stack cache pinned).
"""

from __future__ import annotations

import _signal
import _thread
import operator
import os
import select
import signal
import threading
import time
from typing import Any

from ._hotpath import SPEEDUPS as _speedups
from ._kinds import UNATTRIBUTED
from ._roles import role
from ._spool import BUSY_FLUSH_INTERVAL, FLUSH_INTERVAL, record

#: the record a child writes as it waits for its parent with nothing unwritten (``ChildWriter.before_wait``)
_WAITING = record(("waiting",))
#: a raw event's kind, stack id and thread key
_KIND_OF, _SID_OF, _THREAD_OF = operator.itemgetter(1), operator.itemgetter(4), operator.itemgetter(5)
#: ``role()`` of a DataLoader worker, which stays what it is for the worker's life
_WORKER_ROLE = "DataLoader worker "


# -- the child's side ----------------------------------------------------------------
class ChildWriter:
    """In a forked child: copy the child trace's events to its spool file, and end it on the way out.

    Each write is one record: the events recorded since the last one as the trace holds
    them, with the frames of each stack id and the name of each thread met for the first
    time, all in one ``marshal`` call; the parent resolves nothing (``RawStore.merge_child``).
    """

    def __init__(self, hub: Any, session: Any, file: str, tags: tuple[int, ...], start: str = "fork") -> None:
        self.hub = hub
        self.session = session
        self.folder = os.path.dirname(file)
        self.file = file
        self._written = 0  # events of the trace already written
        self._origins = 0  # origins already written
        self._stacks: set[int] = set()  # stack ids whose frames are written
        self._threads: set[int] = set()  # thread keys whose names are written
        self._role: str | None = None
        self._lock = threading.Lock()
        self._done = False
        self._finishing = False
        self._terminating = False
        self._said_waiting = False  # the last record written says the child waits, all written
        #: what lets go of pinned frames, run between writes (the catch-all sets it: ``after_fork``)
        self.sweep: Any | None = None
        header = ("process", os.getpid(), os.getppid(), start, time.time(), tuple(tags))
        # The parent made the file; a folder already gone (its block ended) means: do not record.
        self._fd = os.open(self.file, os.O_WRONLY | os.O_APPEND)
        # SIGTERM wakes the writer before the header says the child started: a Pool terminated
        # while this worker still starts (its sibling took every task) had it die between the two,
        # noted as ended abruptly; now its writer, once started, writes how it ended.
        self._wake_on_sigterm()
        wake = self._wake
        try:
            self._write(record(header))
            # A bare thread: threading.Thread.start() would wait until the new thread runs, and
            # right after a fork (the parent forking the next worker, siblings starting) that
            # can take milliseconds of the child's start. It never draws, so it needs no name.
            # It is made with SIGTERM blocked, from its first instant: a SIGTERM it took would trip
            # the handler but leave the main thread asleep in a lock (a pool worker waiting for a
            # task), never to run it, and the worker would never die.
            _start_without_sigterm(self._run)
        except BaseException:
            # No writer will read the pipe: SIGTERM must kill at once again, or nothing ever would.
            self._stop_waking()
            for fd in wake or ():
                os.close(fd)
            raise

    # -- ways out (called by the hub's hooks: ``_hooks.ProcessHooks``) ------------------------
    def _wake_on_sigterm(self) -> None:
        """SIGTERM (Pool.terminate(), a DataLoader shut down mid-epoch) wakes the writer thread, which
        writes the rest and lets the child die of it (_speedups.on_sigterm: a Python handler would hang
        a worker asleep in a lock). Without the accelerator, the last writes' worth is lost."""
        self._wake: tuple[int, int] | None = None
        if _speedups is not None:
            wake = os.pipe()
            try:
                if _speedups.on_sigterm(wake[1]):
                    self._wake = wake
            finally:
                if self._wake is None:
                    os.close(wake[0])
                    os.close(wake[1])

    def leave(self, code: Any) -> None:
        """The child leaves through ``os._exit(code)``: end its trace and write the rest, with its exit code."""
        if isinstance(code, int) and -(2**31) <= code < 2**31:  # else the real one raises: the child goes on
            self.finish(f"exit code {code}" if code else "normal", leaving=True)

    def at_exit(self) -> None:
        """The child's interpreter is exiting (``atexit``): end its trace and write the rest."""
        self.finish("normal")

    def _stop_waking(self) -> None:
        """SIGTERM kills at once again. The pipe stays open: the writer thread may be waiting on it
        (closing it under a select() wakes that as if a SIGTERM came), and a number freed here could
        be another file's by the time anyone looks; the writer closes it on its way out (``_run``)."""
        if self._wake is not None:
            _speedups.on_sigterm(-1)  # type: ignore[union-attr]
            self._wake = None

    def before_send(self) -> None:
        """The child is about to send its parent something (a task's result): what it drew is written first.

        So a parent that has a worker's result has its events too, whatever ends the worker
        next (``Pool.__exit__`` terminates its workers).
        """
        if self._done or self._finishing:
            return
        session = self.session
        if (
            len(session.trace.raw) + len(session.origins) != self._written + self._origins
            or self._role_now() != self._role
        ):
            try:
                self.flush()
            except Exception:  # noqa: BLE001 (a spool that cannot be written never breaks the child)
                pass

    def before_wait(self) -> None:
        """The child is about to wait for its parent (a pool worker for its next task): written up to now, said so.

        Where SIGTERM wakes the writer (the accelerator) it writes the rest itself; without it,
        a worker that ``Pool.terminate()`` kills while it waits has lost nothing, and says so.
        """
        if self._wake is not None or self._done or self._finishing:
            return
        try:
            self.flush(waiting=True)
        except Exception:  # noqa: BLE001 (a spool that cannot be written never breaks the child)
            pass

    def _terminated(self) -> None:
        """SIGTERM came (``Pool.terminate()``, a DataLoader shut down mid-epoch): write the rest, then die of it."""
        try:
            self.flush(final=f"killed by signal {int(signal.SIGTERM)}")
        except Exception:  # noqa: BLE001
            pass
        _speedups.die_of_sigterm()  # type: ignore[union-attr]

    # -- writing -----------------------------------------------------------------------
    def _run(self) -> None:
        # A write costs ~0.1 ms of the child's time, a look almost nothing. A child that pauses
        # (a pool worker back from its task, a worker between epochs) is written at the next
        # look, before Pool.terminate() or its parent's end can come; one that keeps drawing
        # (a DataLoader worker) every BUSY_FLUSH_INTERVAL, and in full on its way out.
        wake = self._wake
        try:
            self._look()
        finally:
            # Nobody reads the pipe now: SIGTERM kills at once again. Not while the child finishes:
            # finish() writes its end first, then puts the default back (a SIGTERM meanwhile waits),
            # and the pipe then goes with the process.
            if not self._terminating and not self._finishing:
                self._stop_waking()
                if wake is not None:
                    for fd in wake:
                        try:
                            os.close(fd)
                        except OSError:
                            pass

    def _look(self) -> None:
        session = self.session
        seen, written_at = 0, time.monotonic()
        while True:
            wake = self._wake
            if wake is None:
                time.sleep(FLUSH_INTERVAL)
            elif select.select((wake[0],), (), (), FLUSH_INTERVAL)[0] and os.read(wake[0], 16):
                # A byte from the SIGTERM handler (nothing else writes there).
                self._terminating = True
                self._terminated()
                return
            if self._done or self._finishing:
                return
            if not os.path.isdir(self.folder):
                self.stop_recording()  # the parent's trace ended: this child runs on untraced
                return
            sweep = self.sweep
            if sweep is not None:
                sweep()
            now, recorded = time.monotonic(), len(session.trace.raw) + len(session.origins)
            drawing, seen = recorded != seen, recorded
            if recorded == self._written + self._origins or (drawing and now - written_at < BUSY_FLUSH_INTERVAL):
                continue  # nothing new, or more to come: a role found since is written with the rest
            try:
                self.flush()
            except Exception:  # noqa: BLE001 (a spool that cannot be written never breaks the child)
                return
            written_at = now

    def flush(self, final: str | None = None, waiting: bool = False) -> None:
        """Write the events recorded since the last write; ``final``: how the child ended, written last.

        ``waiting``: the child is about to wait for its parent (a pool worker for its next task),
        with nothing unwritten: said once, so that a child killed while it waits loses nothing.
        """
        if not self._lock.acquire(timeout=1.0):
            return
        try:
            if self._done:
                return
            if final is not None:
                self._done = True  # first: whatever fails below, nothing is written after the end
            record = self._next(final)
            if record is not None:
                self._write(record)
                self._said_waiting = False
            if waiting and not self._said_waiting:
                self._write(_WAITING)
                self._said_waiting = True
        finally:
            self._lock.release()

    def _next(self, final: str | None) -> bytes | None:
        """The record of what was recorded since the last write, or None if there is nothing new."""
        trace = self.session.trace
        events = trace.raw[self._written :]  # one copy, in C: the wrappers append meanwhile
        self._written += len(events)
        origins = self.session.origins[self._origins :]
        self._origins += len(origins)
        now = self._role_now()
        changed = now is not None and now != self._role
        if changed:
            self._role = now
        end = None
        # A DataLoader worker writes before every batch it sends: the sets are made in C.
        sids = set(map(_SID_OF, events))
        if final is not None:
            overflow = tuple((*key, calls, values) for key, (calls, values) in list(trace.overflow.items()))
            sids.update(row[3] for row in overflow)
            end = (overflow, trace.dropped, final)
        elif not events and not origins and not changed:
            return None
        if UNATTRIBUTED in set(map(_KIND_OF, events)):  # the stack that noticed a move is in its detail
            sids.update(raw[6][1] for raw in events if raw[1] == UNATTRIBUTED and raw[6].__class__ is tuple)
        stacks = {}
        lines, depth = self.hub.rec.stacks.lines, trace.depth
        for sid in sids - self._stacks:
            if sid is not None and sid >= 0:
                stacks[sid] = tuple(lines(sid, depth))
        self._stacks.update(stacks)
        threads = {}
        names = self.hub.rec.thread_names
        for key in set(map(_THREAD_OF, events)) - self._threads:
            threads[key] = names.get(key, f"thread-{key}")
        self._threads.update(threads)
        payload = ("flush", stacks, threads, events, tuple(origins), self._role if changed else None, end)
        try:
            return record(payload)
        except ValueError:  # a detail marshal cannot write (an object some source passed): its text
            return record(("flush", stacks, threads, [_plain(raw) for raw in events], tuple(origins), payload[5], end))

    def _role_now(self) -> str | None:
        """What this process is now (``role()``); a DataLoader worker is one for its life, and is not asked again."""
        if self._role is not None and self._role.startswith(_WORKER_ROLE):
            return self._role  # torch sets a worker's info once, as it starts, and never again
        return role()

    def _write(self, data: bytes) -> None:
        while data:
            n = os.write(self._fd, data)
            data = data[n:]

    # -- ending ------------------------------------------------------------------------
    def finish(self, how: str, leaving: bool = False) -> None:
        """The child is leaving: end its trace and write the rest, with how it ended.

        ``leaving``: through ``os._exit``, where nothing runs after this: the trace stops
        recording, but its hooks are left to go with the process (taking them off would
        only cost the parent's wait for this worker).
        """
        if self._done or self._finishing:
            return  # one writer, once (atexit after an os._exit that is already writing)
        self._finishing = True
        try:
            if leaving:
                self.hub.leave_child(self.session)
            else:
                self.hub.end_child(self.session)
        except BaseException:  # noqa: BLE001 (the child is leaving: what it recorded still counts)
            pass
        try:
            self.flush(final=how)
        except Exception:  # noqa: BLE001 (a spool that cannot be written never breaks the child)
            self._done = True
        finally:
            self._after_end()

    def _after_end(self) -> None:
        """The end is written: SIGTERM's default back, and a SIGTERM that came meanwhile kills now, as untraced."""
        wake = self._wake
        if wake is None:
            return
        try:
            came = bool(select.select((wake[0],), (), (), 0)[0]) and bool(os.read(wake[0], 16))
        except (OSError, ValueError):
            came = False
        if not self._terminating:  # else the writer thread is ending it already
            self._stop_waking()
            if came:
                _speedups.die_of_sigterm()  # type: ignore[union-attr]

    def stop_recording(self) -> None:
        """The parent's trace ended before this child: stop recording, leave nothing behind."""
        if self._done or self._finishing:
            return
        self._finishing = self._done = True
        try:
            os.close(self._fd)
        except OSError:
            pass
        try:
            self.hub.end_child(self.session)
        finally:
            self.hub.spool.forget()
            self._stop_waking()


def _start_without_sigterm(run: Any) -> None:
    """Start a thread running ``run`` with SIGTERM blocked in it (a new thread takes its maker's mask)."""
    # The builtin, not signal's wrapper: that turns each number of the old mask into an enum
    # member, ~0.1 ms of a DataLoader worker's start spent on names nobody reads.
    mask = getattr(_signal, "pthread_sigmask", None)
    if mask is None:
        _thread.start_new_thread(run, ())
        return
    old = mask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        _thread.start_new_thread(run, ())
    finally:
        mask(signal.SIG_SETMASK, old)  # a SIGTERM that came meanwhile is delivered here, to this thread


def _plain(raw: tuple) -> tuple:
    """A raw event marshal can write: text where a source passed some other object."""
    stream, kind, api, count, sid, thread, detail = raw
    if not (
        detail is None
        or detail.__class__ is str
        or (
            detail.__class__ is tuple and len(detail) == 2 and detail[0].__class__ is str and detail[1].__class__ is int
        )
    ):
        detail = str(detail)
    if not (count is None or count.__class__ is int):
        try:
            count = int(count)
        except (TypeError, ValueError):
            count = None
    return (str(stream), str(kind), str(api), count, sid if sid.__class__ is int else -1, int(thread), detail)
