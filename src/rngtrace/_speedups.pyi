"""rngtrace._speedups: the C accelerator's interface (see _speedups/module.c and _hotpath.py).

Everything it reads from Python is named here: the slots of ``HotPath``,
``Snapshot``, ``Cache``, ``ThreadState`` and ``Fingerprint``, handed over once
by ``configure``. A slot renamed on the Python side makes ``configure`` raise
at import, and ``tests/test_speedups.py`` fails when draws stop taking the
fast path. Every name the module exports is declared here, and every method of
its types: ``tests/test_speedups_contract.py`` fails where the two differ.
"""

from collections.abc import Callable, Sequence
from typing import Any

def configure(hot_path: type, snapshot: type, cache: type, thread_state: type, fingerprint: type, /) -> None:
    """Name the types whose slots the fast path reads (HotPath, Snapshot, Cache, ThreadState, Fingerprint)."""

def swap_parts(
    parts: list[Any], entries: list[Any], forward: bool, inherited: object, stamps: dict, strays: list[Any], /
) -> bool | None:
    """``_patches.Patches.swap_in`` (forward: each set marked applied, the swap, each set's builtins hooked;
    True, or False with nothing changed) or ``swap_out`` (the builtins unhooked, the swap, the entries
    someone patched over added to ``strays``, each set marked not applied; None), in one call."""

def swap(
    entries: list[tuple[dict[str, Any], str, Any, Any, type | None]],
    forward: bool,
    inherited: object,
    stamps: dict[Any, Any] | None = None,
    /,
) -> Any:
    """Apply (True if applied, False if some attribute no longer holds its original) or undo (stray indices).

    ``stamps``, a dict the caller keeps per entry list (cleared: check every attribute), holds the
    namespaces' versions after the last pass, packed under the key 1 after a pass that put the
    wrappers in and 0 after one that put the originals back; only a pass the other way trusts them.
    """

def lineno_at(code: Any, lasti: int, /) -> int | None:
    """The line of the instruction at byte offset ``lasti``; None where it has no line of its own or lies outside."""

def flat_key(frame: Any, depth: int, /) -> bytes:
    """``StackTable.capture_flat``'s key: the code pointer and f_lasti of up to ``depth`` frames, packed."""

def site_key(frame: Any, depth: int, raw_limit: int, state: tuple, /) -> Any:
    """``StackTable.capture_site``'s key: the call-site form's frames, packed; NotImplemented where a code is new.

    ``state`` is the table's ``(site codes, walk memo, forms)`` (``StackTable.site_state``).
    """

def call_locked(lock: Any, fn: Callable[..., Any], /, *args: Any) -> Any:
    """``fn(*args)`` with ``lock`` taken (waiting for it) and released in C, whatever ``fn`` does."""

def capture(
    frame: Any, depth: int, known: dict[int, tuple], pin: bool, state: tuple, watch: Callable[[Any], None] | None, /
) -> Any:
    """``StackTable.capture`` with a frame cache, walked in C: the node, or NotImplemented to use Python's walk.

    ``state`` is the table's ``(ids, nodes, codes, counter, watched, kind, max_pinned, memo)``,
    ``memo`` a ``walk_memo()`` of that table's own, or None. A Recorder walks the same way, with
    no Python call, where a draw's caller is not in the thread's cache (``Cache.walk``, ``Cache.pin``).
    """

def forget_sites(finished_only: bool, /) -> int:
    """Let go of the frames the recorder's call-site memo holds (past max_events), all or the finished: how many."""

def walk_memo() -> Any:
    """An empty memo for one ``StackTable``'s capture walk: a copy of ``ids`` and of ``codes``' kinds, kept in C."""

def call_if_free(lock: Any, fn: Callable[..., Any], /, *args: Any) -> Any:
    """``fn(*args)`` with ``lock`` taken, or NotImplemented (not called) when another thread holds it."""

def on_sigterm(fd: int, /) -> bool:
    """SIGTERM writes a byte to ``fd`` (a recording child's writer wakes to it) where SIGTERM is the default.

    -1 puts the default back.
    """

