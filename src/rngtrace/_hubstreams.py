"""The hub's part for streams that arrive during a trace (``_hub.Hub`` mixes it in).

A library imported inside a trace has its stream installed the moment it is, or, where
the hub's lock is taken, once it is let go (``_imported``: called with an import lock
held, it never waits). A reference bound before the trace (``from random import
randrange``) is patched once the catch-all saw a call through it (``learn``). And the
catch-all itself: put in with the first source, taken off with the last, and swapped
for the profile hook by the first move it could have seen (``_arm``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import FrameType
from typing import TYPE_CHECKING, Any

from . import _catchall
from ._hooks import ImportWatch
from ._patches import Patches
from ._paths import is_user_file
from ._record import Recording
from ._session import Session, note_origins
from .sources import declared, load_source
from .sources._base import unmoved

#: module namespaces remembered as searched (each held, so the table is bounded)
LEARNED_FROM_LIMIT = 1024
#: frames searched for modules holding a stream's originals, when a move no call recorded is noticed
LEARN_STACK_DEPTH = 32


class HubStreams:
    """Streams arriving during a trace, and the catch-all that finds the moves no patch saw."""

    # What this part uses of the rest of the hub (``_hub.Hub`` makes them).
    rec: Recording
    patches: Patches
    imports: ImportWatch
    catchall: _catchall.CatchAll | None
    _pending_imports: set[str]
    _import_states: dict[str, dict]
    _learned_from: dict[tuple[str, int], dict]
    _hook_wanted: bool

    if TYPE_CHECKING:

        @property
        def active(self) -> tuple[Session, ...]: ...
        def _locked(self, fn: Callable, *args: Any) -> Any: ...
        def _if_free(self, fn: Callable, *args: Any) -> Any: ...
        def _after_unlock(self) -> None: ...
        def _settle(self, sessions: tuple) -> None: ...

    # -- the catch-all ------------------------------------------------------------------
    def put_catchall(self) -> None:
        """Install the catch-all (``_catchall``); with the profile hook at once where the last trace needed it."""
        # 3.10/3.11: the last trace found moves through references the patches miss, so
        # the profile hook goes in at once, to attribute (and learn) them from the first.
        self.catchall = _catchall.install(self, hook=self._hook_wanted)
        self._hook_wanted = False  # this trace says again whether the next one needs it

    def take_catchall(self) -> None:
        """Take the catch-all off."""
        if self.catchall is not None:  # idempotent: an interrupted one is completed by the retry
            self.catchall.uninstall()
        self.catchall = None

    def forget_streams(self, names: Iterable[str]) -> None:
        """Streams whose patches came off: no longer installed, their fingerprints unknown."""
        installed, fingerprints = self.rec.sources, self.rec.fingerprints
        for name in names:
            installed.pop(name).forget()
            fingerprint = fingerprints.get(name)
            if fingerprint is not None:  # (none made yet: nothing to clear)
                fingerprint.view = fingerprint.last = None  # Fingerprint.clear, inline: every trace's end

    def wrappers(self) -> list[object]:
        """Every replacement currently patched in."""
        return self.patches.wrappers()

    # -- a library imported inside a trace ------------------------------------------------
    def watch_import(self, name: str, module: str) -> None:
        """Install stream ``name`` the moment ``module`` is imported (``_imported``)."""
        self.imports.watch(name, module, self._imported)

    def held_import(self, name: str, module: str) -> Callable[[Any], None]:
        """``watch_import`` less the registering: the hook, for the caller to register with others."""
        return self.imports.held(name, module, self._imported)

    def _imported(self, name: str) -> None:
        """A watched library was imported inside a trace: install its stream now, or soon.

        Called by the import system with the module's import lock held. Waiting for
        the hub's lock here could deadlock with a thread that holds it and is itself
        importing that module (to install its stream), so the stream is only queued
        unless the lock is free; whoever holds it takes the queue when it lets go.
        """
        self._note_import_state(name)
        self._pending_imports.add(name)
        self._after_unlock()

    def _note_import_state(self, name: str) -> None:
        """The state a library's stream starts from, read where it is imported, before any draw.

        Where the lock is taken, the stream is installed only once it is let go, and the
        draws made meanwhile (the importing thread's first ones) are recorded by no
        wrapper: measured from here, the end-of-block check reports them, never silent.
        """
        if not any(name in s.streams and name not in s.start_states for s in self.active):
            return
        try:
            self._import_states[name] = load_source(name).snapshot()
        except Exception:  # noqa: BLE001 (the stream is still installed; measured from then on)
            self._import_states.pop(name, None)

    def _take_imports(self) -> None:
        """Install the streams whose library was imported while a trace wanted them (lock held)."""
        while self._pending_imports:
            name = self._pending_imports.pop()
            sessions = self.active
            wanting = [s for s in sessions if name in s.streams and name not in s.start_states]
            if not wanting:
                self._import_states.pop(name, None)
                continue
            self._settle(sessions)
            source = self.rec.sources.get(name)
            imported = self._import_states.pop(name, None)
            if source is not None:
                states = source.snapshot()
                if imported is not None and not unmoved(source, imported, states):
                    # Drawn from between the import and now, while the lock was taken: no wrapper saw it.
                    self.rec.unattributed(
                        name,
                        None,
                        f"moved after {declared()[name].module} was imported, "
                        "before rngtrace could put its wrappers in place",
                    )
                for s in wanting:
                    s.start_states[name] = states
                    if s.compared:
                        note_origins((s,), source, "start")  # e.g. numpy imported by the program rngtrace run runs

    # -- references bound before the trace, and the profile hook armed by a move ------------
    def learn(self, stream: str, frame: FrameType | None, callee: Any = None) -> bool:
        """The catch-all saw ``frame`` reach ``stream`` around the patches: patch its module's references.

        Once per module and stream; only when the hub's lock is free, since the
        catch-all runs inside any code, which may be waiting for it (a later call learns).
        Returns whether ``callee`` was one of them: the module held it, and holds a wrapper now.
        """
        if frame is None:
            return False
        namespace = frame.f_globals
        key = (stream, id(namespace))
        if key in self._learned_from:
            return False
        learned = self._if_free(self._learn_callee, stream, key, namespace, callee)
        if learned is NotImplemented:
            return False
        self._after_unlock()
        return bool(learned)

    def _learn_callee(self, stream: str, key: tuple[str, int], namespace: dict, callee: Any) -> bool:
        held = callee is not None and any(value is callee for value in list(namespace.values()))
        self._learn(stream, key, namespace)
        if not held or any(value is callee for value in list(namespace.values())):
            return False
        self._disarm_locked()
        return True

    def _disarm_locked(self) -> None:
        """3.10/3.11: the profile hook's find was a module's name, a wrapper now: the hook goes back to armed.

        Unless it also found a call no patch reaches (a reference held in an object, a local):
        it stays in for those. A later move nobody recorded arms it again.
        """
        hooked = self.catchall
        if not isinstance(hooked, _catchall.PROFILE_HOOKS) or hooked.needed:
            return
        hooked.uninstall()
        self.catchall = None
        self.catchall = _catchall.ArmedCatchAll(self)
        self._hook_wanted = False  # the names learned are patched with the stream at every later install

    def _learn(self, stream: str, key: tuple[str, int], namespace: dict) -> int:
        if len(self._learned_from) >= LEARNED_FROM_LIMIT:
            self._learned_from.clear()  # searched again if met again: a bound, not a loss
        self._learned_from[key] = namespace
        return self.patches.learn(stream, namespace)

    def _start_pinning(self, pinnable: Any) -> None:
        self._locked(self._start_pinning_locked, pinnable)

    def _start_pinning_locked(self, pinnable: Any) -> None:
        # Any thread may get here: only the catch-all still installed may start its sweeper.
        if pinnable is self.catchall:
            pinnable.start_pinning()  # type: ignore[union-attr]  # the profile hook's, which pins

    def _unattributed(self, stream: str, frame: FrameType | None = None) -> None:
        source = self.rec.sources.get(stream)
        # Arm the profile hook only where it can see what moved the stream (sys.monitoring sees every call).
        if source is None or not (source.profile_visible or _catchall.MONITORING):
            return
        armed = isinstance(self.catchall, _catchall.ArmedCatchAll)
        if armed and self._learn_stack(stream, frame):
            # A module on the noticing stack held the stream's originals, patched now: the likely
            # way in is closed with no hook, which would see every call of the program (3.11 runs
            # unspecialised under any profile function). A move that still comes arms it.
            return
        self._hook_wanted = True
        if armed:
            self._arm()

    def _learn_stack(self, stream: str, frame: FrameType | None) -> bool:
        """Patch the references to ``stream``'s originals held by the user modules on the stack; whether any was."""
        namespaces: dict[tuple[str, int], dict] = {}
        f = frame
        for _ in range(LEARN_STACK_DEPTH):
            if f is None:
                break
            key = (stream, id(f.f_globals))
            filename = f.f_code.co_filename
            # The user's modules, a notebook's cells and `python -c` included (their globals are patched
            # as a module's are), not the frozen standard library's.
            user = is_user_file(filename) if not filename.startswith("<") else not filename.startswith("<frozen")
            if user and key not in self._learned_from:
                namespaces[key] = f.f_globals
            f = f.f_back
        if not namespaces:
            return False
        added = self._if_free(self._learn_all, stream, list(namespaces.items()))
        if added is NotImplemented:
            return False
        self._after_unlock()
        return added > 0

    def _learn_all(self, stream: str, namespaces: list[tuple[tuple[str, int], dict]]) -> int:
        return sum(self._learn(stream, key, namespace) for key, namespace in namespaces)

    def hook_found(self) -> None:
        """The profile hook attributed a call: the next trace should have it from its start too."""
        self._hook_wanted = True

    def _arm(self) -> None:
        """Swap the armed catch-all for its hook (profile or sys.monitoring), now that there is something to find."""
        self._locked(self._arm_locked)

    def _arm_locked(self) -> None:
        armed = self.catchall
        if not isinstance(armed, _catchall.ArmedCatchAll):
            return
        if not _catchall.hook_free():
            return  # another profiler took the slot: stay armed, never displace it
        armed.uninstall()
        self.catchall = None
        made = armed.arm()
        note = _catchall.ARMED_NOTE
        if made is None:  # 3.12+: every tool id taken
            made, note = _catchall.NoCatchAll(self, _catchall.NO_TOOL_NOTE), _catchall.NO_TOOL_NOTE
        self.catchall = made
        for session in self.active:
            if note not in session.trace.notes:
                session.trace.notes.append(note)
