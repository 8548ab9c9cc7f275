"""``rng_isolate``: code inside cannot shift the caller's global streams."""

from __future__ import annotations

import sys
from typing import Any, Callable, Iterable, Optional, TypeVar

import wrapt

from ._hub import validate_streams
from .sources import SOURCES, load_source

F = TypeVar("F", bound=Callable[..., Any])


class rng_isolate:
    """Save each global stream's state on entry and restore it on exit.

    Works as ``with rng_isolate():`` and as a decorator, for ``random``,
    NumPy's legacy stream and torch's CPU and initialised CUDA generators:
    ``torch.random.fork_rng`` for all three libraries. A library that is not
    imported has no stream to save.
    """

    def __init__(self, streams: Optional[Iterable[str] | str] = None) -> None:
        self.streams = validate_streams(streams)
        self._saved: list[list[tuple[Any, dict[str, Any]]]] = []

    def __enter__(self) -> rng_isolate:
        saved = []
        for name in sorted(self.streams):
            if sys.modules.get(SOURCES[name]) is not None:
                source = load_source(name)
                saved.append((source, source.state()))
        self._saved.append(saved)
        return self

    def __exit__(self, *exc: Any) -> None:
        saved = self._saved.pop()
        errors = []
        for source, state in saved:
            try:
                source.restore(state)
            except Exception as error:  # restore the others before reporting
                errors.append(error)
        if errors:
            raise errors[0]

    def __call__(self, func: F) -> F:
        @wrapt.decorator
        def isolated(wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
            with self:
                return wrapped(*args, **kwargs)

        return isolated(func)  # type: ignore[no-any-return]
