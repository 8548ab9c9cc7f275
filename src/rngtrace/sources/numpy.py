"""NumPy's legacy ``np.random.*``: the singleton ``np.random.mtrand._rand``.

NumPy bound ``np.random.rand`` and most other module functions to that singleton
at import. Rebinding ``np.random.mtrand._rand`` later makes a second global
stream: ``np.random.seed()``, ``sample()`` and scikit-learn's
``check_random_state(None)`` use the new one, ``np.random.rand()`` still the old
one. Both are this source's singletons, recorded and compared alike.
"""

from __future__ import annotations

import importlib
import operator
import struct
import sys
from collections.abc import Iterable
from types import FrameType
from typing import Any

import numpy as np

# Not "import numpy.random.mtrand as ...": that reads numpy.random as an attribute,
# which numpy 2 resolves lazily and which is not set yet when a post-import hook runs.
_nprandom = importlib.import_module("numpy.random")
_mtrand = importlib.import_module("numpy.random.mtrand")
_bit_generator = importlib.import_module("numpy.random.bit_generator")

from .._kinds import DRAW, SEED  # noqa: E402 (after numpy.random, see above)
from ._base import (  # noqa: E402 (after numpy.random, see above)
    IN_PLACE,
    INTERNAL,
    Hit,
    Patch,
    Source,
    draw_wrapper,
    getter_wrapper,
    inplace_count,
    method_in_place,
    recorder,
    restore_wrapper,
    seed_wrapper,
)
from ._entropy import callee as callee_of  # noqa: E402 (after numpy.random, see above)
from ._entropy import enclosing_calls, entropy_wrapper, seed_given  # noqa: E402 (after numpy.random)
from ._numpy_views import full_view, mt_view, view_key  # noqa: E402 (after numpy.random, see above)
from .numpy_stream import STREAM  # noqa: E402 (after numpy.random, see above)

_SEEDS = frozenset({"seed", "set_state", "set_bit_generator"})
_NOT_DRAWS = frozenset({"get_state", "get_bit_generator", "__getstate__", "__reduce__"})
# Module-level functions that are not bound methods of the singleton.
_MODULE_FUNCTIONS = ("seed", "ranf", "sample", "set_bit_generator")
_RandomState = _mtrand.RandomState
_MT19937 = _nprandom.MT19937
_NUMPY_DIR = np.__file__.rsplit("__init__.py", 1)[0]


def _count(result: Any, args: tuple, kwargs: dict) -> int | None:
    if isinstance(result, np.ndarray):
        return int(result.size)
    if result is None:  # shuffle works in place
        return inplace_count(args, kwargs)
    if isinstance(result, bytes):
        return len(result)
    return 1


_ndarray = np.ndarray


def _method_count(result: Any, args: tuple, kwargs: dict) -> int | None:
    kind = type(result)  # the usual answers first: this runs on every draw
    if kind is _ndarray:
        return int(result.size)
    if kind is float or kind is int:
        return 1
    return _count(result, args[1:], kwargs)  # args[0] is the RandomState itself


def _entropy_call(args: tuple, kwargs: dict, frame: FrameType) -> tuple[str, FrameType] | None:
    """The outermost NumPy call of the user's drawing entropy (``Generator(PCG64())``), or None: seeded.

    ``RandomState(1)`` draws entropy too, then seeds over it: no event.
    """
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_NUMPY_DIR):
        frame = frame.f_back
    named = []
    for node in enclosing_calls(frame):
        made = callee_of(node, frame)
        name = getattr(made, "__name__", None)
        if name is not None and getattr(_nprandom, name, None) is made:
            named.append((node, name))
    if not named:
        return "numpy.random.SeedSequence", frame
    node, name = named[-1]
    if name == "RandomState" and seed_given(node, frame, "seed"):
        return None
    return f"numpy.random.{named[0][1]}", frame


