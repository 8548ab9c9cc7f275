"""Child processes: a forked child keeps recording, and its events reach the parent's trace.

A process forked while a trace records (``os.fork``, ``multiprocessing`` with
fork, a fork ``Pool``, ``ProcessPoolExecutor``, a ``DataLoader``'s workers)
goes on recording in the child, into a trace of its own. The child writes its
events, already resolved into frames, to a spool file of its own in a
temporary folder, every 10 ms and at every way out it can see: ``atexit``
and ``os._exit`` (multiprocessing and DataLoader workers end through it,
skipping ``atexit``). A child killed by a signal (``Pool.terminate``'s
SIGTERM, SIGKILL) loses what it drew since its last write. When a parent's trace ends, the
events its children spooled for it are merged into it, each keeping its pid;
the outermost trace removes the folder, and a child still running then finds
it gone, stops recording and takes its hooks off.

Each process also notes where each of its streams started from: the digest of
the full state at the fork and after each seed. Two processes that drew from
one state drew the same numbers: a ``duplicate`` finding (see ``trace``).

Nothing here runs on the hot path: the child's wrappers record as the
parent's do, and a thread copies what they recorded out of the trace.
"""

from __future__ import annotations

import array
import atexit
import hashlib
import json
import os
import shutil
import sys
import tempfile
import threading
import time
from typing import Any, Optional

#: seconds between two writes of a child's spool file: what a killed child can lose
FLUSH_INTERVAL = 0.01
#: how long the end of a block waits, at most, for running children to write what they hold
SETTLE_WAIT = 0.1
#: how long it waits, at most, for a child forked an instant before to start writing
START_WAIT = 1.0
_SUFFIX = ".jsonl"


# -- digests: which state a stream drew from ------------------------------------------
def state_digests(source: Any) -> dict[str, str]:
    """sub-stream -> a digest of its full state (equal digests: the same numbers to come)."""
    out = {}
    for stream, state in source.state().items():
        h = hashlib.blake2b(digest_size=12)
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
    elif isinstance(value, (tuple, list)) and len(value) > 8 and all(type(v) is int for v in value):
        try:  # random's 625 twister words: packed, not repr'd (a fifth of the time)
            h.update(array.array("Q", value).tobytes())
        except OverflowError:
            h.update(repr(value).encode())
    elif isinstance(value, (tuple, list)):
        h.update(b"(")
        for item in value:
            _feed(h, item)
        h.update(b")")
    elif isinstance(value, (bytes, bytearray)):
        h.update(bytes(value))
    elif hasattr(value, "tobytes") and hasattr(value, "dtype"):  # a NumPy array
        h.update(value.tobytes())
    elif type(value).__name__ == "Tensor" and hasattr(value, "numpy"):  # torch.get_rng_state()
        h.update(value.detach().cpu().numpy().tobytes())
    else:
        h.update(repr(value).encode())


def digests_now(rec: Any) -> list[tuple[str, str]]:
    """(sub-stream, digest) for every installed stream; what cannot be read is left out."""
    found = []
    for source in list(rec.sources.values()):
        try:
            found.extend(state_digests(source).items())
        except Exception:  # noqa: BLE001 (a state that cannot be read is no finding, never an error)
            continue
    return found


#: a Python child started by ``subprocess``: its command line (``_subprocess.begin`` sets it)
COMMAND: Optional[str] = None


def role() -> Optional[str]:
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


