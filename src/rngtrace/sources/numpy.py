"""NumPy's legacy ``np.random.*``: the singleton ``np.random.mtrand._rand``."""

from __future__ import annotations

import ctypes
import functools
import struct
from types import FrameType
from typing import Any, Iterable, Optional

import importlib

import numpy as np

# Not "import numpy.random.mtrand as ...": that reads numpy.random as an attribute,
# which numpy 2 resolves lazily and which is not set yet when a post-import hook runs.
_nprandom = importlib.import_module("numpy.random")
_mtrand = importlib.import_module("numpy.random.mtrand")

from ..trace import DRAW, SEED
from ._base import INTERNAL, Hit, Patch, Source, draw_wrapper, inplace_count, recorder, seed_wrapper
from ._inplace import in_place

_SEEDS = frozenset({"seed", "set_state", "set_bit_generator"})
_NOT_DRAWS = frozenset({"get_state", "get_bit_generator", "__getstate__", "__reduce__"})
# Module-level functions that are not bound methods of the singleton.
_MODULE_FUNCTIONS = ("seed", "ranf", "sample", "set_bit_generator")


def _count(result: Any, args: tuple, kwargs: dict) -> Optional[int]:
    if isinstance(result, np.ndarray):
        return int(result.size)
    if result is None:  # shuffle works in place
        return inplace_count(args, kwargs)
    if isinstance(result, bytes):
        return len(result)
    return 1


_ndarray = np.ndarray


def _method_count(result: Any, args: tuple, kwargs: dict) -> Optional[int]:
    kind = type(result)  # the usual answers first: this runs on every draw
    if kind is _ndarray:
        return int(result.size)
    if kind is float or kind is int:
        return 1
    return _count(result, args[1:], kwargs)  # args[0] is the RandomState itself


class NumpySource(Source):
    """The stream behind ``np.random.rand()``, ``np.random.seed()`` and the singleton's methods."""

    name = "numpy"
    module = "numpy.random"
    hint = "np.random.default_rng(seed)"
    profile_visible = False  # Cython methods raise no c_call events

    def patches(self, hub: Any) -> Iterable[Patch]:
        rand = _mtrand._rand
        # First the singleton's methods, on its type: scikit-learn's check_random_state(None)
        # and scipy's distributions hand out np.random.mtrand._rand itself. The hub
        # applies each patch as it is yielded, so the module functions below can be
        # re-bound to these wrappers: one wrapper per call, not two.
        state_type = type(rand)
        wrapped = set()
        for name, original in list(vars(state_type).items()):
            if name.startswith("_") or name in _NOT_DRAWS or not callable(original):
                continue
            api = f"numpy.random.{name}"
            kind = SEED if name in _SEEDS else DRAW
            yield state_type, name, recorder(
                hub, "numpy", kind, api, original, count_of=None if kind == SEED else _method_count, owner=rand
            )
            wrapped.add(name)
        seen: dict[int, Any] = {}
        for module in (_nprandom, _mtrand):
            for name in dir(module):
                original = getattr(module, name)
                bound = getattr(original, "__self__", None) is rand
                if not (bound or name in _MODULE_FUNCTIONS) or name in _NOT_DRAWS:
                    continue
                if bound and original.__name__ in wrapped:
                    # np.random.rand is rand.rand bound at import: bind it to the wrapper.
                    yield module, name, getattr(rand, original.__name__)
                    continue
                # np.random.seed and np.random.mtrand.seed are one object: one wrapper.
                wrapper = seen.get(id(original))
                if wrapper is None:
                    api = f"numpy.random.{name}"
                    if name in _SEEDS:
                        wrapper = seed_wrapper(hub, "numpy", api, original)
                    else:
                        wrapper = draw_wrapper(hub, "numpy", api, original, _count)
                    seen[id(original)] = wrapper
                yield module, name, wrapper

    def owners(self) -> Iterable[object]:
        return (_mtrand._rand,)

    def __init__(self) -> None:
        # Taken before any patch goes on: these are the originals.
        self._functions = [getattr(_mtrand, n) for n in _MODULE_FUNCTIONS if hasattr(_mtrand, n)]
        self._view: Optional[Any] = None
        self._view_key: Optional[tuple] = None

    def functions(self) -> Iterable[object]:
        return self._functions

    def keep_types(self) -> tuple[type, ...]:
        # A call site that calls some RandomState's method may be handed the singleton next time.
        return (_mtrand.RandomState,)

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Optional[Hit | str]:
        name = getattr(callee, "__name__", "")
        if name in _NOT_DRAWS or name.startswith("_"):
            return INTERNAL
        kind = SEED if name in _SEEDS else DRAW
        return ("numpy", kind, f"numpy.random.{name}", frame, None)

    def state(self) -> dict[str, Any]:
        return {"numpy": _mtrand._rand.get_state(legacy=False)}

    def restore(self, states: dict[str, Any]) -> None:
        if "numpy" in states:
            _mtrand._rand.set_state(states["numpy"])

    def same(self, a: Any, b: Any) -> bool:
        return _same_state(a, b)

    def fingerprint(self) -> Optional[Any]:
        # Valid while the singleton keeps its bit generator (set_bit_generator swaps it).
        rand = _mtrand._rand
        key = (rand, rand._bit_generator)
        if self._view_key is None or self._view_key[0] is not key[0] or self._view_key[1] is not key[1]:
            self._view, self._view_key = _mt_view(), key
        return self._view

    def snapshot(self) -> dict[str, Any]:
        view = self._view if self._view_key is not None else self.fingerprint()
        # The whole legacy state for another bit generator: the view covers only MT19937.
        return {"numpy": view.value} if view is not None else self.state()


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


