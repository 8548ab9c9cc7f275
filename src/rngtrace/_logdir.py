"""Saving a block's trace for ``rng_trace(log_dir=DIR)``: one log per process, named by its rank.

A process is named ``rank-0`` where a ``torch.distributed`` process group or the
``RANK`` variable gives it a rank, else ``pid-1234``. Its first block is saved as
``rank-0.json``, its later ones as ``rank-0.2.json``, ``rank-0.3.json``, in the
order they end, so ``rngtrace ranks`` (``rngtrace.ranks``) compares block k of
every rank with block k of the others. Each log is written beside its final name
and renamed over it, and a log that cannot be written is one line on stderr:
never an exception in the user's program.
"""

from __future__ import annotations

import os
import re
import sys
import threading

from ._say import PROG, say
from .trace import Trace

#: the names logs are saved under: rank-0.json, rank-0.2.json (its second block), pid-1234.json
LOG_NAME = re.compile(r"(rank|pid)-([0-9]+)(?:\.([0-9]+))?\.json")


# -- which process this is -----------------------------------------------------------

# A forked child inherits its parent's environment and its process group, but is not
# that rank: DataLoader and Pool workers would overwrite their rank's log. So each fork
# is noted, with whether a process group was already there to inherit.
_forked = {"child": False, "group": False}
#: (pid, rank) of the last rank a process group gave: it stays the rank after destroy_process_group()
_seen_rank: list[tuple[int, int]] = []
_lock = threading.Lock()
#: (pid, folder, name) -> blocks saved so far
_blocks: dict[tuple[int, str, str], int] = {}


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()  # a thread of the parent may have held it, and that thread is gone
    _forked["child"] = True
    _forked["group"] = _group_rank() is not None


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork to guard against
    os.register_at_fork(after_in_child=_after_fork_in_child)


def current_rank() -> int | None:
    """This process's rank in a distributed job, or None: from its process group, else from ``RANK``.

    torch is never imported here: a process group exists only where the program imported torch.
    """
    if _dataloader_worker():
        return None
    rank = None if _forked["group"] else _group_rank()
    if rank is not None:
        _seen_rank[:] = [(os.getpid(), rank)]
        return rank
    if _seen_rank and _seen_rank[0][0] == os.getpid():
        return _seen_rank[0][1]
    if _forked["child"] or _multiprocessing_child():
        return None  # RANK came from the parent (a rank's worker), so it is not this process's
    text = os.environ.get("RANK", "")
    return int(text) if re.fullmatch(r"[0-9]{1,9}", text) else None


def _group_rank() -> int | None:
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            rank = dist.get_rank()
            return rank if isinstance(rank, int) and rank >= 0 else None
    except Exception:  # noqa: BLE001 - a half-built or torn-down group gives no rank
        pass
    return None


def _dataloader_worker() -> bool:
    data = sys.modules.get("torch.utils.data")
    try:
        return data is not None and data.get_worker_info() is not None
    except Exception:  # noqa: BLE001
        return False


def _multiprocessing_child() -> bool:
    mp = sys.modules.get("multiprocessing")  # a process multiprocessing started has imported it
    try:
        return mp is not None and mp.parent_process() is not None
    except Exception:  # noqa: BLE001
        return False


def process_name() -> str:
    """``rank-0`` where this process has a rank, else ``pid-1234``: the stem of its logs."""
    rank = current_rank()
    return f"rank-{rank}" if rank is not None else f"pid-{os.getpid()}"


# -- writing ---------------------------------------------------------------------------


def save_block(trace: Trace, folder: str) -> str | None:
    """Save a finished block's trace in ``folder`` under this process's name; return its path.

    Never raises: a log that cannot be written is one line on stderr and None,
    since the user's program matters more than its log.
    """
    try:
        os.makedirs(folder, exist_ok=True)
        name = process_name()
        path = os.path.join(folder, _next_file(folder, name))
        # Written beside its final name and renamed over it: a reader never sees half a log.
        temporary = os.path.join(folder, f".{os.path.basename(path)}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            trace.save(temporary)
            os.replace(temporary, path)
        except BaseException:
            _remove(temporary)
            raise
        return path
    except Exception as error:  # noqa: BLE001
        say(
            f"{PROG}: cannot save the draw log in {folder!r} ({_why(error)}); "
            "give rng_trace a log_dir this process can write to"
        )
        return None


def _next_file(folder: str, name: str) -> str:
    """``rank-0.json`` for this process's first block in ``folder``, then ``rank-0.2.json``, ..."""
    with _lock:
        key = (os.getpid(), folder, name)
        block = _blocks[key] = _blocks.get(key, 0) + 1
    if block == 1:
        _remove_leftovers(folder, name)
        return f"{name}.json"
    return f"{name}.{block}.json"


def _remove_leftovers(folder: str, name: str) -> None:
    """Remove later-block logs an earlier run left under ``name``; this run writes its own."""
    for entry in os.listdir(folder):
        match = LOG_NAME.fullmatch(entry)
        if match and match.group(3) and f"{match.group(1)}-{match.group(2)}" == name:
            _remove(os.path.join(folder, entry))


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _why(error: BaseException) -> str:
    return getattr(error, "strerror", None) or f"{type(error).__name__}: {error}"
