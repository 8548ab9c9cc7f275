"""Python's ``random`` module: the hidden ``random._inst`` behind its functions."""

from __future__ import annotations

import ctypes
import random as _random
from types import FrameType
from typing import Any, Iterable, Optional

from ..trace import DRAW, SEED
from ._base import INTERNAL, Hit, Patch, Source, draw_wrapper, inplace_count, seed_wrapper
from ._inplace import in_place

_SEEDS = frozenset({"seed", "setstate"})
_NOT_DRAWS = frozenset({"getstate"})
_MANY = frozenset({"choices", "sample", "shuffle", "randbytes"})
_FILE = _random.__file__


def _public_names() -> list[str]:
    inst = _random._inst
    return [
        name
        for name in _random.__all__
        if getattr(getattr(_random, name, None), "__self__", None) is inst and name not in _NOT_DRAWS
    ]


def _count(result: Any, args: tuple, kwargs: dict) -> Optional[int]:
    if isinstance(result, (list, bytes)):
        return len(result)  # choices, sample, randbytes
    if result is None:  # shuffle works in place
        return inplace_count(args, kwargs)
    return 1


class RandomSource(Source):
    """The stream behind ``random.random()``, ``random.shuffle()`` and friends."""

    name = "random"
    module = "random"
    hint = "random.Random(seed)"

    def __init__(self) -> None:
        self._inst = _random._inst
        self._last_outer: Optional[FrameType] = None
        self._view: Optional[Any] = None
        self._view_of: Any = None

    def patches(self, hub: Any) -> Iterable[Patch]:
        for name in _public_names():
            original = getattr(_random, name)
            api = f"random.{name}"
            if name in _SEEDS:
                yield _random, name, seed_wrapper(hub, "random", api, original)
            else:
                # Most return one number; only these return several, or shuffle in place.
                counted = _count if name in _MANY else None
                yield _random, name, draw_wrapper(hub, "random", api, original, counted)

    def owners(self) -> Iterable[object]:
        return (self._inst,)

    def keep_types(self) -> tuple[type, ...]:
        return ()

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Optional[Hit | str]:
        name = getattr(callee, "__name__", "")
        if name in _NOT_DRAWS:
            return INTERNAL
        outer = None
        f: Optional[FrameType] = frame
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
        return {"random": _random.getstate()}

    def restore(self, states: dict[str, Any]) -> None:
        if "random" in states:
            _random._inst.setstate(states["random"])

    def fingerprint(self) -> Optional[Any]:
        # Proved once against getstate() (tens of µs), then valid while the instance lives.
        if self._view_of is not self._inst:
            self._view, self._view_of = _mt_view(), self._inst
        return self._view

    def snapshot(self) -> dict[str, Any]:
        view = self._view if self._view_of is not None else self.fingerprint()
        if view is None:
            return self.state()
        # The twister's words in place, and gauss()'s cached value, which they do not show.
        return {"random": (view.value, getattr(self._inst, "gauss_next", None))}

    def forget(self) -> None:
        self._last_outer = None


def _mt_view() -> Optional[Any]:
    """A view of random._inst's Mersenne Twister, read in place: ``index`` and ``state[0]``.

    CPython's RandomObject is ``PyObject_HEAD; int index; uint32_t state[624]``:
    index moves with every 32-bit word drawn, state[0] when the block is
    regenerated. The view is used only after checking it against
    ``getstate()``; a build with another layout gets no fingerprint and is
    checked at block ends only. (gauss()'s cached value is compared with the
    full state at block ends.)
    """
    inst = _random._inst
    try:
        address = id(inst) + 2 * ctypes.sizeof(ctypes.c_void_p)
        words = (ctypes.c_uint32 * 2).from_address(address)
        internal = inst.getstate()[1]
        if words[0] != internal[-1] or words[1] != internal[0]:
            return None
    except (ValueError, TypeError, AttributeError, IndexError):
        return None
    return in_place([(address, 8)], inst)


SOURCE_CLASS = RandomSource
