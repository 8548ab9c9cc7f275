"""The patch set: attributes replaced while tracing, applied and undone in one pass.

A source yields its patches once per process (``Source.patches``); they are
kept as a ``PatchSet`` of ``(namespace, attribute, original, wrapper, type)``
entries and reused by every later trace, so entering and leaving a trace is
one pass over a list, not a rebuild. With the C accelerator each pass is one C
call: no signal handler (Ctrl-C) can run in the middle of it. In pure Python a
pass interrupted half-way leaves the set marked unsettled, and the next hub
call completes it.

Two rules keep rngtrace from fighting other tools (``monkeypatch``,
``mock.patch``): a set is re-applied only while every attribute still holds the
original it wraps, and an undo never overwrites an attribute someone else
changed. An entry skipped that way is a stray: whenever one of rngtrace's
wrappers is found back in its place (the other tool restored what it saved),
the next hub call puts the original there.

A builtin or bound method a source marks ``IN_PLACE`` is not replaced at all: with
the C accelerator the object itself calls its wrapper while its set is applied
(``_speedups.hook_builtins``; a bound method's function is the wrapper), so every
reference to it, bound before the trace or
checked by identity (torch.compile's guards), is the same object, recording. Its
hooks go on after the set's attributes and come off before them; both passes
are idempotent, so one cut short by an interrupt is completed by the next.

The process's own hooks that are attributes (``os._exit``, ``BaseProcess.start``, the
queues' ``put`` and ``get``) are named patch sets (``Patches.hook``), apart from the
streams' (the catch-all never takes them for a stream's wrappers); ``_hooks`` says when
each is wanted, and holds the hooks that are no attribute (post-import hooks, ``atexit``).
"""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterable
from typing import Any

from ._hotpath import SPEEDUPS as _speedups
from .sources._base import IN_PLACE

INHERITED = object()  # the attribute lived on a base class: undo by deleting ours

#: (namespace dict, attribute, original or INHERITED, wrapper, the type to mark modified or None)
Entry = tuple


def namespace_of(parent: Any) -> tuple[dict, type | None]:
    """The dict that really holds ``parent``'s attributes, and ``parent`` if it is a type."""
    if isinstance(parent, type):
        # A type's namespace is an ordinary dict behind a read-only proxy; writing it
        # directly also works for extension types (numpy's RandomState) that refuse setattr.
        return gc.get_referents(parent.__dict__)[0], parent
    return vars(parent), None


def _type_modified(types: Iterable[type]) -> None:
    import ctypes  # here: a traced child that patches no type's namespace never imports it

    for t in types:
        # Drop the method caches that remember the old entry, as setattr would.
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(t))


def _swap_python(entries: list[Entry], forward: bool, inherited: object, stamps: dict | None = None) -> Any:
    """Pure-Python twin of ``_speedups.swap`` (same results; interruptible between entries)."""
    if forward:
        for namespace, attr, original, _wrapper, _type in entries:
            if namespace.get(attr, inherited) is not original:
                return False
        for namespace, attr, _original, wrapper, _type in entries:
            namespace[attr] = wrapper
        _type_modified({t for *_, t in entries if t is not None})
        return True
    strays = []
    for i, (namespace, attr, original, wrapper, _type) in enumerate(entries):
        now = namespace.get(attr, inherited)
        if now is original:
            continue  # already off: an install cut short before its swap put nothing in
        if now is not wrapper:
            strays.append(i)
        elif original is inherited:
            del namespace[attr]
        else:
            namespace[attr] = original
    _type_modified({t for *_, t in entries if t is not None})
    return strays


def _hook(parts: Iterable[PatchSet], forward: bool) -> None:
    """Hook (or unhook) the in-place builtins of ``parts``: each set's, in one C call per set."""
    for patch_set in parts:
        if patch_set.hooks:  # only built where the accelerator is
            _speedups.hook_builtins(patch_set.hooks, forward)  # type: ignore[union-attr]


def _swapper() -> Callable[..., Any]:
    return _swap_python if _speedups is None else _speedups.swap


#: ``Patches.swap_in`` and ``swap_out`` whole, in C where the accelerator is built (``swap_parts``:
#: the same steps in the same order); the Python below is the reference.
_SWAP_PARTS: Callable[..., Any] | None = None if _speedups is None else _speedups.swap_parts


