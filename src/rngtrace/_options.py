"""What ``rng_trace`` takes: its options, named, defaulted and checked in one place."""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import IO, Any

from ._hub import validate_on_draw, validate_streams
from ._paths import current_dir


@dataclass(frozen=True, kw_only=True, eq=False)
class Options:
    """What ``rng_trace`` takes: the one place its options are named, defaulted and checked."""

    streams: Iterable[str] | str | None = None
    depth: int = 16
    on_draw: str = "log"
    print: bool = True
    file: IO[str] | None = None
    max_events: int = 100_000
    #: a folder to save each block's trace in, one log per process and block (see ``_logdir``)
    log_dir: str | os.PathLike[str] | None = None

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


#: the options' names, in order: what ``rng_trace(**options)`` takes
OPTION_NAMES = tuple(field.name for field in fields(Options))


def signature() -> inspect.Signature:
    """``rng_trace``'s signature, as help() and inspect show it: ``func``, then every option."""
    return inspect.Signature(
        [
            inspect.Parameter("func", inspect.Parameter.POSITIONAL_ONLY, default=None, annotation="Optional[Callable]"),
            *inspect.signature(Options).parameters.values(),
        ],
        return_annotation="Any",
    )
