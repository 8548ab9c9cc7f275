"""Child processes: a forked child keeps recording, and its events reach the parent's trace.

A process forked while a trace records (``os.fork``, ``multiprocessing`` with
fork, a fork ``Pool``, ``ProcessPoolExecutor``, a ``DataLoader``'s workers)
goes on recording in the child, into a trace of its own. The child writes its
events, as its trace holds them with the lines of their stacks, to a spool file
of its own in a temporary folder (marshalled records, one per write): within
about 20 ms of a pause in its draws, every 50 ms while it keeps drawing, and at
every way out it can see: ``atexit`` and ``os._exit`` (multiprocessing and
DataLoader workers end through it, skipping ``atexit``). A child killed by a
signal (``Pool.terminate``'s SIGTERM, SIGKILL) loses what it drew since its
last write. When a parent's trace ends, the
events its children spooled for it are merged into it, each keeping its pid;
the outermost trace removes the folder, and a child still running then finds
it gone, stops recording and takes its hooks off.

Each process also notes where each of its streams started from: the digest of
the full state at the fork and after each seed. Two processes that drew from
one state drew the same numbers: a ``duplicate`` finding (see ``trace``).

Nothing here runs on the hot path: the child's wrappers record as the
parent's do, and one thread copies what they recorded out of the trace (and,
in a forked child, lets go of the frames the stack cache pinned).
"""

from __future__ import annotations

import _thread
import array
import atexit
import hashlib
import linecache
import os
import select
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any, cast

from ._hotpath import SPEEDUPS as _speedups
from ._model import UNATTRIBUTED
from ._spool import BUSY_FLUSH_INTERVAL, FLUSH_INTERVAL, record, records
from .sources._base import unmoved

#: how long the end of a block waits, at most, for running children to write what they hold
SETTLE_WAIT = 0.1
#: how long it waits, at most, for a child forked an instant before to start writing
START_WAIT = 1.0
SUFFIX = ".spool"  # a spool file's name ends so


# -- digests: which state a stream drew from ------------------------------------------
def state_digests(source: Any) -> dict[str, str]:
    """sub-stream -> a digest of its full state (equal digests: the same numbers to come)."""
    out = {}
    for stream, state in source.state().items():
        h = hashlib.blake2b(digest_size=12)
        data = source.state_bytes(state)  # the source knows its state's form (a tensor's bytes)
        if data is not None:
            h.update(data)
        else:
            _feed(h, state)
        out[stream] = h.hexdigest()
    return out


def _feed(h: Any, value: Any) -> None:
    """Feed a canonical form of a state (tuples, dicts, arrays, tensors) to ``h``."""
    if isinstance(value, dict):
        h.update(b"{")
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (tuple, list)):
        if len(value) > 8:
            try:  # random's 625 twister words: packed, not repr'd (array refuses anything but ints)
                h.update(b"[")
                h.update(array.array("Q", value).tobytes())
                return
            except (TypeError, OverflowError):
                pass
        h.update(b"(")
        for item in value:
            _feed(h, item)
        h.update(b")")
    elif isinstance(value, (bytes, bytearray)):
        h.update(bytes(value))
    elif hasattr(value, "tobytes") and hasattr(value, "dtype"):  # a NumPy array
        h.update(value.tobytes())
    else:
        h.update(repr(value).encode())


