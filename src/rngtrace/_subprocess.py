"""Python children started with ``subprocess`` under ``rngtrace run``.

A child started by ``subprocess`` (``sys.executable script.py``) is a fresh
interpreter: no fork hook and no pickled target reach it. It picks the trace
up from the environment, the way coverage.py reaches subprocesses: while
``rngtrace run`` runs the program, ``PYTHONPATH`` starts with a folder inside
the spool folder that holds a ``sitecustomize`` module. Python imports it at
start-up, before the child's ``__main__``; it takes its folder off
``sys.path`` again (the child's program does not see it), starts a trace of
the child's own that writes to the spool like a forked child's, and hands on
to the ``sitecustomize`` the child would have imported without it.

Not followed: children started with ``-I``, ``-E`` or ``-S`` (they skip the
environment or ``site``), children given an environment without
``PYTHONPATH``, and interpreters where this version of rngtrace cannot be
imported (another virtual environment, another Python). ``multiprocessing``'s
own helpers (spawned workers, the resource tracker, the forkserver) are left
to ``_spawned``: a spawned worker's target starts its trace.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

#: the folder inside the spool folder that holds the children's ``sitecustomize``
BOOT = "boot"

# The module a child imports at start-up. ``%r`` fields are filled with literals.
_SITECUSTOMIZE = '''\
# Written by rngtrace run for the Python processes its program starts; removed when it ends.
def _rngtrace_child():
    import os, sys
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) != here]
    try:
        from rngtrace._subprocess import begin
        begin(%(spool)r, %(spec)r, %(version)r, %(points)r)
    except Exception:
        pass  # a child rngtrace cannot follow runs untraced
    # Then the sitecustomize this child would have run without rngtrace, if there is one: it
    # takes this module's place in sys.modules (the import in progress returns what is there).
    import importlib.machinery
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is not None and spec.loader is not None:
        import importlib.util  # only then (importlib.util costs a child's start more than the rest of this)
        module = importlib.util.module_from_spec(spec)
        sys.modules["sitecustomize"] = module
        spec.loader.exec_module(module)


_rngtrace_child()
del _rngtrace_child
'''


@contextlib.contextmanager
def follow(hub: Any) -> Iterator[None]:
    """While the program runs: Python children started with ``subprocess`` trace into the spool."""
    saved = os.environ.get("PYTHONPATH")
    boot = _write_boot(hub)
    if boot is not None:
        os.environ["PYTHONPATH"] = boot if not saved else boot + os.pathsep + saved
    try:
        yield
    finally:
        if boot is not None and os.environ.get("PYTHONPATH", "").split(os.pathsep)[:1] == [boot]:
            # Put back as it was, unless the program set its own meanwhile.
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved


def _write_boot(hub: Any) -> str | None:
    """Write the children's ``sitecustomize`` into the spool folder; its folder, or None if it cannot."""
    from ._spawned import child_spec
    from .sources import entry_points_found

    sessions = hub.active
    if not sessions:
        return None
    try:
        folder = os.path.join(hub.spool.ensure(), BOOT)
        os.mkdir(folder, 0o700)
        text = _SITECUSTOMIZE % {
            "spool": os.path.dirname(folder),
            "spec": child_spec(sessions),
            "version": _version(),
            # The child need not scan the installed packages for them (another environment scans its own).
            "points": (sys.prefix, entry_points_found()),
        }
        with open(os.path.join(folder, "sitecustomize.py"), "w", encoding="utf-8") as out:
            out.write(text)
    except OSError:
        return None  # the program runs; its subprocesses go untraced
    return folder


def _version() -> str:
    """What a child's rngtrace must be to write its parent's spool: the release and the spool format."""
    from ._spool import SPOOL_FORMAT
    from ._version import __version__

    return f"{__version__}/{SPOOL_FORMAT}"


def _multiprocessing_helper() -> bool:
    """Whether this interpreter was started by ``multiprocessing`` (a spawned worker, its tracker, its server)."""
    argv = getattr(sys, "orig_argv", sys.argv)
    if "--multiprocessing-fork" in argv:
        return True
    for i, arg in enumerate(argv[:-1]):
        if arg == "-c" and argv[i + 1].lstrip().startswith("from multiprocessing"):
            return True
    return False


def begin(spool: str, spec: tuple, version: str, points: tuple = ("", ())) -> None:
    """In a Python child at start-up: record into a trace of its own, spooled to the parent's.

    ``points`` are the parent's ``sys.prefix`` and the ``rngtrace.sources`` entry points it found there.
    """
    if version != _version() or _multiprocessing_helper() or not os.path.isdir(spool):
        return  # another rngtrace writes another spool; multiprocessing's children are _spawned's
    from . import _roles
    from ._childlogs import SUFFIX
    from .sources import hand_in

    prefix, found = points
    if prefix == sys.prefix:
        hand_in(found)
    from ._hub import HUB

    # Named by its command line, as ps would show it (cut short: the log says which child, not all of it).
    argv = list(getattr(sys, "orig_argv", None) or ["python", *sys.argv])
    command = " ".join([os.path.basename(argv[0]), *argv[1:]])
    _roles.COMMAND = command if len(command) <= 60 else command[:59] + "…"
    file = os.path.join(spool, f"sub-{os.getpid()}{SUFFIX}")
    # Made here, by the child: the parent's trace has ended if the folder has gone.
    os.close(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
    HUB.start_spawned(_Started(file, tuple(spec), "subprocess"))


class _Started:
    """What ``Hub.start_spawned`` reads of a child's start (a ``SpawnedTarget``'s fields)."""

    __slots__ = ("file", "spec", "start")

    def __init__(self, file: str, spec: tuple, start: str) -> None:
        self.file, self.spec, self.start = file, spec, start
