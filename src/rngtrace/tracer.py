"""``rng_trace``: the context manager and decorator users write."""

from __future__ import annotations

import os
import sys
from typing import IO, Any, Callable, Iterable, Optional, TypeVar, overload

import wrapt

from ._hub import HUB, validate_on_draw, validate_streams
from .trace import Trace

F = TypeVar("F", bound=Callable[..., Any])


class RngTrace:
    """Traces a block (``with``) or every call of a function (decorator)."""

    def __init__(
        self,
        *,
        streams: Optional[Iterable[str] | str] = None,
        depth: int = 16,
        on_draw: str = "log",
        print: bool = True,
        file: Optional[IO[str]] = None,
        max_events: int = 100_000,
    ) -> None:
        self.streams = validate_streams(streams)
        self.on_draw = validate_on_draw(on_draw)
        if not isinstance(depth, int) or isinstance(depth, bool) or depth < 1:
            raise ValueError(f"depth must be a positive int, got {depth!r}")
        if not isinstance(max_events, int) or isinstance(max_events, bool) or max_events < 0:
            raise ValueError(f"max_events must be an int >= 0, got {max_events!r}")
        self.depth = depth
        self.max_events = max_events
        self.print = print
        self.file = file
        self._sessions: list[Any] = []

    def __enter__(self) -> Trace:
        trace = Trace(sorted(self.streams), self.depth, self.max_events)
        self._sessions.append(HUB.start(trace, self.streams, self.on_draw))
        return trace

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        session = self._sessions.pop()
        trace = HUB.stop(session, sys._getframe(1))
        if self.print and len(trace) and trace.pid == os.getpid():
            self._print(trace, raising=exc_type is not None)

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

    def __call__(self, func: F) -> F:
        """Decorate ``func`` so each call is traced."""
        if not callable(func):
            raise TypeError(f"rng_trace decorates a function, got {type(func).__name__}")

        @wrapt.decorator
        def traced(wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
            with self:
                return wrapped(*args, **kwargs)

        return traced(func)  # type: ignore[no-any-return]


def _wants_color(out: Any) -> bool:
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


@overload
def rng_trace(func: F, /) -> F: ...
@overload
def rng_trace(
    func: None = None,
    /,
    *,
    streams: Optional[Iterable[str] | str] = None,
    depth: int = 16,
    on_draw: str = "log",
    print: bool = True,
    file: Optional[IO[str]] = None,
    max_events: int = 100_000,
) -> RngTrace: ...


def rng_trace(
    func: Optional[Callable] = None,
    /,
    *,
    streams: Optional[Iterable[str] | str] = None,
    depth: int = 16,
    on_draw: str = "log",
    print: bool = True,
    file: Optional[IO[str]] = None,
    max_events: int = 100_000,
) -> Any:
    """Trace draws and reseeds of the global random streams.

    ``with rng_trace() as trace:`` records the block; ``@rng_trace`` or
    ``@rng_trace(...)`` records each call of a function. The draw log is
    printed to ``file`` (stderr) when something was recorded.
    """
    tracer = RngTrace(
        streams=streams, depth=depth, on_draw=on_draw, print=print, file=file, max_events=max_events
    )
    if func is not None:
        return tracer(func)
    return tracer