class ForkDigests:
    """The digests of where streams stand at a fork: the parent's before it, the child's after.

    A full-state read costs up to tens of microseconds a stream (NumPy's ``get_state()``),
    more in a child just forked, whose every page is still its parent's. A stream
    whose quick state (``Source.snapshot()``, which moves with every draw and seed)
    is what it was at the last read still has that read's digest: a DataLoader's
    second worker reuses the first's, and each worker its parent's, except for the
    streams CPython reseeds in the child.
    """

    def __init__(self) -> None:
        #: stream -> (its snapshot, its digests), as last read
        self._last: dict[str, tuple[Any, list[tuple[str, str]]]] = {}

    def read(self, rec: Any) -> list[tuple[str, str]]:
        """(sub-stream, digest) for every installed stream, as it stands now."""
        found: list[tuple[str, str]] = []
        last, now = self._last, {}
        for name, source in list(rec.sources.items()):
            try:
                snapshot = source.snapshot()  # first: a draw between the two reads makes them differ
            except Exception:  # noqa: BLE001
                snapshot = None
            kept = last.get(name)
            if (
                kept is not None
                and snapshot is not None
                and not source.stream.reseeded_at_fork
                and unmoved(source, kept[0], snapshot)
            ):
                digests = kept[1]
            else:
                try:
                    digests = list(state_digests(source).items())
                except Exception:  # noqa: BLE001 (a state that cannot be read is no finding, never an error)
                    continue
            if snapshot is not None:
                now[name] = (snapshot, digests)
            found.extend(digests)
        self._last = now
        return found

    def forget(self) -> None:
        self._last = {}


#: a Python child started by ``subprocess``: its command line (``_subprocess.begin`` sets it)
COMMAND: str | None = None


def role() -> str | None:
    """What this process is, where a library says so: a DataLoader worker, a pool worker, a command."""
    data = sys.modules.get("torch.utils.data")
    if data is not None:
        try:
            info = data.get_worker_info()
        except Exception:  # noqa: BLE001
            info = None
        if info is not None:
            return f"DataLoader worker {info.id}"
    mp = sys.modules.get("multiprocessing")
    if mp is not None:
        try:
            name = mp.current_process().name
        except Exception:  # noqa: BLE001
            return None
        if "PoolWorker" in name:
            return "pool worker"
        if name.startswith("SpawnProcess") or name.startswith("ForkProcess") or name.startswith("Process-"):
            return "multiprocessing.Process"
        if name != "MainProcess":
            return name
    return COMMAND


#: how to have each kind of child traced
_ADVICE = {
    "DataLoader worker": "start the trace before the loader's first iteration, or use `rngtrace run`",
    "multiprocessing pool worker": "make the Pool inside the trace, or use `rngtrace run`",
    "ProcessPoolExecutor worker": "make the executor inside the trace, or use `rngtrace run`",
    "multiprocessing process": "start it inside the trace, or use `rngtrace run`",
}
#: the pids of the live children last seen -> their notes: the same children are named again at no cost
_UNTRACED: dict[frozenset, list[str]] = {}


def untraced_children() -> tuple[list[int], list[str]]:
    """The live ``multiprocessing`` children a trace starting now cannot follow: their pids, and notes naming them.

    A process already running when a trace starts draws where the trace cannot see it:
    said, grouped by kind, rather than left silent. Nothing is imported for it.
    """
    mp = sys.modules.get("multiprocessing")
    if mp is None:
        return [], []
    try:
        children = {child.pid: child for child in mp.active_children()}
    except Exception:  # noqa: BLE001 (a question, never an error of the program's)
        return [], []
    if not children:
        return [], []
    key = frozenset(children)
    notes = _UNTRACED.get(key)
    if notes is None:
        _UNTRACED.clear()
        notes = _UNTRACED[key] = _name_children(children)
    return sorted(children), list(notes)


def _name_children(children: dict[int, Any]) -> list[str]:
    """The notes for ``children`` (pid -> Process), one per kind of worker."""
    kinds = {pid: "multiprocessing pool worker" for pid, child in children.items() if "PoolWorker" in child.name}
    if len(kinds) < len(children):
        # A started Process no longer holds its target: the loaders and executors that own the rest
        # say which they are. Looked for once per set of children (a scan of the live objects).
        kinds.update({pid: kind for pid, kind in _owned_workers().items() if pid in children and pid not in kinds})
    grouped: dict[str, list[int]] = {}
    for pid in sorted(children):
        grouped.setdefault(kinds.get(pid, "multiprocessing process"), []).append(pid)
    notes = []
    for kind, pids in grouped.items():
        many = len(pids) > 1
        notes.append(
            f"{len(pids) if many else 'a'} {kind}{'s' if many else ''} (pid{'s' if many else ''} "
            f"{', '.join(map(str, pids))}) started before this trace {'are' if many else 'is'} not traced: "
            f"{_ADVICE[kind]}"
        )
    return notes


