"""The hooks that are no stream's patches: post-import hooks, and what child processes need.

A stream whose library is not imported yet waits for it with a post-import hook
(``ImportWatch``: installed the moment it is imported inside a trace). Child
processes need four more (``ProcessHooks``): ``BaseProcess.start`` while any trace
records (a spawned or forkserver child gets a target that records), and, in a
child that records, its ways out (``os._exit``, which multiprocessing and
DataLoader workers leave through, and ``atexit``) and the ``put`` and ``get`` of
multiprocessing's queues (a worker's events are written before it sends a result
or waits for work).

The attributes among them are named patch sets (``Patches.hook``): swapped as a
stream's are, in one C call where the accelerator is, and undone the same way, an
undo never overwriting what someone put there since. The rest (a registration with
``atexit`` or with ``_postimport``'s post-import hooks) is kept here, each with a flag set
so that a pass cut short by a Ctrl-C is completed by the next. The hub asks for
all of them in one call, ``ProcessHooks.set``, at the end of every reconcile: what
takes a trace's patches off takes these off too.

One hook is never taken off: ``os.register_at_fork`` has no way back. The hub
registers it once per process, at its first trace (``watch_forks``), and its
handlers return at once while no trace records.
"""

from __future__ import annotations

import atexit
import os
import sys
from collections.abc import Callable
from typing import Any

from . import _postimport
from ._patches import Patches, PatchSet

#: the module whose import brings ``BaseProcess``
PROCESS_MODULE = "multiprocessing.process"
#: the process's own hook sets (``Patches.hook``), by name
START, EXIT, QUEUES = "BaseProcess.start", "os._exit", "multiprocessing queues"


class ImportWatch:
    """Post-import hooks: install a stream the moment its library is imported inside a trace."""

    def __init__(self) -> None:
        #: stream -> (module, hook) for each stream waiting for its library's import
        self.hooks: dict[str, tuple[str, Callable]] = {}
        #: stream -> the (module, hook) made for it last: made once, registered at every watch
        self._made: dict[str, tuple[str, Callable]] = {}

    def watching(self) -> list[str]:
        """The streams waiting for their library's import."""
        return sorted(self.hooks)

    def watch(self, name: str, module: str, on_import: Callable[[str], None]) -> None:
        """Call ``on_import(name)`` when ``module`` is imported (at once if it already is)."""
        if name not in self.hooks:
            _postimport.register(self.held(name, module, on_import), module)

    def held(self, name: str, module: str, on_import: Callable[[str], None]) -> Callable[[Any], None]:
        """Note stream ``name`` as watching ``module``; its hook, for the caller to register (``watch``).

        One hook per stream, made at its first watch: it acts only while the stream is
        noted here, so a later watch registers the same one again.
        """
        made = self._made.get(name)
        if made is None or made[0] != module:

            def hook(_module: Any, name: str = name) -> None:
                if self.hooks.pop(name, None) is not None:
                    on_import(name)

            made = self._made[name] = (module, hook)
        self.hooks[name] = made  # first: an undo cut short finds what to take out
        return made[1]

    def importing(self, name: str) -> bool:
        """Whether stream ``name`` waits for its library's import, which has begun and not ended.

        Another watched library imported from inside that import (NumPy's ``random``, through
        ``secrets``) must not install it half made: its own hook installs it when it ends.
        """
        entry = self.hooks.get(name)
        if entry is None:
            return False
        spec = getattr(sys.modules.get(entry[0]), "__spec__", None)
        return getattr(spec, "_initializing", False) is True  # what importlib marks an import under way with

    def unwatch(self, name: str) -> None:
        entry = self.hooks.get(name)
        if entry is None:
            return
        _postimport.unregister(entry[1], entry[0])
        del self.hooks[name]  # only now: an undo cut short before this line is done again

    def let_go(self, name: str) -> None:
        """Forget stream ``name``'s watch, whose hook the caller unregistered (``unwatch`` in two steps)."""
        self.hooks.pop(name, None)


def _named_as(wrapper: Callable, original: Any) -> Callable:
    wrapper.__name__ = getattr(original, "__name__", wrapper.__name__)
    wrapper.__qualname__ = getattr(original, "__qualname__", wrapper.__qualname__)
    wrapper.__doc__ = getattr(original, "__doc__", None)
    return wrapper


