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

# This package's own streams, in the order a log lists them, each with the module whose import makes it exist
# (its declaration's ``module``, said here too: a trace installs or watches a stream from this alone, and a
# declaration is imported when its stream is, so a traced child's start imports none of NumPy's or torch's).
_BUILTIN = {"random": "random", "numpy": "numpy.random", "torch": "torch"}
_lock = threading.Lock()
_declared: dict[str, Stream] | None = None
#: what a third-party entry point could not give, one line each naming the entry point, its package and
#: what to do; read once with the streams. The logs say them: a trace's notes, the pytest report.
PROBLEMS: list[str] = []
#: (name, value, package) of each ``rngtrace.sources`` entry point: those found here, or those a parent handed
#: to this child (``hand_in``), so that a child's start does not scan every installed package again
_points: tuple[tuple[str, str, str | None], ...] | None = None


def _load() -> dict[str, Stream]:
    declared: dict[str, Stream] = {}
    owners: dict[str, str] = {}
    for name in _BUILTIN:
        stream = _own(name)
        declared[stream.name] = stream
        owners[stream.name] = "rngtrace's own"
    for stream, point in sorted(_entry_point_streams(), key=lambda found: found[0].name):
        if stream.name in declared:
            PROBLEMS.append(
                f"{point} declares a stream named {stream.name!r}, as {owners[stream.name]} does; it was "
                "skipped: rename its stream or uninstall it"
            )
            continue
        declared[stream.name] = stream
        owners[stream.name] = point
    return declared


def _own(name: str) -> Stream:
    """The declaration of ``name``, one of this package's own streams (its module alone is imported)."""
    module = f"{__name__}.{name}_stream"
    found: Stream = (sys.modules.get(module) or importlib.import_module(module)).STREAM
    return found


def _declaration(name: str) -> Stream | None:
    """Stream ``name``'s declaration, or None: one of this package's own without reading the others'."""
    # Never another's: an entry point that reuses one of these names is skipped (``_load``).
    return _own(name) if name in _BUILTIN else declared().get(name)


def module_of(name: str) -> str:
    """The module whose import makes stream ``name`` exist, without importing any declaration of this package's."""
    module = _BUILTIN.get(name)
    return module if module is not None else declared()[name].module


def _entry_point_streams() -> list[tuple[Stream, str]]:
    """(stream, ``entry point 'toy' of package toystream``) for each entry point that gives a Stream."""
    found = []
    for name, value, package in entry_points_found():
        said = f"entry point {name!r} of " + (f"package {package}" if package else "an unnamed package")
        try:
            stream = _load_point(value)
        except Exception as error:  # noqa: BLE001 (a broken plugin must not break the traced program)
            why = str(error).strip().splitlines()
            PROBLEMS.append(
                f"{said} failed to load: {type(error).__name__}{': ' + why[0] if why else ''}; fix or uninstall it"
            )
            continue
        if not isinstance(stream, Stream):
            PROBLEMS.append(
                f"{said} ({value}) gives a {type(stream).__name__}, not an rngtrace Stream; fix or uninstall it"
            )
            continue
        found.append((stream, said))
    return found


def entry_points_found() -> tuple[tuple[str, str, str | None], ...]:
    """(name, value, package) of each installed ``rngtrace.sources`` entry point (scanned once)."""
    global _points
    if _points is None:
        from importlib.metadata import entry_points

        _points = tuple(
            (point.name, point.value, getattr(getattr(point, "dist", None), "name", None))
            for point in entry_points(group=ENTRY_POINT_GROUP)
        )
    return _points


def hand_in(points: tuple[tuple[str, str, str | None], ...]) -> None:
    """Take the entry points a parent found (``entry_points_found()``) as this process's own."""
    global _points
    _points = tuple((str(name), str(value), package) for name, value, package in points)


def _load_point(value: str) -> object:
    """What an entry point's value (``module:attribute.path``) names, as ``EntryPoint.load`` does."""
    module_name, _, attributes = value.partition(":")
    found: object = importlib.import_module(module_name.strip())
    for attribute in filter(None, attributes.strip().split(".")):
        found = getattr(found, attribute)
    return found


def declared() -> dict[str, Stream]:
    """Every stream's declaration, by name, in the order a log lists them (read once)."""
    global _declared
    if _declared is None:
        with _lock:
            if _declared is None:
                _declared = _load()
    return _declared


def problems() -> list[str]:
    """What the ``rngtrace.sources`` entry points could not give, one line each (read with the streams)."""
    declared()
    return list(PROBLEMS)


def stream(name: str) -> Stream | None:
    """The declaration of stream ``name``, or of the stream a sub-stream (``torch.cuda:0``) belongs to."""
    return _declaration(name.split(".", 1)[0]) or _declaration(name)


def rank(name: str) -> int:
    """Where stream ``name`` comes in a log's listing (unknown streams last)."""
    names = list(declared())
    base = name.split(".", 1)[0]
    return names.index(base) if base in names else len(names)


def source_class(name: str) -> type[Source]:
    """The recording Source class of stream ``name`` (importing its library)."""
    found = _declaration(name)
    if found is None:
        raise KeyError(name)
    module_name, _, attribute = found.source.partition(":")
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
    "entry_points_found",
    "hand_in",
    "load_source",
    "module_of",
    "problems",
    "rank",
    "restore_wrapper",
    "seed_wrapper",
    "source_class",
    "stream",
]
