"""Python's ``random`` module: the hidden ``random._inst`` behind its functions."""

from __future__ import annotations

import _random as _c_random
import ctypes
import random as _random
import struct
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Any

from .._kinds import DRAW, SEED
from ._base import (
    IN_PLACE,
    INTERNAL,
    Hit,
    Patch,
    Source,
    Through,
    draw_wrapper,
    getter_wrapper,
    inplace_count,
    method_in_place,
    recorder,
    restore_wrapper,
    seed_wrapper,
    twin_of,
)
from ._entropy import entropy_wrapper
from ._inplace import in_place, inside, read_with_state
from .random_stream import STREAM

_SEEDS = frozenset({"seed", "setstate"})
_NOT_DRAWS = frozenset({"getstate"})
_MANY = frozenset({"choices", "sample", "shuffle", "randbytes"})
_FILE = _random.__file__
#: the C base's state methods, taken before any patch goes on (a wrapper while tracing)
_C_GETSTATE = _c_random.Random.getstate
_C_SETSTATE = _c_random.Random.setstate
#: the bytes of the whole twister read in place: index, then 624 words (``_whole_view``)
_WHOLE = 4 + 624 * 4
#: ``random.Random.__init__``'s code: a seed it makes is the constructor's
_INIT = _random.Random.__init__.__code__


def _stream_instance() -> Any:
    """The instance random's functions are bound to: ``random._inst`` until someone rebinds that name.

    ``random.random`` and the rest were bound at import; assigning ``random._inst``
    later changes none of them, so the stream they draw from is the instance most
    of them are still bound to, not whatever the name holds now.
    """
    counts: dict[int, list] = {}
    for name in _random.__all__:
        owner = getattr(getattr(_random, name, None), "__self__", None)
        if isinstance(owner, _random.Random):
            counts.setdefault(id(owner), [owner, 0])[1] += 1
    if not counts or id(_random._inst) in counts:
        return _random._inst
    return max(counts.values(), key=lambda entry: entry[1])[0]


def _public_names(inst: Any) -> list[str]:
    return [
        name
        for name in _random.__all__
        if getattr(getattr(_random, name, None), "__self__", None) is inst and name not in _NOT_DRAWS
    ]


def _count(result: Any, args: tuple, kwargs: dict) -> int | None:
    if isinstance(result, (list, bytes)):
        return len(result)  # choices, sample, randbytes
    if result is None:  # shuffle works in place
        return inplace_count(args, kwargs)
    return 1


def _method_count(result: Any, args: tuple, kwargs: dict) -> int | None:
    return _count(result, args[1:], kwargs)  # args[0] is the instance itself


def _python_method(callee: Any) -> bool:
    """Whether ``callee`` is one of random.py's Python methods (``randint``), bound."""
    code = getattr(getattr(callee, "__func__", None), "__code__", None)
    return code is not None and code.co_filename == _FILE


def _method_names() -> list[str]:
    """``random.Random``'s public drawing and seeding methods, its C base's included."""
    return [
        name
        for name in dir(_random.Random)
        if not name.startswith("_") and name not in _NOT_DRAWS and callable(getattr(_random.Random, name))
    ]