# -- the parent's side: one folder while any trace records --------------------------------
class Spool:
    """The folder children write to, made at the first fork under a trace and removed by the last trace.

    A forked child that records inherits it (its own children write there too); only the
    process that made it collects from it and removes it.
    """

    def __init__(self) -> None:
        self.path: Optional[str] = None
        self.owner: Optional[int] = None
        #: the file the child of the fork under way will write (made by the parent before it forks)
        self.reserved: Optional[str] = None
        self._forks = 0

    def ensure(self) -> str:
        """The folder, made now if need be (by the process that will collect from it and remove it)."""
        if self.path is None:
            self.path = tempfile.mkdtemp(prefix=f"rngtrace-spool-{os.getpid()}-")
            self.owner = os.getpid()
        return self.path

    def reserve(self) -> str:
        """Before a fork: make the folder if need be, and the empty file the child will write to."""
        self.reserved = None
        self.ensure()
        self._forks += 1
        # Named by the forking process and its count: a grandchild's name never meets a child's.
        path = os.path.join(self.path, f"{os.getpid()}-{self._forks}{_SUFFIX}")
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self.reserved = path
        return path

    def forget(self) -> None:
        """In a child that does not record, or no longer: the folder is not its to write to."""
        self.path = self.owner = self.reserved = None

    def collect(self, token: int) -> list["ChildLog"]:
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

    def _read(self, token: int) -> tuple[list["ChildLog"], bool]:
        """The logs spooled for ``token``, and whether a reserved file is still without its header."""
        logs = []
        unstarted = False
        try:
            names = sorted(os.listdir(self.path))  # type: ignore[arg-type]
        except OSError:
            return []
        for name in names:
            if not name.endswith(_SUFFIX):
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
        if path is not None:
            shutil.rmtree(path, ignore_errors=True)


class ChildLog:
    """What one child spooled: its process facts, events with resolved stacks, origins and exit."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.ppid = 0
        self.start = "fork"
        self.started = 0.0
        self.role: Optional[str] = None
        self.exit: Optional[str] = None
        #: it ended without writing its exit (SIGKILL, a crash): its last events may be lost
        self.abrupt = False
        self.tags: set[int] = set()
        self.stacks: dict[int, tuple] = {}
        self.threads: dict[int, str] = {}
        #: (stream, kind, api, count, local stack id, local thread key, detail, noticed stack id)
        self.events: list[tuple] = []
        #: (sub-stream, digest, why, index of the next event at the time)
        self.origins: list[tuple[str, str, str, int]] = []
        self.overflow: list[tuple] = []
        self.dropped = 0

    def running(self) -> bool:
        """No exit written, and the process has not ended (it may yet write)."""
        return self.exit is None and _ended(self.pid) is None

    @classmethod
    def read(cls, path: str) -> Optional["ChildLog"]:
        try:
            with open(path, encoding="utf-8") as src:
                lines = [line for line in src.read().split("\n") if line]
        except OSError:
            return None
        log: Optional[ChildLog] = None
        for row in _rows(lines):
            tag = row[0]
            if tag == "process":
                log = cls(row[1])
                log.ppid, log.start, log.started, log.tags = row[2], row[3], row[4], set(row[5])
            elif log is None:
                return None
            elif tag == "stack":
                log.stacks[row[1]] = tuple(tuple(f) for f in row[2])
            elif tag == "thread":
                log.threads[row[1]] = row[2]
            elif tag == "event":
                log.events.append(tuple(row[1:]))
            elif tag == "origin":
                log.origins.append(tuple(row[1:]))  # type: ignore[arg-type]
            elif tag == "role":
                log.role = row[1]
            elif tag == "overflow":
                log.overflow, log.dropped = [tuple(r) for r in row[1]], row[2]
            elif tag == "exit":
                log.exit = row[1]
        if log is not None and log.exit is None:
            ended = _ended(log.pid)
            if ended is not None:
                log.exit, log.abrupt = ended, True  # it wrote no exit: what it drew last is lost
        return log


def _rows(lines: list[str]) -> list:
    """The rows of a spool file's lines: up to the first that does not parse (cut short by a kill)."""
    try:
        return json.loads("[" + ",".join(lines) + "]")  # one parse for the whole file: the usual case
    except ValueError:
        pass
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:
            break  # what came before it stands
    return rows


def _ended(pid: int) -> Optional[str]:
    """How process ``pid`` ended, or None while it runs.

    A child of ours that has ended but not been reaped is looked at without reaping
    it (the program's own wait still gets its status); any other is asked with signal 0.
    """
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