class NumpySource(Source):
    """The stream behind ``np.random.rand()``, ``np.random.seed()`` and the singleton's methods."""

    stream = STREAM
    profile_visible = False  # Cython methods raise no c_call events

    def patches(self, hub: Any) -> Iterable[Patch]:
        rand = _mtrand._rand
        # First the singleton's methods, on its type: scikit-learn's check_random_state(None)
        # and scipy's distributions hand out np.random.mtrand._rand itself. The hub
        # applies each patch as it is yielded, so the module functions below can be
        # re-bound to these wrappers: one wrapper per call, not two.
        state_type = type(rand)
        wrapped: dict[str, Any] = {}  # name -> the wrapper on the type
        wrapper: Any
        mine = lambda args: "numpy" if args and args[0] is rand else None  # noqa: E731
        for name, original in list(vars(state_type).items()):
            if name == "get_state":  # the states handed out, so a restore is told apart from a reseed
                wrapper = getter_wrapper(hub, original, mine, state_digest)
            elif name.startswith("_") or name in _NOT_DRAWS or not callable(original):
                continue
            elif name == "set_state":
                api = f"numpy.random.{name}"
                wrapper = restore_wrapper(hub, "numpy", api, original, self._holds, rand, state_digest)
            else:
                kind = SEED if name in _SEEDS else DRAW
                count_of = None if kind == SEED else _method_count
                wrapper = recorder(hub, "numpy", kind, f"numpy.random.{name}", original, count_of=count_of, owner=rand)
            yield state_type, name, wrapper
            wrapped[name] = wrapper
        seen: dict[int, Any] = {}
        hooked: set[int] = set()
        for module in (_nprandom, _mtrand):
            for name in dir(module):
                original = getattr(module, name)
                owner = getattr(original, "__self__", None)
                bound = owner is rand
                # Bound to a singleton _rand no longer names: the wrappers on the type record
                # only rand's calls, so np.random.rand gets a wrapper of its own.
                stale = not bound and owner is not None and any(owner is s for s in self._bound)
                if not (bound or stale or name in _MODULE_FUNCTIONS) or (name in _NOT_DRAWS and name not in wrapped):
                    continue
                if bound and original.__name__ in wrapped:
                    # np.random.rand is rand.rand bound at import. With the accelerator that bound
                    # method records in place: its function is the type's wrapper while tracing,
                    # so every reference to it (numpy.random.mtrand's, one bound before the trace:
                    # ``from numpy.random import rand``) records, with no dict written. Else the
                    # module's attribute is rebound to the wrapper.
                    if not method_in_place(original):
                        yield module, name, getattr(rand, original.__name__)
                    elif id(original) not in hooked:  # numpy.random's and mtrand's are one object
                        hooked.add(id(original))
                        yield original, IN_PLACE, wrapped[original.__name__]
                    continue
                if name in _NOT_DRAWS:
                    continue  # get_state bound to a singleton _rand no longer names: not the stream's getter
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
        # Every generator NumPy makes from OS entropy draws it here, inside its SeedSequence (a Cython
        # module's global, looked up at each call).
        original = _bit_generator.randbits
        yield _bit_generator, "randbits", entropy_wrapper(hub, "numpy", original, _entropy_call)

    def owners(self) -> Iterable[object]:
        return self._singletons()

    def owners_version(self) -> int:
        return id(_mtrand._rand)  # self._bound is fixed for this source's life: only _rand can change

    def __init__(self) -> None:
        # Taken before any patch goes on: these are the originals.
        self._functions = [getattr(_mtrand, n) for n in _MODULE_FUNCTIONS if hasattr(_mtrand, n)]
        self._bound = _bound_singletons()
        self._view: Any | None = None
        self._view_key: tuple | None = None
        self._full_view: Any | None = None  # the whole state's, for full(); made for _full_key
        self._full_key: tuple | None = None

    def _singletons(self) -> tuple:
        """``np.random.mtrand._rand``, then any other RandomState the module's functions are bound to."""
        rand = _mtrand._rand
        bound = self._bound
        if len(bound) == 1 and bound[0] is rand:
            return bound  # the usual answer first: read at every block's start and end
        return (rand, *[s for s in bound if s is not rand])

    def functions(self) -> Iterable[object]:
        return self._functions

    def keep_types(self) -> tuple[type, ...]:
        # A call site that calls some RandomState's method may be handed the singleton next time.
        return (_mtrand.RandomState,)

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Hit | str | None:
        name = getattr(callee, "__name__", "")
        if name in _NOT_DRAWS or name.startswith("_"):
            return INTERNAL
        kind = SEED if name in _SEEDS else DRAW
        return ("numpy", kind, f"numpy.random.{name}", frame, None)

    def state(self) -> dict[str, Any]:
        singletons = self._singletons()
        if len(singletons) == 1:
            return {"numpy": singletons[0].get_state(legacy=False)}
        return {"numpy": tuple(s.get_state(legacy=False) for s in singletons)}

    def digest_input(self) -> tuple[Any, dict[str, bytes]] | None:
        # get_state(legacy=False)'s dict as _digests feeds it (keys in repr order), from the legacy
        # state read in place: a seed's digest in a DataLoader worker just forked cost ~0.3 ms.
        self.full()
        view = self._full_view
        if view is None or self._full_key is None or len(self._full_key) != 4 or sys.byteorder != "little":
            return None  # one singleton only: the state of several is a tuple of dicts
        raw = view.value
        if len(raw) != _LEGACY_BYTES:
            return None
        pos, has_gauss, gauss = struct.unpack_from("<iid", raw, 624 * 4)
        data = b"".join(
            (b"{'bit_generator''MT19937''gauss'", repr(gauss).encode(), b"'has_gauss'", repr(has_gauss).encode(),
             b"'state'{'key'", raw[: 624 * 4], b"'pos'", repr(pos).encode(), b"}}")
        )  # fmt: skip
        return view, {"numpy": data}

    def restore(self, states: dict[str, Any]) -> None:
        state = states.get("numpy")
        if state is None:
            return
        singletons = self._singletons()
        for singleton, one in zip(singletons, state if isinstance(state, tuple) else (state,)):
            singleton.set_state(one)

    def full(self) -> dict[str, Any]:
        # The twister's whole key, pos and the cached normal, read in place (under a µs, against
        # ~40 µs for get_state()); get_state() where that read is not proved.
        singletons = self._singletons()
        key = view_key(singletons)
        if self._full_key is None or len(self._full_key) != len(key) or any(map(operator.is_not, self._full_key, key)):
            self._full_view, self._full_key = full_view(singletons), key
        view = self._full_view
        return {"numpy": view.value} if view is not None else self.state()

    def _holds(self, state: Any) -> bool:
        """Whether ``state`` is the singleton's state now (a restore of it moves nothing).

        Compared with the whole state read in place (key, pos, has_gauss, gauss: 2,512 bytes) where
        that read is proved, as a get_state() would cost ~25 µs at every set_state().
        """
        now = self.full().get("numpy") if len(self._singletons()) == 1 else None
        if type(now) is bytes and len(now) == _LEGACY_BYTES:
            legacy = _legacy_bytes(state)
            # The same key, pos and has_gauss; the cached normal only counts where has_gauss is set.
            return now[:-8] == legacy[:-8] and (now[-12:-8] == bytes(4) or now[-8:] == legacy[-8:])
        return state_digest(state) == state_digest(_RandomState.get_state(_mtrand._rand, legacy=False))

    def same(self, a: Any, b: Any) -> bool:
        return _same_state(a, b)

    def fingerprint(self) -> Any | None:
        # Valid while the singletons and their bit generators stay what they were, with the
        # types that were checked (set_bit_generator swaps the bit generator). Made at each
        # install and seed only: the draws read the view with no check.
        old = self._view_key
        rand = _mtrand._rand
        if old is not None and len(old) == 4 and old[0] is rand and old[1] is type(rand) and len(self._bound) == 1:
            # The usual case, read at every install: one singleton, checked as view_key() would.
            bitgen = getattr(rand, "_bit_generator", None)
            if old[2] is bitgen and old[3] is type(bitgen) and self._bound[0] is rand:
                return self._view
        singletons = self._singletons()
        key = view_key(singletons)
        if old is None or len(old) != len(key) or any(map(operator.is_not, old, key)):
            self._view, self._view_key = mt_view(singletons), key
        return self._view

    def snapshot(self) -> dict[str, Any]:
        # A _rand rebound inside the block is compared, not the one the view was made for (the
        # hub re-keys the view at installs and seeds only, where a swapped bit generator shows).
        key = self._view_key
        view = self._view if key is not None and key[0] is _mtrand._rand else self.fingerprint()
        # The whole legacy state where there is no view (another bit generator, a look-alike).
        return {"numpy": view.value} if view is not None else self.state()


