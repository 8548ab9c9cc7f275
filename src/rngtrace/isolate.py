"""``rng_isolate``: code inside cannot shift the caller's global streams."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Any, TypeVar, cast

from ._blocks import Binding, ExitSlot, claim
from ._hub import validate_streams
from .sources import declared, load_source

F = TypeVar("F", bound=Callable[..., Any])


class rng_isolate:
    """Save each global stream's state on entry and restore it on exit.

    Works as ``with rng_isolate():`` and as a decorator, for ``random``,
    NumPy's legacy stream and torch's CPU and initialised CUDA generators:
    ``torch.random.fork_rng`` for all three libraries. A library that is not
    imported has no stream to save. Each block restores what it saved, also
    when a Ctrl-C cuts its exit short, and blocks in other threads or tasks
    keep theirs apart.
    """

    def __init__(self, streams: Iterable[str] | str | None = None) -> None:
        self.streams = validate_streams(streams)
        # The states saved by blocks entered by hand (__enter__() and __exit__() called by the
        # program, as ExitStack does), per context: a with statement keeps its own (_blocks).
        self._saved: ContextVar[tuple[list[tuple[Any, Any]], ...]] = ContextVar("rngtrace.isolated")

    def __enter__(self) -> rng_isolate:
        binding = claim(self)
        sources = [
            load_source(name) for name in sorted(self.streams) if sys.modules.get(declared()[name].module) is not None
        ]
        saved = [(source, source.state()) for source in sources]
        if binding is not None:
            binding.payload = saved
            # The statement left without its exit having restored (a Ctrl-C at its first instruction).
            binding.on_lost(_restore_quietly, saved)
        else:
            self._saved.set(self._saved.get(()) + (saved,))
        return self

    def _exit_bound(self, binding: Binding, *exc: Any) -> None:
        saved = binding.payload
        if saved is None:  # bound by hand (isolate.__exit__(...)): the newest block entered by hand
            return self._exit_unbound(*exc)
        try:
            _restore(saved)
        except Exception:
            binding.done()  # every state was tried: the error is the program's to see
            raise
        # Not in a finally: where a Ctrl-C lands before _restore has run (its first instruction),
        # the statement lets go of its exit with the work undone, and on_lost restores.
        binding.done()

    def _exit_unbound(self, *exc: Any) -> None:
        """Restore what the newest block this context entered by hand saved (``rng_isolate.__exit__(iso, ...)``)."""
        entered = self._saved.get(())
        if not entered:
            raise RuntimeError("rng_isolate exited with no block open; pair each exit with one enter")
        self._saved.set(entered[:-1])
        _restore(entered[-1])

    __exit__ = ExitSlot(_exit_bound, _exit_unbound)

    def __call__(self, func: F) -> F:
        import wrapt  # here: a block needs no wrapt (see tracer.RngTrace.__call__)

        @wrapt.decorator
        def isolated(wrapped: Callable, instance: Any, args: tuple, kwargs: dict) -> Any:
            with self:
                return wrapped(*args, **kwargs)

        return cast(F, isolated(func))


def _restore(saved: list[tuple[Any, Any]]) -> None:
    """Put back every saved state, the others first where one fails; a Ctrl-C is raised once all are back."""
    errors: list[Exception] = []
    interruption: BaseException | None = None
    for source, state in saved:
        for _attempt in (1, 2):  # a restore cut short by a Ctrl-C is done again: it is idempotent
            try:
                source.restore(state)
                break
            except Exception as error:  # restore the others before reporting
                errors.append(error)
                break
            except BaseException as error:  # noqa: BLE001 (finish first, then raise it)
                interruption = interruption or error
    if interruption is not None:
        raise interruption
    if errors:
        raise errors[0]


def _restore_quietly(saved: list[tuple[Any, Any]]) -> None:
    # Runs as the statement lets go of its exit, while the Ctrl-C that cut the exit short is raised:
    # a second one is dropped here (an error is printed, as for any callback).
    try:
        _restore(saved)
    except Exception:
        raise
    except BaseException:  # noqa: BLE001
        pass