# -- the child's side ----------------------------------------------------------------
class ChildWriter:
    """In a forked child: copy the child trace's events to its spool file, and end it on the way out."""

    def __init__(self, hub: Any, session: Any, file: str, tags: tuple[int, ...], start: str = "fork") -> None:
        self.hub = hub
        self.session = session
        self.folder = os.path.dirname(file)
        self.file = file
        self._written = 0  # events of the trace already written
        self._origins = 0  # origins already written
        self._stacks: dict[int, int] = {}  # table stack id -> id in this file
        self._threads: set[int] = set()
        self._role: Optional[str] = None
        self._lock = threading.Lock()
        self._done = False
        self._finishing = False
        self._stop = threading.Event()
        self._real_exit = os._exit
        header = ["process", os.getpid(), os.getppid(), start, time.time(), list(tags)]
        # The parent made the file; a folder already gone (its block ended) means: do not record.
        self._fd = os.open(self.file, os.O_WRONLY | os.O_APPEND)
        self._write([header])
        self._install_exits()
        self._thread = threading.Thread(target=self._run, name="rngtrace-spool", daemon=True)
        self._thread.start()

    # -- ways out ----------------------------------------------------------------------
    def _install_exits(self) -> None:
        atexit.register(self._at_exit)

        def _exit(code: int, _self: ChildWriter = self) -> None:
            _self.finish(f"exit code {code}" if code else "normal")
            _self._real_exit(code)

        self._exit = _exit
        os._exit = _exit  # multiprocessing and DataLoader workers leave through it, skipping atexit
        # No SIGTERM handler: with this module's thread running, a Python handler could leave a
        # worker that waits on a lock (Pool.terminate()'s idle workers) never woken to die of it,
        # and a program that hangs is worse than a log that lacks its last few milliseconds.

    def _restore_exits(self) -> None:
        atexit.unregister(self._at_exit)
        if os._exit is self._exit:  # never over what someone put there since
            os._exit = self._real_exit

    def _at_exit(self) -> None:
        self.finish("normal")

    # -- writing -----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.wait(FLUSH_INTERVAL):
            if not os.path.isdir(self.folder):
                self.stop_recording()  # the parent's trace ended: this child runs on untraced
                return
            try:
                self.flush()
            except Exception:  # noqa: BLE001 (a spool that cannot be written never breaks the child)
                return

    def flush(self, final: Optional[str] = None) -> None:
        """Write the events recorded since the last write; ``final``: how the child ended, written last."""
        if not self._lock.acquire(timeout=1.0):
            return
        try:
            if self._done:
                return
            trace = self.session.trace
            raws = trace._raw[self._written:]
            rows: list[list] = []
            origins = self.session.origins
            for origin in origins[self._origins:]:
                rows.append(["origin", *origin])
            self._origins = len(origins)
            rec = self.hub.rec
            resolve = rec.stacks.resolve
            depth = trace.depth
            names = rec.thread_names
            for raw in raws:
                stream, kind, api, count, sid, thread, detail = raw
                noticed = -1
                if detail.__class__ is tuple:  # an unattributed move: (note, the noticing stack)
                    detail, noticed = detail
                    noticed = self._stack(rows, resolve, noticed, depth)
                if thread not in self._threads:
                    self._threads.add(thread)
                    rows.append(["thread", thread, names.get(thread, f"thread-{thread}")])
                rows.append(["event", stream, kind, api, count, self._stack(rows, resolve, sid, depth), thread,
                             detail if detail is None or isinstance(detail, str) else str(detail), noticed])
            self._written += len(raws)
            now = role()
            if now is not None and now != self._role:
                self._role = now
                rows.append(["role", now])
            if final is not None:
                self._done = True  # first: whatever fails below, nothing is written after the end
                overflow = [[s, k, a, self._stack(rows, resolve, sid, depth), calls, values]
                            for (s, k, a, sid), (calls, values) in list(trace._overflow.items())]
                rows += [["overflow", overflow, trace.dropped], ["exit", final]]
            if rows:
                self._write(rows)
        finally:
            self._lock.release()

    def _stack(self, rows: list, resolve: Any, sid: int, depth: int) -> int:
        if sid is None or sid < 0:
            return -1
        local = self._stacks.get(sid)
        if local is None:
            local = self._stacks[sid] = len(self._stacks)
            frames = [[f.filename, f.lineno, f.function] for f in resolve(sid, depth)]
            rows.append(["stack", local, frames])
        return local

    def _write(self, rows: list) -> None:
        data = "".join(json.dumps(row, ensure_ascii=True) + "\n" for row in rows).encode()
        while data:
            n = os.write(self._fd, data)
            data = data[n:]

    # -- ending ------------------------------------------------------------------------
    def finish(self, how: str) -> None:
        """The child is leaving: end its trace and write the rest, with how it ended."""
        if self._done or self._finishing:
            return  # one writer, once (atexit after an os._exit that is already writing)
        self._finishing = True
        self._stop.set()
        try:
            self.hub._end_child(self.session)
        except BaseException:  # noqa: BLE001 (the child is leaving: what it recorded still counts)
            pass
        try:
            self.flush(final=how)
        except Exception:  # noqa: BLE001 (a spool that cannot be written never breaks the child)
            self._done = True

    def stop_recording(self) -> None:
        """The parent's trace ended before this child: stop recording, leave nothing behind."""
        if self._done or self._finishing:
            return
        self._finishing = self._done = True
        self._stop.set()
        try:
            os.close(self._fd)
        except OSError:
            pass
        try:
            self.hub._end_child(self.session)
        finally:
            self.hub._spool.forget()
            self._restore_exits()


