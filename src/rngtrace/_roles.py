"""What this process is, and which running children a trace starting now cannot follow.

A child's log says what it was where a library says so (a DataLoader worker, a pool
worker, a ``multiprocessing.Process``, a command ``subprocess`` started); a trace that
starts while ``multiprocessing`` children already run says so in its notes, grouped by
kind, rather than leaving them silent. Nothing is imported for either.
"""

from __future__ import annotations

import sys
from typing import Any

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
    # Asked at every outermost trace's start: where no child was ever started, the set
    # active_children() would reap and copy is empty (multiprocessing.process._children).
    if not getattr(sys.modules.get("multiprocessing.process"), "_children", True):
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