def _owned_workers() -> dict[int, str]:
    """pid -> kind, for the workers of the live DataLoader iterators and ProcessPoolExecutors."""
    owners = []
    dataloader = sys.modules.get("torch.utils.data.dataloader")
    if dataloader is not None:
        owners.append((getattr(dataloader, "_MultiProcessingDataLoaderIter", None), "DataLoader worker"))
    futures = sys.modules.get("concurrent.futures.process")
    if futures is not None:
        owners.append((getattr(futures, "ProcessPoolExecutor", None), "ProcessPoolExecutor worker"))
    owners = [(cls, kind) for cls, kind in owners if isinstance(cls, type)]
    if not owners:
        return {}
    import gc

    out: dict[int, str] = {}
    for obj in gc.get_objects():
        for cls, kind in owners:
            if issubclass(type(obj), cls):  # type: ignore[arg-type]  # type(), not isinstance: a lazy proxy warns on __class__
                workers = getattr(obj, "_workers", None) or list((getattr(obj, "_processes", None) or {}).values())
                for worker in workers:
                    pid = getattr(worker, "pid", None)
                    if pid is not None:
                        out[pid] = kind
    return out


def read_wrapper_sources() -> None:
    """Put the Python recording wrapper's source lines in ``linecache``, before the first fork.

    A forked child that formats a stack through that wrapper would read and tokenize
    these files again, in every child: torch formats one at every ``torch.manual_seed``
    until CUDA is initialised (which it never is in a forked worker), and a DataLoader
    worker seeds torch as it starts. Read here once, every child inherits them.
    """
    from . import _caller
    from .sources import _base

    for module in (_base, _caller):
        filename = getattr(module, "__file__", None)
        if filename:
            linecache.getlines(filename)


# -- the parent's side: one folder while any trace records --------------------------------
class Spool:
    """The folder children write to, made at the first fork under a trace and removed by the last trace.

    A forked child that records inherits it (its own children write there too); only the
    process that made it collects from it and removes it.
    """

    def __init__(self) -> None:
        self.path: str | None = None
        self.owner: int | None = None
        #: the file the child of the fork under way will write (made by the parent before it forks)
        self.reserved: str | None = None
        self._forks = 0
        #: where the streams stood at the last fork (a forked child inherits it, and starts from there)
        self.digests = ForkDigests()

    def ensure(self) -> str:
        """The folder, made now if need be (by the process that will collect from it and remove it)."""
        if self.path is None:
            read_wrapper_sources()
            self.path = tempfile.mkdtemp(prefix=f"rngtrace-spool-{os.getpid()}-")
            self.owner = os.getpid()
        return self.path

    def reserve(self) -> str:
        """Before a fork: make the folder if need be, and the empty file the child will write to."""
        self.reserved = None
        folder = self.ensure()
        self._forks += 1
        # Named by the forking process and its count: a grandchild's name never meets a child's.
        path = os.path.join(folder, f"{os.getpid()}-{self._forks}{SUFFIX}")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self.reserved = path
        return path

    def forget(self) -> None:
        """In a child that does not record, or no longer: the folder is not its to write to."""
        self.path = self.owner = self.reserved = None
        self.digests.forget()

    def collect(self, token: int) -> list[ChildLog]:
        """Every child's log spooled for the session ``token``, after letting running children write."""
        if self.path is None or self.owner != os.getpid():
            return []
        logs, unstarted = self._read(token)
        # A child that has not written its header yet was forked an instant ago: give it a moment
        # (it writes the header first thing); one that is running gets one write interval or so.
        deadline = time.monotonic() + START_WAIT
        while unstarted and time.monotonic() < deadline:
            time.sleep(FLUSH_INTERVAL)
            logs, unstarted = self._read(token)
        deadline = time.monotonic() + SETTLE_WAIT
        while any(log.running() for log in logs) and time.monotonic() < deadline:
            time.sleep(FLUSH_INTERVAL)
            logs, _ = self._read(token)
        return logs

    def _read(self, token: int) -> tuple[list[ChildLog], bool]:
        """The logs spooled for ``token``, and whether a reserved file is still without its header."""
        logs = []
        unstarted = False
        try:
            names = sorted(os.listdir(cast(str, self.path)))
        except OSError:
            return [], False  # the folder is gone (removed by hand): nothing to merge
        for name in names:
            if not name.endswith(SUFFIX):
                continue
            log = ChildLog.read(os.path.join(self.path, name))  # type: ignore[arg-type]
            if log is None:
                unstarted = True
            elif token in log.tags:
                logs.append(log)
        logs.sort(key=lambda log: (log.started, log.pid))
        return logs, unstarted

    def remove(self) -> None:
        """The last trace ended: remove the folder (a child still running then stops recording)."""
        path, owner = self.path, self.owner
        if owner != os.getpid():
            return  # a child's inherited copy: the folder is its parent's
        self.path = self.owner = None
        # The digests stay: each is reused only while its stream's snapshot says it has not
        # moved, so a DataLoader's next epoch (a block of its own) need not read them afresh.
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