class RandomSource(Source):
    """The stream behind ``random.random()``, ``random.shuffle()`` and friends."""

    stream = STREAM

    def __init__(self) -> None:
        # Taken before any patch goes on: the functions are still the originals, bound to it.
        self._inst = _stream_instance()
        self._last_outer: FrameType | None = None
        self._view: Any | None = None
        self._view_of: tuple | None = None
        self._through = Through((_FILE,), "random.", _SEEDS)
        self._methods_patched = False
        self._full_view: Any | None = None  # the whole twister's, for full(); made for _full_of
        self._full_of: tuple | None = None

    def patches(self, hub: Any) -> Iterable[Patch]:
        # First the instance's methods, on its class, recording only the instance's own calls:
        # library code holds random._inst itself (networkx's create_py_random_state(None)), and
        # a call through it is then recorded from the first one, on every Python. A program's
        # own random.Random(seed) goes straight to the method. The module's functions below
        # are bound to the original methods, so one call is still one event.
        inst = self._inst
        on_class: dict[str, Any] = {}  # name -> the wrapper on the class
        if type(inst) is _random.Random:
            self._methods_patched = True
            for name in _method_names():
                original = getattr(_random.Random, name)
                api = f"random.{name}"
                kind = SEED if name in _SEEDS else DRAW
                counted = _method_count if name in _MANY else None
                if name == "setstate":
                    wrapper = restore_wrapper(hub, "random", api, original, self._current, inst, state_digest)
                else:
                    if name == "seed":  # another instance's seed from OS entropy: its own event, behind the recorder
                        original = entropy_wrapper(hub, "random", original, self._entropy_call)
                    wrapper = recorder(
                        hub, "random", kind, api, original, count_of=counted, owner=inst, through=self._through
                    )
                yield _random.Random, name, wrapper
                on_class[name] = wrapper
        for name in _public_names(self._inst):
            original = getattr(_random, name)
            api = f"random.{name}"
            if name in on_class and method_in_place(original):
                # random.randint is the hidden instance's randint, bound at import. With the
                # accelerator that bound method records in place: its function is the class's
                # wrapper while tracing, so every reference to it (``from random import randint``
                # at import) records, and no module entry is written.
                yield original, IN_PLACE, on_class[name]
                continue
            if name == "setstate":
                yield _random, name, restore_wrapper(hub, "random", api, original, self._current, digest=state_digest)
            elif name in _SEEDS:
                yield _random, name, seed_wrapper(hub, "random", api, original)
            else:
                # Most return one number; only these return several, or shuffle in place.
                counted = _count if name in _MANY else None
                twin = twin_of(original)
                if twin is not None:
                    # random.random and getrandbits are the instance's builtin methods: recorded in
                    # place, every reference to them (``from random import random`` at import, one
                    # held in an object) is the same object, recording, and torch.compile's Dynamo
                    # sees the builtin it knows, traced or not.
                    yield original, IN_PLACE, draw_wrapper(hub, "random", api, twin, counted)
                else:
                    yield _random, name, draw_wrapper(hub, "random", api, original, counted)

        yield from self._getters(hub)

    def _getters(self, hub: Any) -> Iterable[Patch]:
        """The C base's ``getstate`` and ``setstate``: the states handed out, so that putting one back is a restore.

        random.py's own methods call these, so a ``getstate``/``setstate`` bound before the trace
        (Lightning's ``from random import getstate``) reaches them too.
        """
        inst = self._inst
        if type(inst) is not _random.Random:
            return
        mine = lambda args: "random" if args and args[0] is inst else None  # noqa: E731
        # The twister's words with gauss()'s cached value, which random.py's setstate sets before calling these.
        words = lambda state: hash((tuple(state), getattr(inst, "gauss_next", None)))  # noqa: E731
        yield _c_random.Random, "getstate", getter_wrapper(hub, _C_GETSTATE, mine, words)
        holds = lambda state: type(state) is tuple and state == _C_GETSTATE(inst)  # noqa: E731
        restore = restore_wrapper(hub, "random", "random.setstate", _C_SETSTATE, holds, inst, words)
        yield _c_random.Random, "setstate", restore

    def _entropy_call(self, args: tuple, kwargs: dict, frame: FrameType) -> tuple[str, FrameType] | None:
        """``random.Random()`` (named at its caller) or ``rng.seed()`` on an instance of the user's; else None."""
        if not args or args[0] is self._inst or (args[1] if len(args) > 1 else kwargs.get("a")) is not None:
            return None
        if frame.f_code is _INIT and frame.f_back is not None:
            return "random.Random", frame.f_back
        return "random.Random.seed", frame

    def _current(self, state: Any) -> bool:
        """Whether ``state`` is the hidden instance's state now (a restore of it moves nothing)."""
        # The C base's words, not random.Random.getstate: that is the getter's wrapper while tracing.
        inst = self._inst
        return (
            type(state) is tuple
            and len(state) == 3
            and state[0] == inst.VERSION
            and state[2] == inst.gauss_next
            and state[1] == _C_GETSTATE(inst)
        )

    def owners(self) -> Iterable[object]:
        return (self._inst,)

    def keep_types(self) -> tuple[type, ...]:
        return ()

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Hit | str | None:
        name = getattr(callee, "__name__", "")
        if name in _NOT_DRAWS:
            return INTERNAL
        if self._methods_patched and (name not in _SEEDS or name == "setstate") and _python_method(callee):
            # random.py's own method (a reference bound before tracing): the instance's methods it
            # calls on the class are wrappers, and they record it as this call (see Through); its
            # setstate calls the C base's, whose wrapper records it (a restore, or a seed).
            return INTERNAL
        outer = None
        f: FrameType | None = frame
        while f is not None and f.f_code.co_filename == _FILE:
            outer, f = f, f.f_back
        if outer is not None:
            if not profile:
                # sys.monitoring saw the public call itself, where the user made it.
                return INTERNAL
            # The profile hook sees only the C primitive under random.py's Python
            # methods; one randint() may call getrandbits() several times.
            if outer is self._last_outer:
                return None
            self._last_outer = outer
            name = outer.f_code.co_name
            frame = f  # type: ignore[assignment]
        kind = SEED if name in _SEEDS else DRAW
        return ("random", kind, f"random.{name}", frame, None)

    def state(self) -> dict[str, Any]:
        return {"random": self._inst.getstate()}

    def restore(self, states: dict[str, Any]) -> None:
        if "random" in states:
            self._inst.setstate(states["random"])

    def full(self) -> dict[str, Any]:
        # The twister's 624 words and index read in place (2.5 KB, about a µs, against ~10 µs for
        # getstate()'s 625-int tuple), with gauss()'s cached value; getstate() where not proved.
        inst = self._inst
        if self._full_of is None or self._full_of[0] is not inst or self._full_of[1] is not type(inst):
            self._full_view, self._full_of = _whole_view(inst), (inst, type(inst))
        view = self._full_view
        if view is None:
            return self.state()
        return {"random": (view.value, getattr(inst, "gauss_next", None))}

    def digest_input(self) -> tuple[Any, dict[str, bytes]] | None:
        # getstate()'s (VERSION, 624 words and index, gauss_next) as _digests feeds it, from the
        # twister read in place: no 625-int tuple, whose allocation in a DataLoader worker just
        # forked faults in pages at its fork digest and at its seed's.
        self.full()
        view, inst = self._full_view, self._inst
        version = getattr(inst, "VERSION", None)
        if view is None or type(version) is not int or sys.byteorder != "little":
            return None
        raw = view.value  # index (int32), then the 624 words
        if len(raw) != _WHOLE:
            return None
        words = bytearray(625 * 8)  # array("Q", words + (index,)): each word widened to 8 bytes
        for k in range(4):
            words[k : 624 * 8 : 8] = raw[4 + k :: 4]
        words[624 * 8 : 624 * 8 + 4] = raw[:4]  # the index, never negative
        gauss = repr(getattr(inst, "gauss_next", None)).encode()
        return view, {"random": b"(" + repr(version).encode() + b"[" + bytes(words) + gauss + b")"}

    def fingerprint(self) -> Any | None:
        # Proved once against getstate() (tens of µs), then valid while the instance keeps its
        # class: a Python subclass's __class__ can be reassigned, so the type is part of the key.
        inst = self._inst
        if self._view_of is None or self._view_of[1] is not type(inst):
            self._view, self._view_of = _mt_view(inst), (inst, type(inst))
        return self._view

    def snapshot(self) -> dict[str, Any]:
        view = self._view if self._view_of is not None else self.fingerprint()
        if view is None:
            return self.state()
        # The twister's words in place, and gauss()'s cached value, which they do not show: the
        # words alone while it holds none (the usual case), which compare as bytes, with no call.
        gauss = getattr(self._inst, "gauss_next", None)
        return {"random": view.value if gauss is None else (view.value, gauss)}

    def forget(self) -> None:
        self._last_outer = None
        self._through.forget()


