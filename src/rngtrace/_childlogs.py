"""The spool folder forked and spawned children write to, and what each child wrote there.

The first fork under a trace makes a temporary folder (``Spool``); each child writes
its events to a file of its own in it (``_processes.ChildWriter``), in the records
``_spool`` defines. When a parent's trace ends, it waits a moment for running
children to write what they hold, reads each file (``ChildLog``) and merges the
events spooled for it; the outermost trace removes the folder, and a child still
running then finds it gone, stops recording and takes its hooks off.
"""

from __future__ import annotations

import os
import time
from typing import Any, cast

from ._digests import ForkDigests
from ._spool import FLUSH_INTERVAL, records

#: how long the end of a block waits, at most, for running children to write what they hold
SETTLE_WAIT = 0.1
#: how long it waits, at most, for a child forked an instant before to start writing
START_WAIT = 1.0
SUFFIX = ".spool"  # a spool file's name ends so


def read_wrapper_sources() -> None:
    """Put the Python recording wrapper's source lines in ``linecache``, before the first fork.

    A forked child that formats a stack through that wrapper would read and tokenize
    these files again, in every child: torch formats one at every ``torch.manual_seed``
    until CUDA is initialised (which it never is in a forked worker), and a DataLoader
    worker seeds torch as it starts. Read here once, every child inherits them.
    """
    import linecache  # here, as shutil and tempfile below: a traced child's start imports none of them

    from . import _caller
    from .sources import _recorder, _wrapping

    for module in (_wrapping, _recorder, _caller):
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
            import tempfile

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
            import shutil

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