class PatchSet:
    """One source's patches, made once per process and reused while nobody patched over them."""

    __slots__ = ("source", "entries", "hooks", "applied", "stamps")

    def __init__(self, source: Any) -> None:
        self.source = source
        self.entries: list[Entry] = []
        #: (builtin or bound method, wrapper) for each that records in place
        self.hooks: list[tuple[Any, Any]] = []
        #: each namespace's dict version after our last pass (C only): unchanged, no check needed
        self.stamps: dict[int, int] = {}
        #: the wrappers are in place (or an undo of them has not completed yet)
        self.applied = False

    def build(self, plan: Iterable[tuple[Any, str, Any]]) -> None:
        """Apply a source's patches as it yields them (numpy binds later ones to earlier ones)."""
        self.applied = True
        for parent, attr, wrapper in plan:
            if attr == IN_PLACE:
                self.hooks.append((parent, wrapper))
                _hook((self,), True)
                continue
            namespace, kind = namespace_of(parent)
            original = namespace.get(attr, INHERITED)
            self.entries.append((namespace, attr, original, wrapper, kind))
            namespace[attr] = wrapper
            if kind is not None:
                _type_modified((kind,))

    def wrappers(self) -> list[object]:
        """Every replacement this set puts in place, and the builtins that record in place."""
        # A wrapper a class holds as a static method (torch._VF's) is the function inside it.
        wrappers = [e[3].__func__ if isinstance(e[3], staticmethod) else e[3] for e in self.entries]
        return wrappers + [fn for fn, _wrapper in self.hooks]

    def by_original(self) -> dict[int, tuple[Any, Any]]:
        """id(original) -> (original, wrapper) for the module-level functions this set replaces."""
        return {id(e[2]): (e[2], e[3]) for e in self.entries if e[4] is None and e[2] is not INHERITED}

    def describe(self) -> list[str]:
        """``module.attribute`` for each patched attribute, and each builtin recording in place."""
        hooked = [f"{getattr(fn, '__module__', None) or '?'}.{fn.__name__} (in place)" for fn, _w in self.hooks]
        return [f"{_owner_name(ns, kind)}.{attr}" for ns, attr, _o, _w, kind in self.entries] + hooked