def die_of_sigterm() -> None:
    """Put SIGTERM's default back and send it to this process, which dies of it."""

def builtin_twin(fn: Callable[..., Any], /) -> Callable[..., Any]:
    """A new builtin object with ``fn``'s definition, which no hook reaches (``sources._recorder.twin_of``).

    ``fn`` is a plain builtin function (METH_VARARGS, or METH_FASTCALL | METH_KEYWORDS): TypeError otherwise.
    """

def hook_builtins(pairs: list[tuple[Callable[..., Any], Callable[..., Any]]], forward: bool, /) -> bool:
    """With ``forward``, make every call of each builtin of ``pairs`` ((builtin, wrapper), ...) reach its
    wrapper, the builtin object itself staying in place; else give each builtin its own calls back. A bound
    method in a pair records by its function: while hooked, ``__func__`` is the wrapper (called with
    ``__self__`` first).

    All or nothing: False, with nothing changed, where a builtin cannot be hooked or the slots ran out.
    """

def hooked_builtins() -> list[Callable[..., Any]]:
    """The builtins and bound methods whose calls reach a wrapper now (none once every trace ended)."""

def lone_install(
    register_many: Callable[[list[tuple[Callable[[Any], None], str]]], None],
    process_module: str,
    inherited: object,
    hub: Any,
    session: Any,
    /,
) -> bool:
    """``_lone.install_alone(hub, session)``, its checks and loops in C (``register_many``: ``_postimport``'s;
    ``inherited``: ``_patches.INHERITED``, for the swap, made by ``swap_parts`` as ``Patches.swap_in`` makes it)."""

def lone_uninstall(
    unregister_many: Callable[[list[tuple[Callable[[Any], None], str]]], None],
    process_module: str,
    inherited: object,
    hub: Any,
    /,
) -> bool:
    """``_lone.uninstall_alone(hub)``, its checks and loops in C (``unregister_many``: ``_postimport``'s;
    the swap by ``swap_parts``, as ``Patches.swap_out`` makes it)."""

def watch_many(
    hooks: dict[str, list[Callable[[Any], None]]],
    finder: object,
    forward: bool,
    pairs: Sequence[tuple[Callable[[Any], None], str]],
    /,
) -> list[tuple[Callable[[Any], None], Any]] | None:
    """``_postimport``'s ``register_many`` (forward: the (hook, module) pairs already imported, to call)
    or ``unregister_many`` (None) over its ``hooks`` and ``finder``, in one C pass; the caller holds its lock.
    """

#: Whether ``capture`` walks the interpreter's own frames (3.11-3.13, their layout proven at import).
internal_frames: bool

class InPlace:
    """A stream's state read where it lives: ``value`` copies the regions' bytes."""

    def __init__(self, regions: Sequence[tuple[int, int]], owners: Any = None) -> None: ...
    @property
    def value(self) -> bytes: ...

class Shielded:
    """``fn``, called through; on the main thread what it raises is raised again at the program's
    next safe point (a pending call) and the call returns None: a monitoring callback never
    raises into the call it reports. A RecursionError or MemoryError, ``fn``'s own failure,
    is dropped on every thread (the call returns None)."""

    def __init__(self, fn: Callable[..., Any], main_thread_ident: int) -> None: ...
    def __call__(self, *args: Any) -> Any: ...

class Binding:
    """What one with statement's exit of a manager knows (``_blocks.Binding``)."""

    #: what ``__enter__`` put here for the exit (None: no ``__enter__`` claimed this binding)
    payload: Any
    def on_lost(self, callback: Callable[[Any], Any], arg: Any, /) -> None:
        """Call ``callback(arg)`` if the statement is over before ``done()``: its exit never finished."""
    def done(self) -> None:
        """The exit did its work: nothing is lost when the statement lets go of it."""

class BoundExit:
    """A with statement's bound exit: calls ``func(manager, binding, *exc)``; let go of with the
    binding's work undone (``on_lost`` set, ``done`` not called), it calls the binding's callback."""

    func: Callable[..., Any]
    binding: Binding
    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __del__(self) -> None:
        """Its finalizer: the binding's ``on_lost`` callback, where the work is undone."""