class ProcessHooks:
    """What child processes need hooked, made exactly what the sessions need by ``set``.

    ``spawning(process, start)`` is what ``BaseProcess.start`` calls while a trace records
    (the hub's); ``call_if_free(fn)`` runs ``fn`` under the hub's lock unless it is taken.
    The multiprocessing hook goes on where ``multiprocessing`` is not imported yet as a
    post-import hook, which wraps ``BaseProcess.start`` the moment it is: in whichever
    thread imports it, only if the hub's lock is free (taken in C: a Ctrl-C cannot leave
    it held); where it is busy, the hub is reconciling, and its ``set`` finds the module.
    """

    def __init__(self, patches: Patches, spawning: Callable[[Any, Callable], Any], call_if_free: Callable) -> None:
        self.patches = patches
        self._spawning = spawning
        self._call_if_free = call_if_free
        #: the recording child's writer, which os._exit, atexit and the queues call first; None elsewhere
        self.child: Any | None = None
        self._starts = False  # BaseProcess.start is wanted (a trace records)
        self._import_hook: Callable | None = None  # the post-import hook waiting for multiprocessing
        #: whether ``at_exit`` is registered with atexit; None while a pass is under way (the next redoes it)
        self._at_exit: bool | None = False
        #: what atexit calls: one object, registered and taken out as itself
        self.at_exit: Callable[[], None] = self._child_exits
        self._forks = False  # the fork handlers are registered (never undone)
        #: whether BaseProcess.start (or its import hook), and a child's hooks, may be on: False only once
        #: taken off in full, so that asking for them off again costs nothing
        self._start_may_be_on = False
        self._child_may_be_on = False

    def set(self, starts: bool, child: Any | None) -> None:
        """Hook ``BaseProcess.start`` where ``starts``, and the ways out and queues where ``child`` (idempotent)."""
        self._starts = starts
        if starts:
            self._start_on()
        elif self._start_may_be_on:
            self._start_off()
            self._start_may_be_on = False  # only now: an undo cut short is done again by the next
        if child is not None:
            self.child = child  # first: from now on every hook calls this child's writer
            self._child_may_be_on = True
            self._child_on()
        elif self._child_may_be_on:
            self._child_off()
            self.child = None
            self._child_may_be_on = False
        _postimport.settle()  # the import finder goes with the last hook, a removal cut short included

    def describe(self) -> list[str]:
        """Each of these hooks in place now (empty when none is)."""
        out = self.patches.hooks_on()
        if self._at_exit is not False:
            out.append("atexit: the recording child's end")
        if self._import_hook is not None:
            out.append(f"import hook for {PROCESS_MODULE}")
        if _postimport.installed() and not _postimport.describe():
            out.append("the post-import finder, with no hook waiting")
        return out

    @property
    def forks_watched(self) -> bool:
        """Whether ``watch_forks`` registered its handlers (once per process, never undone)."""
        return self._forks

    def watch_forks(self, before: Callable[[], None], after_in_child: Callable[[], None]) -> None:
        """Have ``before`` and ``after_in_child`` run around every fork from now on (once per process)."""
        if not self._forks:
            os.register_at_fork(before=before, after_in_child=after_in_child)
            self._forks = True

    # -- BaseProcess.start in a lone trace's swap (``_lone``) ------------------------------
    def start_part(self) -> PatchSet | None:
        """BaseProcess.start's hook set where it is on and all that ``set(True, None)`` put on.

        A lone trace's plan then puts it on and takes it off in the swap of the streams'
        patches: one C call less each way, and none of ``set``'s questions.
        """
        hook_set = self.patches.hook_sets.get(START)
        if hook_set is None or not hook_set.applied or not self.start_swappable(hook_set, on=True):
            return None
        return hook_set

    def start_swappable(self, part: PatchSet, on: bool = False) -> bool:
        """Whether ``part`` (``start_part``) is still the hook set made in full, no import or child hook beside it."""
        return (
            part.applied is on
            and self.patches.hook_sets.get(START) is part
            and START in self.patches.hooks_made
            and self._import_hook is None
            and not self._child_may_be_on
            and self.child is None
        )

    def start_swapped(self, on: bool) -> None:
        """Note what ``set`` notes for a swap that puts BaseProcess.start's hook on (call it before) or off (after)."""
        self._starts = self._start_may_be_on = on
        _postimport.settle()

    def start_watch(self) -> Callable[[Any], None] | None:
        """The import hook waiting for multiprocessing where it is all that ``set(True, None)`` put on; else None."""
        hook = self._import_hook
        if (
            hook is None
            or not self._starts
            or self._child_may_be_on
            or self.child is not None
            or sys.modules.get(PROCESS_MODULE) is not None
        ):
            return None
        return hook

    def start_watch_free(self) -> bool:
        """Whether nothing of BaseProcess.start's is on, for a lone trace to hold its start watch again."""
        hook_set = self.patches.hook_sets.get(START)
        return (
            self._import_hook is None
            and not self._start_may_be_on
            and (hook_set is None or not hook_set.applied)
            and not self._child_may_be_on
            and self.child is None
        )

    def hold_start_watch(self, hook: Callable[[Any], None]) -> None:
        """Note ``hook`` (``start_watch``) as waiting again, for the caller to register (``start_watch_free`` first)."""
        self._starts = self._start_may_be_on = True  # first: an undo cut short takes it out
        self._import_hook = hook

    def start_watch_held(self, hook: Callable[[Any], None]) -> bool:
        """Whether ``hook`` still waits, as all that ``set(True, None)`` put on (nothing hooked meanwhile)."""
        hook_set = self.patches.hook_sets.get(START)
        return (
            self._import_hook is hook
            and (hook_set is None or not hook_set.applied)
            and not self._child_may_be_on
            and self.child is None
        )

    def let_go_start_watch(self) -> None:
        """After the caller unregistered the start watch (``hold_start_watch``): what ``set(False, None)`` notes."""
        self._import_hook = None
        self._starts = self._start_may_be_on = False

    # -- BaseProcess.start ----------------------------------------------------------------
    def _start_on(self) -> None:
        self._start_may_be_on = True  # first: whatever part of this is done, an undo takes it off
        if sys.modules.get(PROCESS_MODULE) is None:
            self._watch()
        else:
            self.patches.hook(START, self._start_plan)

    def _start_off(self) -> None:
        hook = self._import_hook
        if hook is not None:
            _postimport.unregister(hook, PROCESS_MODULE)
            self._import_hook = None  # only now: an unwatch cut short by a Ctrl-C is finished by the retry
        self.patches.unhook(START)

    def _start_plan(self) -> list[tuple[Any, str, Any]]:
        cls = sys.modules[PROCESS_MODULE].BaseProcess
        original = cls.__dict__["start"]

        def start(process: Any, _original: Any = original) -> Any:
            return self._spawning(process, _original)

        start.__wrapped__ = original  # type: ignore[attr-defined]
        return [(cls, "start", _named_as(start, original))]

    def _watch(self) -> None:
        hook = self._import_hook
        if hook is None:
            hook = self._import_hook = self._when_imported()  # first: an undo finds what to take out
        _postimport.register(hook, PROCESS_MODULE)  # never twice (``register`` asks): one cut short is made again

    def _when_imported(self) -> Callable[[Any], None]:
        def imported(module: Any) -> None:
            def install() -> None:
                if self._import_hook is imported and self._starts:
                    self.patches.hook(START, self._start_plan)
                if self._import_hook is imported:
                    self._import_hook = None

            self._call_if_free(install)

        return imported

    # -- a recording child's ways out and its messages to its parent ------------------------
    def _child_on(self) -> None:
        patches = self.patches
        patches.hook(EXIT, self._exit_plan)
        queues = sys.modules.get("multiprocessing.queues")
        if queues is not None:
            patches.hook(QUEUES, lambda: self._queue_plan(queues))
        if self._at_exit is not True:
            self._at_exit = None  # first: a registration cut short is made again by the next pass
            atexit.unregister(self.at_exit)  # never twice
            atexit.register(self.at_exit)
            self._at_exit = True

    def _child_off(self) -> None:
        if self._at_exit is not False:
            self._at_exit = None
            atexit.unregister(self.at_exit)
            self._at_exit = False
        self.patches.unhook(QUEUES)
        self.patches.unhook(EXIT)

    def _child_exits(self) -> None:
        """What ``atexit`` calls: the recording child ends its trace and writes the rest."""
        child = self.child
        if child is not None:
            child.at_exit()

    def _exit_plan(self) -> list[tuple[Any, str, Any]]:
        original = os._exit

        def _exit(code: int, _original: Any = original) -> None:
            child = self.child
            if child is not None:
                child.leave(code)  # multiprocessing and DataLoader workers leave through it, skipping atexit
            _original(code)

        return [(os, "_exit", _named_as(_exit, original))]

    def _queue_plan(self, queues: Any) -> list[tuple[Any, str, Any]]:
        """Each queue's ``put`` and ``get`` write the child's events first.

        A pool worker, a ProcessPoolExecutor worker and a DataLoader worker each hand their
        results to a queue and wait for work on one: written before that, nothing the parent
        has received can be lost, nor anything drawn by a worker killed while it waits.
        """
        plan = []
        for cls in (queues.SimpleQueue, queues.Queue):
            for name, before in (("put", "before_send"), ("get", "before_wait")):
                original = cls.__dict__.get(name)
                if original is not None:
                    plan.append((cls, name, self._first(before, original)))
        return plan

    def _first(self, before: str, original: Any) -> Callable:
        def hooked(queue: Any, *args: Any, **kwargs: Any) -> Any:
            child = self.child
            if child is not None:
                getattr(child, before)()
            return original(queue, *args, **kwargs)

        return _named_as(hooked, original)
