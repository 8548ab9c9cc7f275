"""rngtrace's own post-import hooks: call a function the moment a module's import finishes.

What ``wrapt.register_post_import_hook`` does, without importing wrapt (whose
``asyncio`` import costs a traced child tens of milliseconds before its first
line). A finder sits first on ``sys.meta_path`` only while some hook waits: it
answers for the watched names alone, asking the finders behind it for the spec
and handing back a loader that runs the module, then the hooks, while the
module's import lock is held (as wrapt's does). Each hook runs once; ``unregister``
takes a hook out, and the finder with the last one.
"""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Callable
from typing import Any

from ._hotpath import SPEEDUPS

#: held while the hooks or the finder's place change (the hub's reconcile and an import may race)
LOCK = threading.RLock()
_CALL_LOCKED = SPEEDUPS.call_locked if SPEEDUPS is not None else None
_hooks: dict[str, list[Callable[[Any], None]]] = {}
_searching = threading.local()  # the names this thread's finder is asking the finders behind it about


class _Loader:
    """The watched module's own loader, then the hooks waiting for it."""

    def __init__(self, loader: Any, name: str) -> None:
        self.loader = loader
        self.name = name

    def create_module(self, spec: Any) -> Any:
        create = getattr(self.loader, "create_module", None)
        return create(spec) if create is not None else None

    def exec_module(self, module: Any) -> None:
        # The module sees its own loader, not this one (importlib.resources and pkgutil read it).
        module.__loader__ = self.loader
        spec = getattr(module, "__spec__", None)
        if spec is not None and spec.loader is self:
            spec.loader = self.loader
        self.loader.exec_module(module)
        _imported(self.name, sys.modules.get(self.name, module))


class _Finder:
    """First on ``sys.meta_path`` while a hook waits; finds nothing itself."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in _hooks:
            return None
        searching = _searching.__dict__.setdefault("names", set())
        if name in searching:
            return None
        searching.add(name)
        try:
            spec = _spec_behind(self, name, path, target)
        finally:
            searching.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec  # a namespace package or a legacy loader: imported as it would be, unhooked
        spec.loader = _Loader(spec.loader, name)
        return spec


FINDER = _Finder()


def _spec_behind(me: _Finder, name: str, path: Any, target: Any) -> Any:
    """The spec the finders after this one on ``sys.meta_path`` give for ``name``."""
    for finder in list(sys.meta_path):
        if finder is me:
            continue
        find = getattr(finder, "find_spec", None)
        if find is None:
            continue
        spec = find(name, path, target)
        if spec is not None:
            return spec
    return None


def _with_lock(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` holding LOCK, without the accelerator."""
    with LOCK:
        return fn(*args)


#: ``fn(*args)`` holding LOCK, taken and released in C where the accelerator is built. Not a
#: ``with`` statement there: a line or profile hook (a Ctrl-C, the interrupt tests' line tracer,
#: the 3.12+ catch-all's callback) runs before a ``with``'s ``__exit__`` call, and an interrupt
#: raised there kept the lock for good; the hub's next start then waited for it forever. A
#: partial, not a function of ours: every trace's start and end register and unregister hooks.
_locked: Callable[..., Any] = functools.partial(_CALL_LOCKED, LOCK) if _CALL_LOCKED is not None else _with_lock


def _imported(name: str, module: Any) -> None:
    for hook in _locked(_take, name):
        hook(module)


def _take(name: str) -> list[Callable[[Any], None]]:
    hooks = _hooks.pop(name, [])
    _settle()
    return hooks


def settle() -> None:
    """Put the finder on ``sys.meta_path`` exactly while some hook waits (a pass cut short is finished here)."""
    # Asked first without the lock (every trace's start and end call this): a register or
    # unregister under way in another thread settles the finder itself when it is done.
    if bool(_hooks) != (FINDER in sys.meta_path):
        _locked(_settle)


def _settle() -> None:
    if _hooks:
        if FINDER not in sys.meta_path:
            sys.meta_path.insert(0, FINDER)
    else:
        while FINDER in sys.meta_path:
            sys.meta_path.remove(FINDER)


def register(hook: Callable[[Any], None], name: str) -> None:
    """Call ``hook(module)`` once module ``name`` is imported: now, where it already is."""
    module = _locked(_register, hook, name)
    if module is not None:
        hook(module)


def _register(hook: Callable[[Any], None], name: str) -> Any:
    module = sys.modules.get(name)
    if module is None:
        waiting = _hooks.setdefault(name, [])
        if hook not in waiting:  # never twice: a registration cut short is made again
            waiting.append(hook)
        if FINDER not in sys.meta_path:  # (``_settle`` where a hook now waits)
            sys.meta_path.insert(0, FINDER)
    return module


def register_many(pairs: list[tuple[Callable[[Any], None], str]]) -> None:
    """``register`` each ``(hook, name)`` of ``pairs``, in one pass under the lock (a lone trace's watches)."""
    for hook, module in _locked(_REGISTER_MANY, pairs):
        hook(module)


def _register_many(pairs: list[tuple[Callable[[Any], None], str]]) -> list[tuple[Callable[[Any], None], Any]]:
    imported = []
    for hook, name in pairs:
        module = _register(hook, name)
        if module is not None:
            imported.append((hook, module))
    return imported


def unregister_many(pairs: list[tuple[Callable[[Any], None], str]]) -> None:
    """``unregister`` each ``(hook, name)`` of ``pairs``, in one pass under the lock."""
    _locked(_UNREGISTER_MANY, pairs)


def _unregister_many(pairs: list[tuple[Callable[[Any], None], str]]) -> None:
    for hook, name in pairs:
        _unregister(hook, name)


def unregister(hook: Callable[[Any], None], name: str) -> None:
    """Take ``hook`` out of those waiting for ``name`` (where it still is), and the finder with the last."""
    _locked(_unregister, hook, name)


def _unregister(hook: Callable[[Any], None], name: str) -> None:
    waiting = _hooks.get(name)
    if waiting and hook in waiting:
        waiting.remove(hook)
    if not waiting:
        _hooks.pop(name, None)
        if not _hooks:  # (``_settle`` where no hook waits any more)
            while FINDER in sys.meta_path:
                sys.meta_path.remove(FINDER)


#: every trace's start and end: the two passes above in C where the accelerator is built
#: (``_speedups.watch_many``, the same steps with no Python frame per pair)
_REGISTER_MANY: Callable[..., Any] = (
    functools.partial(SPEEDUPS.watch_many, _hooks, FINDER, True) if SPEEDUPS is not None else _register_many
)
_UNREGISTER_MANY: Callable[..., Any] = (
    functools.partial(SPEEDUPS.watch_many, _hooks, FINDER, False) if SPEEDUPS is not None else _unregister_many
)


def describe() -> dict[str, list[Callable[[Any], None]]]:
    """Every hook waiting, by module; the finder's place says itself: ``installed()``."""
    return _locked(lambda: {name: list(hooks) for name, hooks in _hooks.items() if hooks})


def installed() -> bool:
    """Whether the finder is on ``sys.meta_path``."""
    return FINDER in sys.meta_path
