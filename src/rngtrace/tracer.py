"""``rng_trace``: the context manager and decorator users write."""

from __future__ import annotations

import inspect
import os
import sys
from contextvars import ContextVar, Token
from dataclasses import dataclass, fields
from typing import IO, Any, AsyncGenerator, Callable, Coroutine, Generator, Iterable, Optional, TypeVar, overload

import wrapt

from . import _logdir
from ._hub import HUB, install_order, validate_on_draw, validate_streams
from ._paths import current_dir
from .trace import Trace

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True, kw_only=True, eq=False)
class Options:
    """What ``rng_trace`` takes: the one place its options are named, defaulted and checked."""

    streams: Optional[Iterable[str] | str] = None
    depth: int = 16
    on_draw: str = "log"
    print: bool = True
    file: Optional[IO[str]] = None
    max_events: int = 100_000
    #: a folder to save each block's trace in, one log per process and block (see ``_logdir``)
    log_dir: Optional[str | os.PathLike[str]] = None

    def __post_init__(self) -> None:
        # Frozen, so normalised here, once: every trace started from these options can trust them.
        object.__setattr__(self, "streams", validate_streams(self.streams))
        if self.log_dir is not None:
            # Absolute now: the program may chdir before a block ends, and its logs must not move.
            object.__setattr__(self, "log_dir", _folder(self.log_dir))
        validate_on_draw(self.on_draw)
        if not _is_int(self.depth) or self.depth < 1:
            raise ValueError(f"depth must be a positive int, got {self.depth!r}")
        if not _is_int(self.max_events) or self.max_events < 0:
            raise ValueError(f"max_events must be an int >= 0, got {self.max_events!r}")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _folder(value: Any) -> str:
    """``log_dir`` checked and made absolute."""
    if not isinstance(value, (str, bytes, os.PathLike)):
        raise TypeError(f"log_dir must be a folder path (str or os.PathLike), got {type(value).__name__}")
    path = os.fspath(value)
    if not isinstance(path, str):
        raise TypeError("log_dir must be a str path, not bytes; pass os.fsdecode(path)")
    if not path:
        raise ValueError("log_dir is empty; give a folder such as 'rng-logs'")
    if not os.path.isabs(path):
        cwd = current_dir()
        if not cwd:
            raise ValueError(f"the working directory no longer exists; give an absolute log_dir, not {path!r}")
        path = os.path.join(cwd, path)
    path = os.path.normpath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise ValueError(f"log_dir {path!r} is a file; give a folder (it is created if missing)")
    return path


