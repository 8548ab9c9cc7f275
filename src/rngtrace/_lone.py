"""A lone trace, the usual one: its install repeated in one step.

Most traces are the only one active, and want what the last lone trace wanted
(a decorated function called again, a ``with`` block in a loop). The hub keeps
that trace's install as a ``Plan`` and the next lone trace repeats it: one
swap, and none of the questions the general way (``Hub._reconcile``) asks
again, while ``Patches.version`` says the patch sets are the ones it names and
every library it wraps is still imported. What these do, and in what order, is
what the general way does for the same sessions; anything else goes that way.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

from . import _postimport
from ._hooks import PROCESS_MODULE
from ._hotpath import SPEEDUPS
from ._patches import INHERITED, PatchSet
from .sources import declared


class Plan:
    """What a lone trace installed, to install again in one step (``install_alone``).

    Valid while the patch sets are the ones it names (``Patches.version``) and every
    library it wraps is still imported; anything else goes the general way.
    """

    __slots__ = (
        "streams",
        "version",
        "parts",
        "entries",
        "stamps",
        "sources",
        "names",
        "modules",
        "watches",
        "start",
        "start_watch",
    )

    def __init__(
        self,
        streams: frozenset,
        version: int,
        parts: list[PatchSet],
        joined: tuple,
        sources: list,
        watches: tuple,
        start: PatchSet | None,
        start_watch: Callable[[Any], None] | None,
    ) -> None:
        self.streams = streams
        self.version = version
        #: the patch sets applied (a stream's own, then what was learned for it; last, BaseProcess.start's)
        self.parts = parts
        #: BaseProcess.start's hook set, swapped with the streams' where it was all the process hooks
        #: (``ProcessHooks.start_part``); None: ``set_process_hooks`` the usual way
        self.start = start
        #: where multiprocessing is not imported: the import hook waiting for it (``ProcessHooks.start_watch``),
        #: registered with the streams' watches in one pass; None: ``set_process_hooks`` the usual way
        self.start_watch = start_watch
        #: their entries in one list, and its stamps (``Patches._joined_list``)
        self.entries, self.stamps = joined
        #: (stream, source), in install order
        self.sources = sources
        #: their stream names, in the same order
        self.names = tuple(name for name, _source in sources)
        self.modules = tuple(declared()[name].module for name, _source in sources)
        #: (stream, module) for each stream whose library is not imported: watched for its import
        self.watches = watches


def make_plan(hub: Any, session: Any) -> Plan | None:
    """The install just made for ``session`` alone, if the next lone trace can repeat it as it is."""
    rec, patches = hub.rec, hub.patches
    installed = rec.sources
    watching = hub.imports.hooks
    if patches.strays or hub.catchall is None or len(installed) + len(watching) != len(session.streams):
        return None  # another tool's patch, a library imported meanwhile: the general way each time
    parts: list[PatchSet] = []
    sources = []
    watches = []
    for name in session.order:
        if name in watching:  # its library is not imported: the lone trace watches for it again
            watches.append((name, watching[name][0]))
            continue
        patch_set = patches.sets.get(name)
        if patch_set is None or not patch_set.applied or installed.get(name) is not patch_set.source:
            return None
        parts.append(patch_set)
        learned = patches.learned.get(name)
        if learned is not None and learned.entries:
            if not learned.applied:
                return None
            parts.append(learned)
        sources.append((name, patch_set.source))
    start = start_watch = None
    if hub.recording_child is None:
        start = hub.hooks.start_part()
        start_watch = hub.hooks.start_watch() if start is None else None
    if start is not None:
        parts.append(start)
    joined = patches.joined_list(parts)
    return Plan(session.streams, patches.version, parts, joined, sources, tuple(watches), start, start_watch)


def install_alone_python(hub: Any, session: Any) -> bool:
    """Install what the last lone trace did, in one swap; False where the general way must.

    What it does, and in what order, is what ``_reconcile`` does for the same
    sessions, less the questions the plan answered already. The reference for
    ``install_alone``, which is ``_speedups.lone_install`` on 3.10 with the accelerator (see below).
    """
    plan, rec, patches = hub.plan, hub.rec, hub.patches
    if (
        plan is None
        or plan.streams != session.streams
        or plan.version != patches.version
        or rec.sources
        or hub.catchall is not None
        or patches.strays
        or hub.imports.hooks
    ):
        return False
    modules = sys.modules
    for module in plan.modules:
        if modules.get(module) is None:
            return False
    for _name, module in plan.watches:
        if modules.get(module) is not None:
            return False  # imported since: its stream is installed the general way
    parts = plan.parts
    for part in parts:
        if part.applied:
            return False
    start, start_watch = plan.start, plan.start_watch
    if start is not None and (hub.recording_child is not None or not hub.hooks.start_swappable(start)):
        return False
    if start_watch is not None and (
        hub.recording_child is not None or modules.get(PROCESS_MODULE) is not None or not hub.hooks.start_watch_free()
    ):
        return False  # multiprocessing imported since: BaseProcess.start is hooked the general way
    if start is not None:
        hub.hooks.start_swapped(True)  # first: an undo cut short takes it off
    installed = rec.sources
    for name, source in plan.sources:
        source.prepare()  # before each install: a cache filled now holds no wrapper
        installed[name] = source  # first: an undo cut short by Ctrl-C finds what to take off
    if not patches.swap_in(parts, plan.entries, plan.stamps):
        installed.clear()  # someone patched over a set: the general way finds out which
        return False
    for name, _source in plan.sources:
        rec.reseeded(name)
    if plan.watches or start_watch is not None:
        # Each noted first (an undo cut short finds what to take out), then all registered in one pass.
        pairs = [(hub.held_import(name, module), module) for name, module in plan.watches]
        if start_watch is not None:
            hub.hooks.hold_start_watch(start_watch)
            pairs.append((start_watch, PROCESS_MODULE))
        _postimport.register_many(pairs)
    hub.put_catchall()
    if start is None and start_watch is None:
        hub.set_process_hooks((session,))
    return True


def uninstall_alone_python(hub: Any) -> bool:
    """Take off what ``install_alone`` (or the general way, for a lone trace) put in; False where it cannot.

    The reference for ``uninstall_alone``, which is ``_speedups.lone_uninstall`` on 3.10 with the accelerator.
    """
    plan, rec, patches = hub.plan, hub.rec, hub.patches
    installed = rec.sources
    if plan is None or plan.version != patches.version or len(installed) != len(plan.sources):
        return False
    watching = hub.imports.hooks
    if len(watching) != len(plan.watches):
        return False
    for name, _module in plan.watches:
        if name not in watching:
            return False
    for name, source in plan.sources:
        if installed.get(name) is not source:
            return False
    parts = plan.parts
    for part in parts:
        if not part.applied:
            return False
    start, start_watch = plan.start, plan.start_watch
    if start is not None and (hub.recording_child is not None or not hub.hooks.start_swappable(start, on=True)):
        return False  # a child's hooks went on beside it (a forked child): ``set_process_hooks`` takes them off
    if start_watch is not None and (hub.recording_child is not None or not hub.hooks.start_watch_held(start_watch)):
        return False  # multiprocessing imported meanwhile, BaseProcess.start hooked: the general way takes it off
    rec.publish(())  # first: wrappers stop recording at once
    patches.swap_out(parts, plan.entries, plan.stamps)
    hub.forget_streams(plan.names)
    if plan.watches or start_watch is not None:
        pairs = [(watching[name][1], module) for name, module in plan.watches]
        if start_watch is not None:
            pairs.append((start_watch, PROCESS_MODULE))
        _postimport.unregister_many(pairs)
        for name, _module in plan.watches:  # only now: an undo cut short before this is done again
            hub.imports.let_go(name)
    if hub.catchall is not None:
        hub.take_catchall()
    if start_watch is not None:
        hub.hooks.let_go_start_watch()
    elif start is None:
        hub.set_process_hooks(())
    else:
        hub.hooks.start_swapped(False)  # taken off in the swap above
    return True


#: The same questions and steps with the checks and loops between the steps in C (each step the
#: same Python call), where the accelerator is built; None where it is not.
install_alone_c: Callable[[Any, Any], bool] | None = (
    functools.partial(SPEEDUPS.lone_install, _postimport.register_many, PROCESS_MODULE, INHERITED)
    if SPEEDUPS is not None
    else None
)
uninstall_alone_c: Callable[[Any], bool] | None = (
    functools.partial(SPEEDUPS.lone_uninstall, _postimport.unregister_many, PROCESS_MODULE, INHERITED)
    if SPEEDUPS is not None
    else None
)

# What every trace's start and end calls. The C functions on 3.10 only: there they save about 2 us a
# trace, and on 3.11+ the specializing interpreter reads these attributes faster than C's generic
# lookups do (the Python functions there are 0.6-1 us a trace faster; benchmarks/README.md).
_C_FASTER = sys.version_info < (3, 11)
install_alone: Callable[[Any, Any], bool] = (
    install_alone_c if install_alone_c is not None and _C_FASTER else install_alone_python
)
uninstall_alone: Callable[[Any], bool] = (
    uninstall_alone_c if uninstall_alone_c is not None and _C_FASTER else uninstall_alone_python
)
