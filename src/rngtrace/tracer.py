"""``rng_trace``: the context manager and decorator users write."""

from __future__ import annotations

import functools
import inspect
import os
import sys
import weakref
from collections.abc import AsyncGenerator, Callable, Coroutine, Generator
from contextvars import ContextVar
from typing import Any, TypeVar, cast, overload

from . import _logdir, _pids
from ._blocks import Binding, ExitSlot, claim
from ._hub import HUB, install_order
from ._options import OPTION_NAMES, Options, signature
from ._say import wants_color
from .sources import PROBLEMS, problems
from .trace import Trace

F = TypeVar("F", bound=Callable[..., Any])


class RngTrace(Options):
    """Traces a block (``with``) or every call of a function (decorator).

    Every block and every call has its own trace, also when one tracer is
    entered again inside itself, from several threads or from several
    asyncio tasks. ``last_trace`` is the Trace of whichever ended last.
    """

    # State of its own, set by _own_state (not dataclass fields: this class is not a dataclass).
    _sorted_streams: tuple[str, ...]
    _last: list[Trace | None]
    _entered: ContextVar[tuple[Any, ...]]
    _open: list[Any]

    def __post_init__(self) -> None:
        super().__post_init__()
        self._own_state()

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> RngTrace:
        """A tracer from option values an earlier one checked and normalised (``rng_trace``'s cache)."""
        tracer = cls.__new__(cls)
        state = tracer.__dict__
        state.update(values)  # what the frozen dataclass's __init__ would have set, _sorted_streams with it
        # The rest of _own_state, inline (every ``with rng_trace(...)`` in a loop makes a tracer).
        state["_last"] = [None]
        state["_open"] = []
        return tracer

    def _own_state(self) -> None:
        # Options freezes its own fields only, so a subclass may still keep state of its own;
        # written to __dict__ directly: the frozen base's __setattr__ is Python code.
        state = self.__dict__
        state["_sorted_streams"] = install_order(self.streams)  # type: ignore[arg-type]
        # A list, not an attribute: this changes every call.
        state["_last"] = [None]
        # A with statement's exit knows its own block (_blocks); an exit called by hand
        # (ExitStack, __exit__()) ends the newest block that its context (thread, asyncio
        # task) entered by hand, so neither another thread's nor another task's. A
        # ContextVar, not one shared list, is what keeps them apart. Made at the first such
        # entry (``_entered_var``): most blocks are with statements, which never read it.
        # Every block entered by hand and still open, from any context: for an exit in another
        # context than its entry.
        state["_open"] = []

    @property
    def last_trace(self) -> Trace | None:
        """The Trace of the block or call that ended most recently, in any thread (None before)."""
        return self._last[0]

    # -- with ---------------------------------------------------------------
    # Every step that can be interrupted once the session exists is covered: a Ctrl-C inside
    # __enter__ ends it there, one inside the exit ends it in the exit's `finally`, and one at
    # the exit's first instruction, before any `try` of ours, frees the statement's binding with
    # the session in it, and the hub ends it (HUB.orphaned).
    def __enter__(self) -> Trace:
        binding = claim(self)
        session = self._session()
        try:
            if binding is None:
                self._register(session)
            else:
                binding.payload = session
                binding.on_lost(HUB.orphaned, session)
            # ``_start``'s usual case (no log_dir) with one call less per block:
            (HUB.start if self.log_dir is None else self._start)(session)
        except BaseException:
            HUB.abandon(session)
            if binding is None:
                self._unregister(session)
            else:
                binding.done()
            raise
        # A Trace (made by _session); no typing.cast() call per block.
        return session.trace

    def _exit_bound(self, binding: Binding, exc_type: Any, exc: Any, tb: Any) -> None:
        """A with statement's exit: end the session its ``__enter__`` put in ``binding``."""
        frame = sys._getframe(1)  # the with statement's
        session = binding.payload
        if session is None:  # bound by hand (tracer.__exit__(...)), or the enter found no binding
            return self._exit_by_hand(frame, exc_type)
        try:
            self._end(session, frame, raising=exc_type is not None)
        finally:
            HUB.abandon(session)  # ended already, unless a Ctrl-C cut _end short
            binding.done()

    def _exit_unbound(self, exc_type: Any, exc: Any, tb: Any) -> None:
        """End the newest block this context entered (``RngTrace.__exit__(tracer, ...)``, as ExitStack calls it)."""
        return self._exit_by_hand(sys._getframe(1), exc_type)

    __exit__ = ExitSlot(_exit_bound, _exit_unbound)

    def _exit_by_hand(self, frame: Any, exc_type: Any) -> None:
        session = self._leaving()
        try:
            self._end(session, frame, raising=exc_type is not None)
        finally:
            HUB.abandon(session)
            self._unregister(session)

    def _entered_var(self) -> ContextVar[tuple[Any, ...]]:
        """The blocks each context entered by hand: one ContextVar per tracer, made at its first use."""
        state = self.__dict__
        var = state.get("_entered")
        if var is None:
            # setdefault: two threads making it at once both get the one kept.
            var = state.setdefault("_entered", ContextVar("rngtrace.entered"))
        return var

    def _register(self, session: Any) -> None:
        """Note a block entered by hand, for its exit to find (``_leaving``)."""
        self._open.append(session)
        entered = self._entered_var()
        entered.set(entered.get(()) + (session,))

    def _unregister(self, session: Any) -> None:
        """Forget a block entered by hand (also one whose registering was cut short)."""
        if session in self._open:
            self._open.remove(session)
        var = self._entered_var()
        entered = var.get(())
        if session in entered:
            var.set(tuple(s for s in entered if s is not session))

    def _leaving(self) -> Any:
        """The session an exit called by hand ends: the newest block its context entered by hand."""
        open_ = self._open
        for session in reversed(self._entered_var().get(())):
            if session in open_:
                return session  # (an entry not open was ended from another context, below)
        if len(open_) == 1:
            # Entered in another thread or task, as an async fixture's setup and teardown are:
            # with one block open, this exit can only end that one.
            return open_[0]
        if open_:
            raise RuntimeError(
                f"rng_trace cannot tell which of its {len(open_)} open blocks this exit ends; "
                "exit each block in the thread or asyncio task that entered it"
            )
        raise RuntimeError("rng_trace exited with no block open; pair each exit with one enter")

    # -- decorator ----------------------------------------------------------
    def __call__(self, func: F) -> F:
        """Decorate ``func`` so each call is traced; a generator's or coroutine's trace spans its whole run."""
        if not callable(func):
            raise TypeError(f"rng_trace decorates a function, got {type(func).__name__}")
        # Chosen once here, so a call pays for no inspection; wrapt keeps the signature and makes
        # the inspect.is*function checks answer as they do for func.
        wrapper: Callable[[Callable, Any, tuple, dict], Any]
        if inspect.isasyncgenfunction(func):
            wrapper = self._call_async_generator
        elif inspect.iscoroutinefunction(func):
            wrapper = self._call_coroutine
        elif inspect.isgeneratorfunction(func):
            wrapper = self._call_generator
        else:
            wrapper = self._call
        # Here, not at the top: a block (``with``, ``rngtrace run``) needs no wrapt, whose import
        # (asyncio's with it) is a good part of a traced program's start.
        import wrapt

        return cast(F, wrapt.FunctionWrapper(func, wrapper))

    # Each form makes its session, then starts and ends it inside one `try` whose `finally` ends
    # it where a Ctrl-C cut the start or the end short (HUB.abandon: a no-op otherwise).
    def _call(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
        session = self._session()
        try:
            # ``_start``'s usual case (no log_dir) with one call less per call:
            (HUB.start if self.log_dir is None else self._start)(session)
            try:
                result = wrapped(*args, **kwargs)
            except BaseException:
                self._end(session, sys._getframe(), raising=True)
                raise
            self._end(session, sys._getframe(), raising=False)
            return result
        finally:
            HUB.abandon(session)

    # A generator, coroutine or async generator is made at call time (so wrong arguments still fail
    # at the call) and relayed by one of ours, whose body, and so whose trace, starts at the first
    # resume and ends when it returns, raises or is closed. The trace spans that whole time: draws
    # made by other code between two resumes are in it too.

    # Each relay knows itself (``own``, a weak reference filled in once it is made): a Python profile
    # hook that raises at one of its yields (a Ctrl-C landing in the hook) kills it with its finally
    # unrun, and the hub then ends its session at its next start or end (``_Session.gone``).

    def _call_generator(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Generator:
        gen = wrapped(*args, **kwargs)
        own: list = []
        relay = self._relay_generator(gen, own)
        own.append(functools.partial(_finished, weakref.ref(relay), "gi_frame"))
        return _named(relay, gen)

    def _relay_generator(self, gen: Generator[Any, Any, Any], own: list) -> Generator[Any, Any, Any]:
        session = self._session()
        session.gone = own[0]
        try:
            self._start(session)
            try:
                result = yield from gen  # passes send, throw and close through; returns its return value
            except BaseException:
                self._end(session, sys._getframe(), raising=True)
                raise
            self._end(session, sys._getframe(), raising=False)
            return result
        finally:
            HUB.abandon(session)

    def _call_coroutine(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Coroutine:
        coro = wrapped(*args, **kwargs)
        relay: Coroutine | None = None
        own: list = []
        try:
            relay = self._relay_coroutine(coro, own)
            own.append(functools.partial(_finished, weakref.ref(relay), "cr_frame"))
            return _named(relay, coro)
        except BaseException:
            # A Ctrl-C before the caller has the relay: both are closed unstarted, so that neither
            # warns "never awaited" (in Python code, where a second Ctrl-C would be lost).
            coro.close()
            if relay is not None:
                relay.close()
            raise

    async def _relay_coroutine(self, coro: Coroutine, own: list) -> Any:
        session = self._session()
        session.gone = own[0]
        try:
            self._start(session)
            try:
                result = await coro
            except BaseException:
                self._end(session, sys._getframe(), raising=True)
                raise
            self._end(session, sys._getframe(), raising=False)
            return result
        finally:
            HUB.abandon(session)

    def _call_async_generator(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> AsyncGenerator:
        agen = wrapped(*args, **kwargs)
        own: list = []
        relay = self._relay_async_generator(agen, own)
        own.append(functools.partial(_finished, weakref.ref(relay), "ag_frame"))
        return _named(relay, agen)

    async def _relay_async_generator(self, agen: AsyncGenerator, own: list) -> AsyncGenerator:
        session = self._session()
        session.gone = own[0]
        try:
            self._start(session)
            try:
                try:  # an async generator has no "yield from": relay asend, athrow and aclose by hand
                    value = await agen.__anext__()
                    while True:
                        try:
                            sent = yield value
                        except GeneratorExit:
                            await agen.aclose()
                            raise
                        except BaseException as error:
                            value = await agen.athrow(error)
                        else:
                            value = await agen.asend(sent)
                except StopAsyncIteration:
                    pass
            except BaseException:
                self._end(session, sys._getframe(), raising=True)
                raise
            self._end(session, sys._getframe(), raising=False)
        finally:
            HUB.abandon(session)

    # -- shared by both forms -----------------------------------------------
    def _session(self) -> Any:
        """A session of its own for one block or call, not started yet."""
        return HUB.session(Trace(self._sorted_streams, self.depth, self.max_events), self.streams, self.on_draw)  # type: ignore[arg-type]

    def _start(self, session: Any) -> None:
        if self.log_dir is None:  # the usual case: no rank to note, no states to compare
            HUB.start(session)
            return
        self._note_rank()
        HUB.start(session)
        HUB.compare_states(session.trace)  # the ranks' logs are compared: note the states they start from

    def _note_rank(self) -> None:
        if self.log_dir is not None:
            # Asked at the start too: a block that ends after destroy_process_group() keeps its rank's name.
            _logdir.current_rank()

    def _end(self, session: Any, frame: Any, raising: bool) -> None:
        # The hub made it of the class it was given; no typing.cast() call per block.
        trace: Trace = HUB.stop(session, frame)  # type: ignore[assignment]
        self._last[0] = trace
        if PROBLEMS:  # read by the time a trace ends (the streams' declarations were loaded for its start)
            _note_problems(trace)
        if trace.pid != _pids.pid():
            return  # a block entered before a fork: the parent saves and prints the whole of it
        if self.log_dir is not None:
            # Saved before printing, and empty blocks too: block k of every rank is compared with block k.
            _logdir.save_block(trace, os.fspath(self.log_dir))
        if self.print and (len(trace) or trace.untraced):  # an empty log is printed where it may miss draws
            self._print(trace, raising)

    def _print(self, trace: Trace, raising: bool) -> None:
        out = self.file if self.file is not None else sys.stderr
        try:
            color = wants_color(out)
            from .render import render  # here: `import rngtrace` need not load the renderers

            out.write(render(trace, "text", color=color) + "\n")
            out.flush()
        except Exception:
            if not raising:
                raise  # with an exception in flight, the user's error matters more than the log


def _note_problems(trace: Trace) -> None:
    """Say in the trace's notes what a third-party stream's entry point could not give: its log shows them."""
    for problem in problems():
        if problem not in trace.notes:
            trace.notes.append(problem)


def _finished(relay: weakref.ref, frame: str) -> bool:
    """Whether a relay is gone or has run to its end (its ``gi_frame``, ``cr_frame`` or ``ag_frame`` is None)."""
    alive = relay()
    return alive is None or getattr(alive, frame) is None


def _named(relay: Any, original: Any) -> Any:
    """Give ``relay`` the name of the object it relays, for its repr and "never awaited" warnings."""
    relay.__name__ = original.__name__
    relay.__qualname__ = original.__qualname__
    return relay


#: option values given to rng_trace() -> those values checked and normalised: a ``with rng_trace(...)``
#: in a loop checks its options once. Only where they cannot mean something else later (no log_dir,
#: which depends on the working directory, and no file, which this would keep open).
_CHECKED: dict[tuple, dict[str, Any]] = {}
_CHECKED_LIMIT = 64


def _new_tracer(options: dict[str, Any], key: tuple | None) -> RngTrace:
    """A tracer checked afresh, kept in ``_CHECKED`` under ``key`` where it may be."""
    tracer = RngTrace(**options)
    if key is None or options.get("log_dir") is not None or options.get("file") is not None:
        return tracer
    if len(_CHECKED) >= _CHECKED_LIMIT:
        _CHECKED.clear()
    values = {name: getattr(tracer, name) for name in OPTION_NAMES}
    values["_sorted_streams"] = tracer._sorted_streams
    _CHECKED[key] = values
    return tracer


@overload
def rng_trace(func: F, /) -> F: ...
@overload
def rng_trace(func: None = None, /, **options: Any) -> RngTrace: ...


def rng_trace(func: Callable | None = None, /, **options: Any) -> Any:
    """Trace draws and reseeds of the global random streams.

    ``with rng_trace() as trace:`` records the block; ``@rng_trace`` or
    ``@rng_trace(...)`` records each call of a function, and the whole run
    (first resume to finish) of a generator, coroutine or async generator.
    The draw log is printed to ``file`` (stderr) when something was
    recorded; ``tracer = rng_trace(print=False)`` then ``@tracer`` keeps the
    latest call's Trace in ``tracer.last_trace``. ``log_dir=DIR`` saves each
    block's trace in DIR as ``rank-0.json`` (or ``pid-1234.json``, then
    ``rank-0.2.json`` for a process's second block), for ``rngtrace ranks DIR``.
    """
    # Types too: depth=True equals depth=1, and only one of them is valid.
    key: tuple | None = tuple([(name, type(value), value) for name, value in options.items()])
    try:
        values = _CHECKED.get(key)  # type: ignore[arg-type]  # only options checked already (no log_dir, file)
    except TypeError:  # an unhashable value (streams as a list): checked each time
        key = values = None
    if values is not None:  # a hit needs no check
        tracer = RngTrace._checked(values)
    else:
        unknown = [name for name in options if name not in OPTION_NAMES]
        if unknown:
            raise TypeError(f"rng_trace got an unknown option {unknown[0]!r}; choose from {', '.join(OPTION_NAMES)}")
        tracer = _new_tracer(options, key)
    return tracer if func is None else tracer(func)


# The options are written once, in Options; help() and inspect show them on rng_trace too.
rng_trace.__signature__ = signature()  # type: ignore[attr-defined]
