"""What every stream source provides: the ``Source`` protocol and the comparisons of its states.

A source describes a stream: which attributes to patch, how to read and
restore the stream's state, and how to recognise one of its callables seen by
the catch-all hook. It never patches anything itself: the hub applies the
patches it lists and undoes them.
"""

from __future__ import annotations

import os
import sys
from abc import ABC, abstractmethod
from collections.abc import Iterable
from types import FrameType
from typing import Any, ClassVar

from .._streams import Stream

# classify() returns this for a call made inside the stream's own library,
# whose public call site was (or will be) seen on its own: skip it for good.
INTERNAL = "internal"

Patch = tuple  # (parent object, attribute name, replacement callable), or (builtin or bound method, IN_PLACE, wrapper)
#: A patch's attribute name for a builtin that records in place: the builtin object itself calls
#: the wrapper (``_speedups.hook_builtins``), so code that holds it or checks its identity
#: (torch.compile's guards) sees the same object traced or not.
IN_PLACE = "<in place>"
Hit = tuple  # (stream, kind, api, start frame, detail)


class Source(ABC):
    """A global random stream: what to hook, how to read and restore its state."""

    #: the stream's declaration (``_streams.Stream``): everything the rest of rngtrace reads about it
    stream: ClassVar[Stream]
    name: ClassVar[str]  # the stream name users pass in ``streams=`` (the declaration's)
    module: ClassVar[str]  # the module whose import makes the stream exist (the declaration's)
    #: whether a c_call profile hook can see this stream's callables (C builtins, not Cython)
    profile_visible: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        declared = cls.__dict__.get("stream")
        if declared is not None:
            cls.name, cls.module = declared.name, declared.module

    def prepare(self) -> None:  # noqa: B027 (optional: most sources have nothing to prepare)
        """Get the library ready before each install (fill caches that must not see a patch)."""

    def patches(self, hub: Any) -> Iterable[Patch]:
        """The attributes to replace while tracing, with their replacements.

        Called once per process: the hub keeps the wrappers for later installs.
        """
        return ()

    def owners(self) -> Iterable[object]:
        """Objects whose bound methods draw from this stream (the singletons)."""
        return ()

    def owners_version(self) -> int:
        """Changes whenever ``owners()`` would return other objects (cheap: read at every trace)."""
        return 0

    def functions(self) -> Iterable[object]:
        """Unbound callables that draw from or seed this stream (the originals)."""
        return ()

    def keep_types(self) -> tuple[type, ...]:
        """Types whose methods may draw from this stream through another instance later."""
        return ()

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Hit | str | None:
        """Describe a call the catch-all hook saw, INTERNAL, or None to ignore it."""
        return None

    @abstractmethod
    def state(self) -> dict[str, Any]:
        """The state of each sub-stream, keyed by stream name."""

    @abstractmethod
    def restore(self, states: dict[str, Any]) -> None:
        """Put back states returned by ``state()``."""

    def state_bytes(self, state: Any) -> bytes | None:
        """One sub-stream's ``state()`` as bytes, for its digest; None: digest its canonical form.

        Equal bytes must mean the same numbers to come: a fork's children that hold
        equal digests draw the same numbers (the ``duplicate`` finding).
        """
        return None

    def digest_input(self) -> tuple[Any, dict[str, bytes]] | None:
        """What a digest of ``state()`` hashes, read faster (in place), with what it was read through.

        (layout, sub-stream -> bytes): the bytes must be those ``_digests`` feeds its hash
        for ``state()``; it checks so once per layout (an object the source keeps while the
        layout holds) before it trusts them. None: no faster read, ``state()`` is digested.
        """
        return None

    def fingerprint(self) -> Any | None:
        """A ctypes view of the stream's state whose ``.value`` changes with every draw, or None.

        The hub reads it before and after each recorded call to notice draws
        nobody recorded, between events rather than only at the end. Reading it
        must cost next to nothing: it is on the hot path.
        """
        return None

    def snapshot(self) -> dict[str, Any]:
        """What the end-of-block check compares, per sub-stream: the fingerprint where it sees a whole state.

        Read at every block's start and end, so it must be cheap; ``state()`` is the
        full read, for streams whose fingerprint misses part of their state.
        """
        return self.state()

    def full(self) -> dict[str, Any]:
        """The whole state of each sub-stream, for comparing two moments (``same``), not for restoring.

        A reseed can leave the fingerprint as it found it (``random.seed(x)`` for any x resets
        the twister's index and first word alike): where a reseed must be seen, this is compared.
        ``state()`` unless a source reads it faster (in place).
        """
        return self.state()

    def same(self, a: Any, b: Any) -> bool:
        """Whether two states (or two snapshots) of one sub-stream are equal."""
        return bool(a == b)

    def forget(self) -> None:  # noqa: B027 (optional: most sources keep nothing)
        """Drop any reference kept while tracing (called when hooks come off)."""

    def starts_fixed(self) -> bool | None:
        """Whether the stream stands where the library's fixed default seed puts it (None: cannot say).

        Asked once, where a trace sees the program start: a stream that starts from a fixed
        seed draws alike in every run before any seed, one that starts from OS entropy does not.
        """
        return None

    @classmethod
    def settings(cls) -> dict[str, bool]:
        """The library's flags that decide whether its results repeat, read once when a trace ends.

        Read only where the trace has an event of this stream; the findings read them
        (``settings``). Empty for a library with none.
        """
        return {}


def same_state(source: Source, old: Any, new: Any) -> bool:
    """Whether two snapshots of one sub-stream are equal."""
    if old.__class__ is bytes and new.__class__ is bytes:  # two in-place reads: no need to ask the source
        return old == new
    return source.same(old, new)


def unmoved(source: Source, before: dict, now: dict) -> bool:
    """Whether every sub-stream of ``source`` is as ``before`` (its ``snapshot()``) saw it ``now``."""
    if len(now) != len(before):
        return False
    # A loop, not all() over a generator: a Ctrl-C landing in a generator being closed is
    # printed and dropped ("Exception ignored in"), and the block's exit would go on without it.
    for stream, state in now.items():
        old = before.get(stream, _ABSENT)  # the same keys: as many, and each of these there
        if old is _ABSENT:
            return False
        if old.__class__ is bytes and state.__class__ is bytes:  # same_state, inline: every block's end asks
            if old != state:
                return False
        elif not source.same(old, state):
            return False
    return True


_ABSENT = object()


def library_of(stream: str) -> tuple[str, ...]:
    """Where the code of ``stream``'s library lives: its calls inside a recorded call are part of it."""
    base = stream.split(".", 1)[0]
    declared = next(
        (
            cls.stream.module
            for cls in source_classes()
            if cls.__dict__.get("stream") is not None and cls.stream.name == base
        ),
        base,
    )
    module = sys.modules.get(declared.split(".", 1)[0])  # the library's top package (numpy, not numpy.random)
    file = getattr(module, "__file__", None)
    if not file:
        return ()
    if not os.path.basename(file).startswith("__init__."):
        return (file,)  # a module of one file (the stdlib's random), not its directory
    return (os.path.dirname(file) + os.sep,)


def source_classes() -> list[type[Source]]:
    """Every Source subclass defined so far (a package's too), nearest first."""
    found, todo = [], list(Source.__subclasses__())
    while todo:
        cls = todo.pop(0)
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found