class ExitSlot:
    """A class's ``__exit__``, bound anew by each with statement (``_blocks.ExitSlot``)."""

    bound: Callable[..., Any]
    unbound: Callable[..., Any]
    def __init__(self, bound: Callable[..., Any], unbound: Callable[..., Any]) -> None: ...
    def __get__(self, manager: Any, owner: type | None = None) -> Any: ...

def claim(manager: Any, /) -> Binding | None:
    """The binding of the with statement entering ``manager`` (called from its ``__enter__``), or None."""

class ProfileHook:
    """The 3.10/3.11 catch-all's ``c_call`` profile function, in C (``_catchall.CProfileCatchAll``).

    Every event but a C call returns at once; a callee found in ``by_id`` (itself, or the
    singleton it is bound to), called from outside ``prefix`` by a thread not busy in
    ``states``, goes to ``seen(source, callee, frame)``. Called as a Python profile
    function (chained after a user's ``threading.setprofile`` hook), it takes one event.
    """

    def __init__(
        self, by_id: dict[int, Any], ours: object, seen: Callable[[Any, Any, Any], None], prefix: str, states: dict
    ) -> None: ...
    def __call__(self, frame: Any, event: str, arg: Any, /) -> None: ...
    def install(self) -> bool:
        """This thread's profile function from now on (``PyEval_SetProfile``); False, and not installed, once off."""
    def off(self) -> None:
        """Taken off this thread now, off any other at its next C call; never installed again."""
    def set_table(self, by_id: dict[int, Any], /) -> None:
        """The catch-all's table, rebuilt (``CatchAll.refresh``)."""
    def installed(self) -> bool:
        """Whether it is this thread's profile function, as a C function."""

class StreamLock:
    """A stream's reentrant lock: a ``threading.RLock`` the Recorder takes without a method call."""

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool: ...
    def release(self) -> None: ...
    def __enter__(self) -> bool: ...
    def __exit__(self, *exc: Any) -> None: ...
    def _at_fork_reinit(self) -> None: ...
    def _is_owned(self) -> bool: ...

class Recorder:
    """A recording wrapper's common case; every other call goes to ``slow``, the Python wrapper."""

    slow: Callable[..., Any]
    def __init__(
        self,
        slow: Callable[..., Any],
        original: Callable[..., Any],
        owner: Any,
        hot: Any,
        fingerprint: Any,
        lock: Any,
        stream: str,
        kind: str,
        api: str,
        moved: str,
        count_of: Callable[[Any, tuple, dict], int | None] | None,
        tensor_type: Any = None,
        place: Callable[[Any], tuple[str | None, int | None]] | None = None,
        slow_keyword: str | None = None,
        takes: Callable[[tuple, dict], bool] | None = None,
        condition: tuple[str, tuple[tuple[int, str, Any], ...]] | None = None,
        after: Callable[..., None] | None = None,
        inside: tuple[str, ...] | None = None,
        through: tuple[str, ...] | None = None,
        seed_argument: int = -1,
        tensor_layout: tuple[int, int, int, int, int, int, int] | None = None,
    ) -> None:
        """``condition``: a ``_wrapping.Condition.spec``, the test ``takes`` would make, evaluated in C.

        ``inside``: file prefixes whose calls inside a recorded call are part of it;
        ``through``: file prefixes whose calls outside one go to ``slow`` (see ``_wrapping.Through``);
        ``seed_argument``: a seed recorded in C (detail, event, ``hot.seeded``), its value the
        positional argument there (1: past a method's instance); -1: a draw, or a seed ``after`` records;
        ``tensor_layout``: where a CPU result of ``tensor_type`` keeps its count (``_torch_tensor.tensor_layout()``).
        """

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __get__(self, instance: Any, owner: Any = None) -> Any: ...
    def __reduce_ex__(self, protocol: Any) -> Any:
        """Pickled as ``original``: a process that unpickles it gets the original."""