def _mt_view() -> Optional[Any]:
    """A view of the singleton's MT19937 (``key[623]`` and ``pos``) and its cached normal, read in place.

    ``mt19937_state`` is ``uint32_t key[624]`` followed by ``int pos``: pos moves
    with every 32-bit word drawn, key[623] when the key is regenerated. A legacy
    normal draw may instead take the second sample of a pair, which moves no word
    but clears the singleton's ``has_gauss``: that flag is read too, where its
    place in the object is proved. The hub asks again after every seed, so a bit
    generator swapped by ``set_bit_generator()`` is read from then on; the view
    holds what it reads, so the memory stays valid whatever happens to the singleton.
    """
    rand = _mtrand._rand
    bitgen = rand._bit_generator
    if type(bitgen).__name__ != "MT19937":
        return None  # another bit generator: checked at block ends only
    regions = [(bitgen.ctypes.state_address + 623 * 4, 8)]
    offset = _gauss_flag_offset()
    if offset is not None:
        regions.append((id(rand) + offset, 4))
    return in_place(regions, (bitgen, rand))


@functools.lru_cache(maxsize=None)
def _gauss_flag_offset() -> Optional[int]:
    """Where a RandomState keeps ``has_gauss``, proved on a private one; None if not found.

    The legacy state (``aug_bitgen_t``) is ``bitgen_t *``, ``int has_gauss``, ``double
    gauss``: set a distinctive cached normal through ``set_state()``, find it in the
    object, and check that the int before it follows the flag both ways.
    """
    state_type = _mtrand.RandomState
    private = state_type(20261130)
    name, key, pos = private.get_state(legacy=True)[:3]
    cached = 0.6180339887498949
    private.set_state((name, key, pos, 1, cached))
    size = state_type.__basicsize__
    memory = ctypes.string_at(id(private), size)
    found = [o for o in range(16, size - 7, 8) if memory[o : o + 8] == struct.pack("<d", cached)]
    if len(found) != 1 or found[0] < 24:
        return None
    offset = found[0] - 8
    flag = ctypes.c_int.from_address(id(private) + offset)
    if flag.value != 1:
        return None
    private.standard_normal()  # takes the cached sample
    if flag.value != 0:
        return None
    private.set_state((name, key, pos, 1, cached))
    return offset if flag.value == 1 else None


SOURCE_CLASS = NumpySource
