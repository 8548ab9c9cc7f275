"""This process's pid and its parent's, asked once per process and again after each fork.

Every trace's start and end asks (``RawStore``, the face's end); each ``os.getpid()`` and
``os.getppid()`` is a system call, a quarter µs or more each on a virtual machine. A forked
child reads them afresh in ``os.register_at_fork``'s hook, which every fork from Python
runs (``os.fork``, ``multiprocessing``, a DataLoader's workers). The parent's pid is the
one that started the process, also after that parent has exited.
"""

from __future__ import annotations

import os

#: [pid, parent's pid]: one list, read whole by ``pid`` and ``ppid``
_IDS = [os.getpid(), os.getppid()]


def _forked() -> None:
    _IDS[:] = [os.getpid(), os.getppid()]


os.register_at_fork(after_in_child=_forked)


def pid() -> int:
    """``os.getpid()``, without the system call."""
    return _IDS[0]


def ppid() -> int:
    """The pid of the process that started this one (``os.getppid()`` at its start or fork)."""
    return _IDS[1]