#: the legacy state as read in place: key[624] and pos, then has_gauss and the cached normal
_LEGACY_BYTES = 624 * 4 + 4 + 4 + 8


def _legacy_parts(state: Any) -> tuple[str, Any, int, int, float]:
    """A ``get_state()`` state, legacy tuple or dict, as (bit generator, key, pos, has_gauss, gauss)."""
    if isinstance(state, dict):
        inner = state["state"]
        return state["bit_generator"], inner["key"], inner["pos"], state.get("has_gauss", 0), state.get("gauss", 0.0)
    name, key, pos = state[:3]
    has_gauss, gauss = (state[3], state[4]) if len(state) > 3 else (0, 0.0)
    return name, key, pos, has_gauss, gauss


def _legacy_bytes(state: Any) -> bytes:
    """``state`` as the in-place read of the whole legacy state has it (see ``_numpy_views.full_view``)."""
    name, key, pos, has_gauss, gauss = _legacy_parts(state)
    if name != "MT19937":
        raise ValueError(f"not an MT19937 state: {name!r}")
    return np.asarray(key, dtype="<u4").tobytes() + struct.pack("<iid", int(pos), int(has_gauss), float(gauss))


def state_digest(state: Any) -> int:
    """A digest of a ``get_state()`` state, legacy tuple or dict: the same for both forms of one state."""
    name, key, pos, has_gauss, gauss = _legacy_parts(state)
    return hash((name, np.asarray(key, dtype=np.uint32).tobytes(), int(pos), bool(has_gauss) and float(gauss)))


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, tuple) and isinstance(b, tuple):  # several singletons
        return len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return bool(np.array_equal(a, b))
    return bool(a == b)


def _bound_singletons() -> tuple:
    """The RandomState instances numpy bound ``np.random.mtrand``'s functions to (one, normally)."""
    found: dict[int, Any] = {}
    for name in dir(_mtrand):
        owner = getattr(getattr(_mtrand, name, None), "__self__", None)
        if isinstance(owner, _RandomState):
            found.setdefault(id(owner), owner)
    return tuple(found.values())