class Patches:
    """Every patch set the hub has made, which of them are applied, and the strays."""

    def __init__(self) -> None:
        self.sets: dict[str, PatchSet] = {}
        #: per stream, references to its functions found in other modules' globals (``learn``)
        self.learned: dict[str, PatchSet] = {}
        self.strays: list[Entry] = []
        #: the process's own hooks by name (``hook``): never a stream's, never in ``wrappers()``
        self.hook_sets: dict[str, PatchSet] = {}
        self.hooks_made: set[str] = set()  # the hook sets made in full (a making cut short is made again)
        self._swap = _swapper()
        #: changes whenever a set is made or its entries change: a joined list is reused while it holds
        self.version = 0
        #: ids of the sets joined -> (version, those sets, their entries in one list, its stamps)
        self._joined: dict[tuple[int, ...], tuple[int, tuple[PatchSet, ...], list[Entry], dict]] = {}

    def apply(self, name: str, make_source: Callable[[str], Any], recorder: Any) -> PatchSet:
        """Put stream ``name``'s wrappers in place, reusing its set unless someone patched over it."""
        patch_set = self.sets.get(name)
        if patch_set is not None and patch_set.applied:
            self._apply_learned(name)
            return patch_set
        if patch_set is not None:
            patch_set.source.prepare()  # before each install: a cache filled now holds no wrapper
            # Marked first: a pure-Python pass interrupted half-way is undone by the next call.
            patch_set.applied = True
            if self._swap(patch_set.entries, True, INHERITED, patch_set.stamps):
                _hook((patch_set,), True)
                self._apply_learned(name)
                return patch_set
            patch_set.applied = False
            self.learned.pop(name, None)  # its wrappers are about to be made anew
        # First use, or an attribute no longer holds the original the wrappers call: build anew.
        source = make_source(name)
        patch_set = PatchSet(source)
        self.sets[name] = patch_set
        self.version += 1
        try:
            source.prepare()
            patch_set.build(source.patches(recorder))
        except BaseException:
            self.sets.pop(name, None)
            self._undo(patch_set)
            raise
        return patch_set

    def undo(self, name: str) -> None:
        """Take stream ``name``'s wrappers off (those still in place; the rest become strays)."""
        learned = self.learned.get(name)
        if learned is not None and learned.applied:
            self._undo(learned)
        patch_set = self.sets.get(name)
        if patch_set is not None and patch_set.applied:
            self._undo(patch_set)

    # -- the process's own hooks (os._exit, BaseProcess.start, multiprocessing's queues) ------
    def hook(self, name: str, plan: Callable[[], Iterable[tuple[Any, str, Any]]]) -> None:
        """Put hook set ``name`` in place: made by ``plan`` at its first use, and anew where someone patched over it."""
        hook_set = self.hook_sets.get(name)
        if hook_set is not None and name in self.hooks_made:
            if hook_set.applied:
                for namespace, attr, _original, wrapper, _type in hook_set.entries:
                    if namespace.get(attr, INHERITED) is not wrapper:
                        self._undo(hook_set)  # a pass cut short, or someone patched over one: off, then on again
                        break
                else:
                    return
            hook_set.applied = True  # first: a pure-Python pass cut short is undone by the next call
            if self._swap(hook_set.entries, True, INHERITED, hook_set.stamps):
                return
            hook_set.applied = False
        elif hook_set is not None:
            self._undo(hook_set)  # its making was cut short: what it put on comes off first
        self.hooks_made.discard(name)
        hook_set = self.hook_sets[name] = PatchSet(None)
        try:
            hook_set.build(plan())
        except BaseException:
            self._undo(hook_set)
            raise
        self.hooks_made.add(name)

    def unhook(self, name: str) -> None:
        """Take hook set ``name`` off (where it is on; an attribute someone patched over since becomes a stray)."""
        hook_set = self.hook_sets.get(name)
        if hook_set is not None and hook_set.applied:
            self._undo(hook_set)

    def hooks_on(self) -> list[str]:
        """``module.attribute`` for each of the process's own hooks in place now."""
        return [line for hook_set in self.hook_sets.values() if hook_set.applied for line in hook_set.describe()]

    # -- several streams in one pass -----------------------------------------------
    def apply_many(self, names: list[str]) -> list[PatchSet] | None:
        """Put the wrappers of ``names`` in place in one swap, where each set was made before and still fits.

        None where it cannot (a set to build, or someone patched over one): ``apply`` each
        then, which finds out why.
        """
        sets = self.sets
        parts: list[PatchSet] = []
        for name in names:
            patch_set = sets.get(name)
            if patch_set is None or patch_set.applied:
                break  # a first install builds its set, a retry finishes one: one at a time
            patch_set.source.prepare()  # before each install: a cache filled now holds no wrapper
            parts.append(patch_set)
            learned = self.learned.get(name)
            if learned is not None and learned.entries and not learned.applied:
                parts.append(learned)
        else:
            if parts and self.swap_in(parts, *self.joined_list(parts)):
                return [sets[name] for name in names]
        return None

    def undo_many(self, names: list[str]) -> None:
        """``undo`` for each of ``names``, in one swap."""
        parts: list[PatchSet] = []
        for name in names:
            for patch_set in (self.learned.get(name), self.sets.get(name)):
                if patch_set is not None and patch_set.applied:
                    parts.append(patch_set)
        if parts:
            self.swap_out(parts, *self.joined_list(parts))

    def swap_in(self, parts: list[PatchSet], entries: list[Entry], stamps: dict) -> bool:
        """Apply ``parts`` (joined by ``entries``) in one swap; False, nothing changed, where one no longer fits."""
        if _SWAP_PARTS is not None:  # the steps below, in one C call (every trace's start)
            return _SWAP_PARTS(parts, entries, True, INHERITED, stamps, self.strays)
        for patch_set in parts:
            patch_set.applied = True  # first: a pure-Python pass cut short is undone by the next call
        if self._swap(entries, True, INHERITED, stamps):
            _hook(parts, True)
            return True
        for patch_set in parts:  # the swap changed nothing
            patch_set.applied = False
        return False

    def swap_out(self, parts: list[PatchSet], entries: list[Entry], stamps: dict) -> None:
        """Undo ``parts``, whose entries ``entries`` joins, in one swap; what someone patched over becomes a stray."""
        if _SWAP_PARTS is not None:  # the steps below, in one C call (every trace's end)
            _SWAP_PARTS(parts, entries, False, INHERITED, stamps, self.strays)
            return
        _hook(parts, False)
        strays = self._swap(entries, False, INHERITED, stamps)
        if strays:
            self.strays.extend(entries[i] for i in strays)
        for patch_set in parts:
            patch_set.applied = False  # only now: an interrupted undo is completed by the next call

    def joined_list(self, parts: list[PatchSet]) -> tuple[list[Entry], dict]:
        """The entries of ``parts`` in one list, made once while no set changes, with stamps of its own.

        Its own stamps stay right whichever list was swapped last: a stamp is a namespace's
        version after this list's pass, and any write since, by anyone, changes the version.
        """
        if len(parts) == 1:
            return parts[0].entries, parts[0].stamps
        key = tuple(map(id, parts))
        joined = self._joined.get(key)  # holds the sets: their ids cannot name others meanwhile
        if joined is None or joined[0] != self.version:
            if len(self._joined) >= 32:
                self._joined.clear()
            joined = (self.version, tuple(parts), [e for ps in parts for e in ps.entries], {})
            self._joined[key] = joined
        return joined[2], joined[3]

    # -- references bound before a trace ----------------------------------------
    #: learned references kept per stream: each holds its namespace (a module's globals)
    LEARN_LIMIT = 1024

    def learn(self, name: str, namespace: dict) -> int:
        """Replace, in ``namespace``, the references to stream ``name``'s functions bound before tracing.

        ``from random import randrange`` at import leaves a module holding the original,
        which no patch of ``random`` reaches; the catch-all hook attributes such calls,
        where it can, only once a move was noticed, in each block anew. Once one is found
        (a call seen by the hook, made from ``namespace``), that module's references are
        patched too, now and at every later install of the stream: later traces attribute
        them from their first call, with no hook. Returns how many were added.
        """
        patch_set = self.sets.get(name)
        if patch_set is None or not patch_set.applied:
            return 0
        learned = self.learned.get(name)
        if learned is None:
            learned = self.learned[name] = PatchSet(patch_set.source)
        own = {id(e[0]) for e in patch_set.entries}
        if id(namespace) in own or len(learned.entries) >= self.LEARN_LIMIT:
            return 0
        known = {(id(e[0]), e[1]) for e in learned.entries}
        originals = patch_set.by_original()
        found = []
        for attr, value in list(namespace.items()):
            hit = originals.get(id(value))
            if hit is not None and hit[0] is value and (id(namespace), attr) not in known and isinstance(attr, str):
                found.append((namespace, attr, value, hit[1], None))
        if not found:
            return 0
        learned.applied = True  # first: an undo completes whatever part of this is in place
        learned.stamps.clear()
        self.version += 1
        for entry in found:
            learned.entries.append(entry)
            namespace[entry[1]] = entry[3]  # applied now, as the rest of the set is
        return len(found)

    def _apply_learned(self, name: str) -> None:
        learned = self.learned.get(name)
        if learned is None or learned.applied or not learned.entries:
            return
        learned.applied = True
        if self._swap(learned.entries, True, INHERITED, learned.stamps):
            return
        # A module rebound one of the names since: keep those still holding the original.
        learned.entries[:] = [e for e in learned.entries if e[0].get(e[1], INHERITED) is e[2]]
        learned.stamps.clear()
        self.version += 1
        if not self._swap(learned.entries, True, INHERITED, learned.stamps):
            learned.applied = False

    def _undo(self, patch_set: PatchSet) -> None:
        _hook((patch_set,), False)
        strays = self._swap(patch_set.entries, False, INHERITED, patch_set.stamps)
        if strays:
            self.strays.extend(patch_set.entries[i] for i in strays)
        patch_set.applied = False  # only now: an interrupted undo is completed by the next call

    def settle_strays(self) -> None:
        """Put the original back wherever one of our wrappers has been put back since."""
        if not self.strays:
            return
        keep = []
        for entry in self.strays:
            namespace, attr, original, wrapper, kind = entry
            now = namespace.get(attr, INHERITED)
            if now is wrapper and self._swap([entry], False, INHERITED) == []:
                continue
            if now is not original:
                keep.append(entry)  # still someone else's: look again at the next call
        self.strays = keep

    def wrappers(self) -> list[object]:
        """Every wrapper currently in place."""
        return [w for ps in self.sets.values() if ps.applied for w in ps.wrappers()]

    def hooked(self) -> dict[str, list[str]]:
        """What is patched right now, by stream (empty when idle), strays included."""
        out = {name: ps.describe() for name, ps in self.sets.items() if ps.applied}
        for name, learned in self.learned.items():
            if learned.applied and learned.entries:
                out[f"{name} (learned)"] = learned.describe()
        live = [e for e in self.strays if e[0].get(e[1], INHERITED) is e[3]]
        if live:
            out["strays"] = [f"{_owner_name(e[0], e[4])}.{e[1]}" for e in live]
        return out


def _owner_name(namespace: dict, kind: type | None) -> str:
    if kind is not None:
        return f"{kind.__module__}.{kind.__qualname__}"
    return str(namespace.get("__name__", "?"))
