"""The streams rngtrace traces: one module here per stream, and any a package adds.

Each stream module declares a ``STREAM`` (``_streams.Stream``): its name, the
module whose import makes it exist, where its recording ``Source`` lives, and
the facts the log's findings and advice read. The declarations are cheap to
import; the source itself (which imports numpy or torch) loads only when its
stream is traced, so ``import rngtrace`` imports neither.

Other packages add a stream through the ``rngtrace.sources`` entry-point group:
an entry point names a ``Stream`` object (``toy = "toylib.rngtrace_stream:STREAM"``).
"""

from __future__ import annotations

import importlib
import sys
import threading

from .._streams import ENTRY_POINT_GROUP, Stream
from ._base import Source, draw_wrapper, restore_wrapper, seed_wrapper

# This package's own streams, in the order a log lists them.
_BUILTIN = ("random", "numpy", "torch")
_lock = threading.Lock()
_declared: dict[str, Stream] | None = None
#: what a third-party entry point could not give, said once where the streams are listed
PROBLEMS: list[str] = []


def _load() -> dict[str, Stream]:
    declared: dict[str, Stream] = {}
    for name in _BUILTIN:
        stream = importlib.import_module(f"{__name__}.{name}_stream").STREAM
        declared[stream.name] = stream
    for stream in sorted(_entry_point_streams(), key=lambda s: s.name):
        if stream.name in declared:
            PROBLEMS.append(f"a second stream named {stream.name!r} ({stream.source}) was ignored")
            continue
        declared[stream.name] = stream
    return declared


def _entry_point_streams() -> list[Stream]:
    from importlib.metadata import entry_points

    found = []
    for point in entry_points(group=ENTRY_POINT_GROUP):
        try:
            stream = point.load()
        except Exception as error:  # noqa: BLE001 (a broken plugin must not break the traced program)
            PROBLEMS.append(f"entry point {point.name!r} ({point.value}) failed to load: {error!r}")
            continue
        if not isinstance(stream, Stream):
            PROBLEMS.append(f"entry point {point.name!r} ({point.value}) is not an rngtrace Stream")
            continue
        found.append(stream)
    return found


def declared() -> dict[str, Stream]:
    """Every stream's declaration, by name, in the order a log lists them (read once)."""
    global _declared
    if _declared is None:
        with _lock:
            if _declared is None:
                _declared = _load()
    return _declared


def stream(name: str) -> Stream | None:
    """The declaration of stream ``name``, or of the stream a sub-stream (``torch.cuda:0``) belongs to."""
    return declared().get(name.split(".", 1)[0]) or declared().get(name)


def rank(name: str) -> int:
    """Where stream ``name`` comes in a log's listing (unknown streams last)."""
    names = list(declared())
    base = name.split(".", 1)[0]
    return names.index(base) if base in names else len(names)


def source_class(name: str) -> type[Source]:
    """The recording Source class of stream ``name`` (importing its library)."""
    module_name, _, attribute = declared()[name].source.partition(":")
    # sys.modules first: 3.10's import_module takes the module's import lock every time, and a
    # Ctrl-C landing in that lock's Python weakref callback is printed and lost.
    module = sys.modules.get(module_name) or importlib.import_module(module_name)
    cls: type[Source] = getattr(module, attribute)
    return cls


def load_source(name: str) -> Source:
    """Create the source for stream ``name``; its library must be imported."""
    return source_class(name)()


__all__ = [
    "PROBLEMS",
    "Source",
    "Stream",
    "declared",
    "draw_wrapper",
    "load_source",
    "rank",
    "restore_wrapper",
    "seed_wrapper",
    "source_class",
    "stream",
]