# -- spawned and forkserver children ----------------------------------------------------
class SpawnedTarget:
    """A ``multiprocessing`` process's target, wrapped for a child that does not fork from here.

    Spawn and forkserver start a fresh interpreter that unpickles the process object:
    this object travels in it instead of the target, and in the child starts a trace
    of the child's own (spooled like a forked child's) before calling the target.
    Only the process object sent to the child holds it: the parent's keeps its target.
    """

    def __init__(self, target: Any, file: str, spec: tuple, start: str) -> None:
        self.target = target
        #: (streams, depth, max_events, tags) of the child's trace: ``child_spec``
        self.file, self.spec, self.start = file, spec, start

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ._hub import HUB

        try:
            HUB._start_spawned(self)
        except Exception:  # noqa: BLE001 (a child the tracer cannot follow runs untraced)
            try:
                os.remove(self.file)  # the parent need not wait for it
            except OSError:
                pass
        return self.target(*args, **kwargs)


def child_spec(sessions: tuple) -> tuple[tuple[str, ...], int, int, tuple[int, ...]]:
    """(streams, depth, max_events, tags) of a child's trace: what every one of ``sessions`` records."""
    streams = frozenset().union(*(s.streams for s in sessions))
    return (tuple(sorted(streams)), max(s.trace.depth for s in sessions),
            max(s.trace.max_events for s in sessions), tuple(sorted({t for s in sessions for t in s.tags})))


def start_method(process: Any) -> Optional[str]:
    """How ``process`` (a multiprocessing BaseProcess) will start: fork, spawn or forkserver."""
    method = getattr(process, "_start_method", None)
    if method:
        return str(method)
    try:  # a plain Process: the default context's, without fixing it (get_start_method() would)
        import multiprocessing.context as context

        default = context._default_context
        return str((default._actual_context or default._default_context)._name)
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
        self.installed: Optional[tuple[type, Any]] = None
        self._made: Optional[tuple[Any, Any]] = None  # (original, its wrapper), made once
        self._hook: Optional[Any] = None  # the post-import hook waiting for multiprocessing
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
                cls.start = original  # never someone else's patch over ours
            self.installed = None

    def _install(self, module: Any, hub: Any) -> None:
        cls = module.BaseProcess
        original = cls.__dict__["start"]
        made = self._made
        if made is None or made[0] is not original:
            if getattr(original, "__wrapped__", None) is not None:
                return  # someone else's patch (or ours, left by an interrupted undo): never stacked

            def start(process: Any, _original: Any = original) -> None:
                return hub._spawning(process, _original)

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

            from ._hub import _call_if_free

            _call_if_free(hub._lock, install)

        self._hook = imported
        wrapt.register_post_import_hook(imported, self._MODULE)

    def _unwatch(self) -> None:
        from ._patches import unregister_post_import_hook

        unregister_post_import_hook(self._MODULE, self._hook)
        self._hook = None  # only now: an unwatch cut short by a Ctrl-C is finished by the hub's retry

    def describe(self) -> list[str]:
        if self.installed is not None:
            return ["multiprocessing.process.BaseProcess.start"]
        return ["import hook for multiprocessing.process"] if self._hook is not None else []