class ChildLog:
    """What one child spooled: its process facts, events with resolved stacks, origins and exit."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ppid = 0
        self.start = "fork"
        self.started = 0.0
        self.role: str | None = None
        self.exit: str | None = None
        #: it ended without writing its exit (SIGKILL, a crash): its last events may be lost
        self.abrupt = False
        #: its last record said it waits for its parent with everything written (a pool worker between tasks)
        self.waiting = False
        self.tags: set[int] = set()
        #: the child's stack id -> its frames, ((filename, lineno, function), ...)
        self.stacks: dict[int, tuple] = {}
        #: the child's thread key -> its name
        self.threads: dict[int, str] = {}
        #: the child's raw events, as its trace holds them: (stream, kind, api, count, stack id,
        #: thread key, detail), with (note, noticing stack id) as the detail of an unattributed move
        self.events: list[tuple] = []
        #: (sub-stream, digest, why, index of the next event at the time)
        self.origins: list[tuple[str, str, str, int]] = []
        #: (stream, kind, api, stack id, calls, values) past the child's max_events
        self.overflow: list[tuple] = []
        self.dropped = 0

    def running(self) -> bool:
        """No exit written, and the process has not ended (it may yet write)."""
        return self.exit is None and _ended(self.pid) is None

    @classmethod
    def read(cls, path: str) -> ChildLog | None:
        try:
            with open(path, "rb") as src:
                data = src.read()
        except OSError:
            return None
        log: ChildLog | None = None
        for entry in records(data):
            if entry[0] == "process":
                log = cls(entry[1])
                log.ppid, log.start, log.started, log.tags = entry[2], entry[3], entry[4], set(entry[5])
            elif log is None:
                return None
            elif entry[0] == "flush":
                _, stacks, threads, events, origins, role, end = entry
                log.stacks.update(stacks)
                log.threads.update(threads)
                log.events += events
                log.origins += origins
                if role is not None:
                    log.role = role
                if end is not None:
                    overflow, log.dropped, log.exit = end
                    log.overflow = list(overflow)
                log.waiting = False
            elif entry[0] == "waiting":
                log.waiting = True
        if log is not None and log.exit is None:
            ended = _ended(log.pid)
            if ended is not None:
                # It wrote no exit: what it drew last is lost, unless it was waiting with all written.
                log.exit, log.abrupt = ended, not log.waiting
        return log


def _ended(pid: int) -> str | None:
    """How process ``pid`` ended, or None while it runs.

    A child of ours that has ended but not been reaped is looked at without reaping
    it (the program's own wait still gets its status); any other is asked with signal 0.
    """
    info: Any
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        info = False  # not our child, or already reaped
    except (OSError, AttributeError):
        info = False
    if info is None:
        return None  # our child, still running
    if info:
        if info.si_code == os.CLD_KILLED or info.si_code == os.CLD_DUMPED:
            return f"killed by signal {info.si_status}"
        return "normal" if info.si_status == 0 else f"exit code {info.si_status}"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return "ended abruptly"
    except OSError:
        pass
    return None


#: the record a child writes as it waits for its parent with nothing unwritten (``ChildWriter.before_wait``)
_WAITING = record(("waiting",))


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
        self._real_exit: Callable[[int], Any] = os._exit
        #: what lets go of pinned frames, run between writes (the catch-all sets it: ``after_fork``)
        self.sweep: Any | None = None
        header = ("process", os.getpid(), os.getppid(), start, time.time(), tuple(tags))
        # The parent made the file; a folder already gone (its block ended) means: do not record.
        self._fd = os.open(self.file, os.O_WRONLY | os.O_APPEND)
        self._write(record(header))
        self._install_exits()
        # A bare thread: threading.Thread.start() would wait until the new thread runs, and
        # right after a fork (the parent forking the next worker, siblings starting) that
        # can take milliseconds of the child's start. It never draws, so it needs no name.
        # It is made with SIGTERM blocked, from its first instant: a SIGTERM it took would trip
        # the handler but leave the main thread asleep in a lock (a pool worker waiting for a
        # task), never to run it, and the worker would never die.
        _start_without_sigterm(self._run)

    # -- ways out ----------------------------------------------------------------------
    def _install_exits(self) -> None:
        atexit.register(self._at_exit)

        def _exit(code: int, _self: ChildWriter = self) -> None:
            if isinstance(code, int) and -(2**31) <= code < 2**31:  # else the real one raises: the child goes on
                _self.finish(f"exit code {code}" if code else "normal", leaving=True)
            _self._real_exit(code)

        self._exit = _exit
        os._exit = _exit  # type: ignore[assignment]  # multiprocessing and DataLoader workers leave through it, skipping atexit
        global _WRITER
        _WRITER = self
        _flush_before_sends()
        # SIGTERM (Pool.terminate(), a DataLoader shut down mid-epoch) wakes the writer thread,
        # which writes the rest and lets the child die of it (_speedups.on_sigterm: a Python handler
        # would hang a worker asleep in a lock). Without the accelerator, the last writes' worth is lost.
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

    def _restore_exits(self) -> None:
        global _WRITER
        atexit.unregister(self._at_exit)
        if os._exit is self._exit:  # never over what someone put there since
            os._exit = self._real_exit  # type: ignore[assignment]
        if _WRITER is self:
            _WRITER = None
        _restore_sends()
        self._stop_waking()

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
        if len(session.trace.raw) + len(session.origins) != self._written + self._origins or role() != self._role:
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

    def _at_exit(self) -> None:
        self.finish("normal")

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
        now = role()
        changed = now is not None and now != self._role
        if changed:
            self._role = now
        end = None
        sids = {raw[4] for raw in events}
        if final is not None:
            overflow = tuple((*key, calls, values) for key, (calls, values) in list(trace.overflow.items()))
            sids.update(row[3] for row in overflow)
            end = (overflow, trace.dropped, final)
        elif not events and not origins and not changed:
            return None
        if UNATTRIBUTED in {raw[1] for raw in events}:  # the stack that noticed a move is in its detail
            sids.update(raw[6][1] for raw in events if raw[1] == UNATTRIBUTED and raw[6].__class__ is tuple)
        stacks = {}
        lines, depth = self.hub.rec.stacks.lines, trace.depth
        for sid in sids - self._stacks:
            if sid is not None and sid >= 0:
                stacks[sid] = tuple(lines(sid, depth))
        self._stacks.update(stacks)
        threads = {}
        names = self.hub.rec.thread_names
        for key in {raw[5] for raw in events} - self._threads:
            threads[key] = names.get(key, f"thread-{key}")
        self._threads.update(threads)
        payload = ("flush", stacks, threads, events, tuple(origins), self._role if changed else None, end)
        try:
            return record(payload)
        except ValueError:  # a detail marshal cannot write (an object some source passed): its text
            return record(("flush", stacks, threads, [_plain(raw) for raw in events], tuple(origins), payload[5], end))

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
            self._restore_exits()


# -- what a traced child's way out and its messages to its parent pass through ----------------
#: the recording child's writer, read by the hooks below (a forked grandchild's replaces its parent's)
_WRITER: ChildWriter | None = None
#: (class, method name, its own method) for each multiprocessing queue method that writes first
_SENDS: list[tuple[type, str, Any]] = []


def _flush_before_sends() -> None:
    """Make each multiprocessing queue's ``put`` and ``get`` in this child write the child's events first.

    A pool worker, a ProcessPoolExecutor worker and a DataLoader worker each hand their
    results to a queue and wait for work on one: written before that, nothing the parent
    has received can be lost, nor anything drawn by a worker killed while it waits.
    """
    if _SENDS:
        return  # already in place (a grandchild forked from a recording child)
    queues = sys.modules.get("multiprocessing.queues")
    if queues is None:
        return
    for cls in (queues.SimpleQueue, queues.Queue):
        for name, before in (("put", ChildWriter.before_send), ("get", ChildWriter.before_wait)):
            original = cls.__dict__.get(name)
            if original is None:
                continue

            def hooked(queue: Any, *args: Any, _original: Any = original, _before: Any = before, **kwargs: Any) -> Any:
                writer = _WRITER
                if writer is not None:
                    _before(writer)
                return _original(queue, *args, **kwargs)

            hooked.__name__, hooked.__qualname__, hooked.__doc__ = (
                original.__name__,
                original.__qualname__,
                original.__doc__,
            )
            _SENDS.append((cls, name, original))
            setattr(cls, name, hooked)


def _restore_sends() -> None:
    while _SENDS:
        cls, name, original = _SENDS.pop()
        setattr(cls, name, original)


def _start_without_sigterm(run: Any) -> None:
    """Start a thread running ``run`` with SIGTERM blocked in it (a new thread takes its maker's mask)."""
    mask = getattr(signal, "pthread_sigmask", None)
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


# -- spawned and forkserver children ----------------------------------------------------
class SpawnedTarget:
    """A ``multiprocessing`` process's target, wrapped for a child that does not fork from here.

    Spawn and forkserver start a fresh interpreter that unpickles the process object:
    this object travels in it instead of the target, and in the child starts a trace
    of the child's own (spooled like a forked child's) before calling the target.
    Only the process object sent to the child holds it: the parent's keeps its target.
    """

    def __init__(self, target: Any, file: str, spec: tuple, start: str, begin: Callable[[Any], None]) -> None:
        self.target = target
        #: the hub's function that starts the child's trace: a module-level function, pickled by
        #: name, so that unpickling this object in the child imports the hub that runs it
        self.begin = begin
        #: (streams, depth, max_events, tags) of the child's trace: ``child_spec``
        self.file, self.spec, self.start = file, spec, start

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            self.begin(self)
        except Exception:  # noqa: BLE001 (a child the tracer cannot follow runs untraced)
            try:
                os.remove(self.file)  # the parent need not wait for it
            except OSError:
                pass
        return self.target(*args, **kwargs)


def child_spec(sessions: tuple) -> tuple[tuple[str, ...], int, int, tuple[int, ...]]:
    """(streams, depth, max_events, tags) of a child's trace: what every one of ``sessions`` records."""
    streams = frozenset().union(*(s.streams for s in sessions))
    return (
        tuple(sorted(streams)),
        max(s.trace.depth for s in sessions),
        max(s.trace.max_events for s in sessions),
        tuple(sorted({t for s in sessions for t in s.tags})),
    )


def start_method(process: Any) -> str | None:
    """How ``process`` (a multiprocessing BaseProcess) will start: fork, spawn or forkserver."""
    method = getattr(process, "_start_method", None)
    if method:
        return str(method)
    try:  # a plain Process: the default context's, without fixing it (get_start_method() would)
        import multiprocessing.context as context

        default = context._default_context
        return str((default._actual_context or default._default_context)._name)  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        return None


class SpawnWatch:
    """While any trace records: ``multiprocessing``'s ``BaseProcess.start`` wraps spawned children's targets.

    Where ``multiprocessing`` is not imported yet when the trace starts (``rngtrace run``,
    a block around code that imports it), a post-import hook wraps it the moment it is;
    the hook goes with the trace. ``set`` runs under the hub's lock; the hook, in whichever
    thread imports ``multiprocessing``, takes that lock only if it is free (taken in C:
    a Ctrl-C cannot leave it held); where it is busy, the hub is reconciling, and its
    ``set`` at the end of that finds the module imported and wraps it.
    """

    _MODULE = "multiprocessing.process"

    def __init__(self) -> None:
        self.installed: tuple[type, Any] | None = None
        self._made: tuple[Any, Any] | None = None  # (original, its wrapper), made once
        self._hook: Any | None = None  # the post-import hook waiting for multiprocessing
        self._wanted = False

    def set(self, wanted: bool, hub: Any) -> None:
        """Install or remove the wrapper of ``BaseProcess.start`` (idempotent; under the hub's lock)."""
        self._wanted = wanted
        if wanted:
            if self.installed is None:
                module = sys.modules.get(self._MODULE)
                if module is None:
                    self._watch(hub)
                else:
                    self._install(module, hub)
            return
        if self._hook is not None:
            self._unwatch()
        if self.installed is not None:
            cls, original = self.installed
            if getattr(cls.__dict__.get("start"), "__wrapped__", None) is original:
                cls.start = original  # type: ignore[attr-defined]  # never someone else's patch over ours
            self.installed = None

    def _install(self, module: Any, hub: Any) -> None:
        cls = module.BaseProcess
        original = cls.__dict__["start"]
        made = self._made
        if made is None or made[0] is not original:
            if getattr(original, "__wrapped__", None) is not None:
                return  # someone else's patch (or ours, left by an interrupted undo): never stacked

            def start(process: Any, _original: Any = original) -> None:
                return hub.spawning(process, _original)

            start.__wrapped__ = original  # type: ignore[attr-defined]
            start.__name__, start.__qualname__ = original.__name__, original.__qualname__
            start.__doc__ = original.__doc__
            self._made = made = (original, start)
        self.installed = (cls, original)  # first: an undo completes whatever part is in place
        cls.start = made[1]

    def _watch(self, hub: Any) -> None:
        if self._hook is not None:
            return
        import wrapt

        def imported(module: Any) -> None:
            def install() -> None:
                if self._hook is imported and self._wanted and self.installed is None:
                    self._install(module, hub)
                if self._hook is imported:
                    self._hook = None

            hub.call_if_free(install)

        self._hook = imported
        wrapt.register_post_import_hook(imported, self._MODULE)

    def _unwatch(self) -> None:
        from ._patches import unregister_post_import_hook

        if self._hook is not None:
            unregister_post_import_hook(self._MODULE, self._hook)
        self._hook = None  # only now: an unwatch cut short by a Ctrl-C is finished by the hub's retry

    def describe(self) -> list[str]:
        if self.installed is not None:
            return ["multiprocessing.process.BaseProcess.start"]
        return ["import hook for multiprocessing.process"] if self._hook is not None else []