class RngTrace(Options):
    """Traces a block (``with``) or every call of a function (decorator).

    Every block and every call has its own trace, also when one tracer is
    entered again inside itself, from several threads or from several
    asyncio tasks. ``last_trace`` is the Trace of whichever ended last.
    """

    # State of its own, set by _own_state (not dataclass fields: this class is not a dataclass).
    _sorted_streams: tuple[str, ...]
    _last: list[Optional[Trace]]
    _entered: ContextVar[tuple[tuple[Any, Token], ...]]
    _open: list[Any]

    def __post_init__(self) -> None:
        super().__post_init__()
        self._own_state()

    @classmethod
    def _checked(cls, values: dict[str, Any]) -> RngTrace:
        """A tracer from option values an earlier one checked and normalised (``rng_trace``'s cache)."""
        tracer = cls.__new__(cls)
        tracer.__dict__.update(values)  # what the frozen dataclass's __init__ would have set
        tracer._own_state()
        return tracer

    def _own_state(self) -> None:
        # Options freezes its own fields only, so a subclass may still keep state of its own;
        # written to __dict__ directly: the frozen base's __setattr__ is Python code.
        state = self.__dict__
        state["_sorted_streams"] = install_order(self.streams)  # type: ignore[arg-type]
        # A list, not an attribute: this changes every call.
        state["_last"] = [None]
        # Which session a with statement's exit ends: the newest block that this context (thread,
        # asyncio task) entered, so neither another thread's nor another task's block. A
        # ContextVar, not one shared list, is what keeps them apart.
        state["_entered"] = ContextVar("rngtrace.entered")
        # Every open block, from any context: for an exit in another context than its entry.
        state["_open"] = []

    @property
    def last_trace(self) -> Optional[Trace]:
        """The Trace of the block or call that ended most recently, in any thread (None before)."""
        return self._last[0]

    # -- with ---------------------------------------------------------------
    def __enter__(self) -> Trace:
        session = self._start()
        self._open.append(session)
        entered = self._entered.get(())
        # The first set's token puts back what was there before this block (nothing, for the
        # outermost), so a long-lived context keeps no entry once its blocks have ended.
        token = self._entered.set(entered)
        self._entered.set(entered + ((session, token),))
        return session.trace  # type: ignore[no-any-return]

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        self._end(self._leave(), sys._getframe(1), raising=exc_type is not None)

    def _leave(self) -> Any:
        """Forget and return the session of the block being exited."""
        entered = self._entered.get(())
        while entered and entered[-1][0] not in self._open:
            entered = entered[:-1]  # already ended from another context (below)
        if entered:
            session, token = entered[-1]
            try:
                self._entered.reset(token)
            except ValueError:  # entered in the context this one was copied from
                self._entered.set(entered[:-1])
        elif len(self._open) == 1:
            # Entered in another thread or task, as an async fixture's setup and teardown are:
            # with one block open, this exit can only end that one.
            session = self._open[0]
        elif self._open:
            raise RuntimeError(
                f"rng_trace cannot tell which of its {len(self._open)} open blocks this exit ends; "
                "exit each block in the thread or asyncio task that entered it"
            )
        else:
            raise RuntimeError("rng_trace exited with no block open; pair each exit with one enter")
        self._open.remove(session)
        return session

    # -- decorator ----------------------------------------------------------
    def __call__(self, func: F) -> F:
        """Decorate ``func`` so each call is traced; a generator's or coroutine's trace spans its whole run."""
        if not callable(func):
            raise TypeError(f"rng_trace decorates a function, got {type(func).__name__}")
        # Chosen once here, so a call pays for no inspection; wrapt keeps the signature and makes
        # the inspect.is*function checks answer as they do for func.
        if inspect.isasyncgenfunction(func):
            wrapper = self._call_async_generator
        elif inspect.iscoroutinefunction(func):
            wrapper = self._call_coroutine
        elif inspect.isgeneratorfunction(func):
            wrapper = self._call_generator
        else:
            wrapper = self._call
        return wrapt.FunctionWrapper(func, wrapper)  # type: ignore[no-any-return]

    def _call(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
        session = self._start()
        try:
            result = wrapped(*args, **kwargs)
        except BaseException:
            self._end(session, sys._getframe(), raising=True)
            raise
        self._end(session, sys._getframe(), raising=False)
        return result

    # A generator, coroutine or async generator is made at call time (so wrong arguments still fail
    # at the call) and relayed by one of ours, whose body, and so whose trace, starts at the first
    # resume and ends when it returns, raises or is closed. The trace spans that whole time: draws
    # made by other code between two resumes are in it too.

    def _call_generator(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Generator:
        gen = wrapped(*args, **kwargs)
        return _named(self._relay_generator(gen), gen)

    def _relay_generator(self, gen: Generator) -> Generator:
        session = self._start()
        try:
            result = yield from gen  # passes send, throw and close through; returns its return value
        except BaseException:
            self._end(session, sys._getframe(), raising=True)
            raise
        self._end(session, sys._getframe(), raising=False)
        return result

    def _call_coroutine(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Coroutine:
        coro = wrapped(*args, **kwargs)
        return _named(self._relay_coroutine(coro), coro)

    async def _relay_coroutine(self, coro: Coroutine) -> Any:
        session = self._start()
        try:
            result = await coro
        except BaseException:
            self._end(session, sys._getframe(), raising=True)
            raise
        self._end(session, sys._getframe(), raising=False)
        return result

    def _call_async_generator(self, wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> AsyncGenerator:
        agen = wrapped(*args, **kwargs)
        return _named(self._relay_async_generator(agen), agen)

    async def _relay_async_generator(self, agen: AsyncGenerator) -> AsyncGenerator:
        session = self._start()
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

    # -- shared by both forms -----------------------------------------------
    def _new_trace(self) -> Trace:
        return Trace(self._sorted_streams, self.depth, self.max_events)

    def _start(self) -> Any:
        if self.log_dir is None:  # the usual case: no rank to note, no states to compare
            return HUB.start(self._new_trace(), self.streams, self.on_draw)  # type: ignore[arg-type]
        self._note_rank()
        trace = self._new_trace()
        session = HUB.start(trace, self.streams, self.on_draw)  # type: ignore[arg-type]
        HUB.compare_states(trace)  # the ranks' logs are compared: note the states they start from
        return session

    def _note_rank(self) -> None:
        if self.log_dir is not None:
            # Asked at the start too: a block that ends after destroy_process_group() keeps its rank's name.
            _logdir.current_rank()

    def _end(self, session: Any, frame: Any, raising: bool) -> None:
        trace = HUB.stop(session, frame)
        self._last[0] = trace
        if trace.pid != os.getpid():
            return  # a block entered before a fork: the parent saves and prints the whole of it
        if self.log_dir is not None:
            # Saved before printing, and empty blocks too: block k of every rank is compared with block k.
            _logdir.save_block(trace, self.log_dir)  # type: ignore[arg-type]
        if self.print and len(trace):
            self._print(trace, raising)

    def _print(self, trace: Trace, raising: bool) -> None:
        out = self.file if self.file is not None else sys.stderr
        try:
            color = _wants_color(out)
            from .render import render  # here: `import rngtrace` need not load the renderers

            out.write(render(trace, "text", color=color) + "\n")
            out.flush()
        except Exception:
            if not raising:
                raise  # with an exception in flight, the user's error matters more than the log


def _named(relay: Any, original: Any) -> Any:
    """Give ``relay`` the name of the object it relays, for its repr and "never awaited" warnings."""
    relay.__name__ = original.__name__
    relay.__qualname__ = original.__qualname__
    return relay


def _wants_color(out: Any) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


_OPTION_NAMES = tuple(field.name for field in fields(Options))
#: option values given to rng_trace() -> those values checked and normalised: a ``with rng_trace(...)``
#: in a loop checks its options once. Only where they cannot mean something else later (no log_dir,
#: which depends on the working directory, and no file, which this would keep open).
_CHECKED: dict[tuple, dict[str, Any]] = {}
_CHECKED_LIMIT = 64


def _new_tracer(options: dict[str, Any]) -> RngTrace:
    if options.get("log_dir") is not None or options.get("file") is not None:
        return RngTrace(**options)
    try:
        # Types too: depth=True equals depth=1, and only one of them is valid.
        key = tuple(sorted((name, type(value), value) for name, value in options.items()))
        values = _CHECKED.get(key)
    except TypeError:  # an unhashable value (streams as a list): checked each time
        return RngTrace(**options)
    if values is not None:
        return RngTrace._checked(values)
    tracer = RngTrace(**options)
    if len(_CHECKED) >= _CHECKED_LIMIT:
        _CHECKED.clear()
    _CHECKED[key] = {name: getattr(tracer, name) for name in _OPTION_NAMES}
    return tracer


@overload
def rng_trace(func: F, /) -> F: ...
@overload
def rng_trace(func: None = None, /, **options: Any) -> RngTrace: ...


def rng_trace(func: Optional[Callable] = None, /, **options: Any) -> Any:
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
    unknown = [name for name in options if name not in _OPTION_NAMES]
    if unknown:
        raise TypeError(f"rng_trace got an unknown option {unknown[0]!r}; choose from {', '.join(_OPTION_NAMES)}")
    tracer = _new_tracer(options)
    return tracer if func is None else tracer(func)


# The options are written once, in Options; help() and inspect show them on rng_trace too.
rng_trace.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
    [
        inspect.Parameter("func", inspect.Parameter.POSITIONAL_ONLY, default=None, annotation="Optional[Callable]"),
        *inspect.signature(Options).parameters.values(),
    ],
    return_annotation="Any",
)