def state_digest(state: Any) -> int:
    """A digest of a ``getstate()`` state: the twister's words and ``gauss()``'s cached value."""
    if type(state) is not tuple or len(state) != 3:
        raise TypeError(f"not a getstate() state: {type(state).__name__}")
    return hash((tuple(state[1]), state[2]))


def _whole_view(inst: Any) -> Any | None:
    """A view of ``inst``'s whole twister (``index``, then the 624 words of ``state``), read in place, proved.

    The layout ``_mt_view`` describes, checked the same way against the C type's own
    ``getstate()``, word for word.
    """
    if not isinstance(inst, _c_random.Random):
        return None
    address = id(inst) + 2 * ctypes.sizeof(ctypes.c_void_p)
    size = _WHOLE
    if not inside(inst, address, size):
        return None
    read = read_with_state([(address, size)], lambda: _c_random.Random.getstate(inst))
    if read is None:
        return None
    (raw,), internal = read
    if len(internal) != 625 or struct.unpack("<i624I", raw) != (internal[-1], *internal[:-1]):
        return None
    return in_place([(address, size)], inst)


def _mt_view(inst: Any) -> Any | None:
    """A view of ``inst``'s Mersenne Twister, read in place: ``index`` and ``state[0]``.

    CPython's RandomObject (Modules/_randommodule.c, the same in 3.10 to 3.13) is::

        typedef struct {
            PyObject_HEAD
            int index;
            uint32_t state[N];  /* N == 624 */
        } RandomObject;

    index moves with every 32-bit word drawn, state[0] when the block is
    regenerated. Only an instance of ``_random.Random`` has that layout (a
    look-alike bound in its place may keep anything there), the 8 bytes must lie
    inside the object, and they must say what ``getstate()`` says; otherwise
    there is no fingerprint and the stream is compared in full at block ends.
    (gauss()'s cached value is compared with the full state at block ends.)
    """
    if not isinstance(inst, _c_random.Random):
        return None
    address = id(inst) + 2 * ctypes.sizeof(ctypes.c_void_p)
    if not inside(inst, address, 8):
        return None
    # The C type's own getstate(): the 624 words, then index. A subclass's may say anything
    # (SystemRandom's raises NotImplementedError; its draws never move the twister).
    read = read_with_state([(address, 8)], lambda: _c_random.Random.getstate(inst))
    if read is None:
        return None
    (raw,), internal = read
    index, first = struct.unpack("<iI", raw)
    if len(internal) != 625 or index != internal[-1] or first != internal[0]:
        return None
    return in_place([(address, 8)], inst)
