"""PyTorch's default generators: ``torch.default_generator`` and one per CUDA device.

The drawing functions are the public names of aten operators tagged
``nondeterministic_seeded``, found once per process, plus the Python-level
functions that reach those operators through ``torch._VF`` (the dropout family)
or draw on a tensor they are handed (``torch.nn.init``). Draws land on the
stream of the result's device: "torch" for the CPU, "torch.cuda:N" for CUDA
device N. A call given a generator of its own draws from no global stream and is
not recorded. The recurrent ops (``torch.lstm`` ...) draw only for dropout
between layers, inside C++: those draws are recorded at the call of the
``nn.LSTM``, ``nn.GRU`` or ``nn.RNN`` that makes them.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import FrameType
from typing import Any

import torch
import torch.utils._device as _device

from .._kinds import DRAW, SEED
from . import _torch_state
from ._base import INTERNAL, Hit, Patch, Source
from ._inplace import in_place as read_in_place
from ._torch_ops import (
    conditions,
    fill_function_tables,
    skipped_by_dynamo,
    tensor_draw_names,
    torch_draw_names,
)
from ._torch_patches import Patcher
from ._torch_wrappers import (
    GENERATOR_SEEDS,
    cpu_generator,
    cuda_stream,
    initialised_cuda_generators,
)
from .torch_stream import STREAM

_Tensor = torch.Tensor
_Generator = torch.Generator


#: the seed torch's default CPU generator starts from in builds that do not take OS entropy
_DEFAULT_SEED = 67280421310721


# -- the source -------------------------------------------------------------------------
class TorchSource(Source):
    """The streams behind ``torch.rand()``, ``nn.init``, dropout and ``torch.manual_seed()``."""

    stream = STREAM

    @classmethod
    def settings(cls) -> dict[str, bool]:
        """The torch flags that decide whether its results repeat; empty where torch is not imported.

        Read once, when a trace ends: never per draw.
        """
        try:
            cudnn = torch.backends.cudnn
            return {
                "cudnn.benchmark": bool(cudnn.benchmark),
                "cudnn.deterministic": bool(cudnn.deterministic),
                "deterministic_algorithms": bool(torch.are_deterministic_algorithms_enabled()),
                "cuda": bool(torch.cuda.is_initialized()),
            }
        except Exception:  # noqa: BLE001 (a torch that cannot say is no finding, never an error)
            return {}

    def starts_fixed(self) -> bool | None:
        # PyTorch builds differ: some start the CPU generator from the fixed default seed, others
        # (2.13 here) from OS entropy. Compared with a generator given that seed: one read, at start.
        try:
            fixed = torch.Generator().manual_seed(_DEFAULT_SEED).get_state()
            return bool(torch.equal(cpu_generator().get_state(), fixed))
        except Exception:  # noqa: BLE001 (a state that cannot be read says nothing)
            return None

    def __init__(self) -> None:
        # Taken before any patch goes on: these are the originals, for references
        # bound before tracing. Only functions that always draw and run no patched
        # code inside, so one call is one event.
        when = conditions()
        self._apis: dict[int, str] = {}
        self._functions: list[object] = []
        for name in torch_draw_names():
            if f"torch.{name}" not in when:
                self._remember(getattr(torch, name), f"torch.{name}")
        for name in tensor_draw_names():
            self._remember(getattr(_Tensor, name), f"torch.Tensor.{name}")
        self._view: Any | None = None
        self._view_key: tuple | None = None
        self._whole: Any | None = None
        self._whole_key: tuple | None = None
        self._tables_filled = False

    def _remember(self, original: object, api: str) -> None:
        if id(original) not in self._apis:
            self._apis[id(original)] = api
            self._functions.append(original)

    def prepare(self) -> None:
        # torch caches sets of its functions by identity on first use; one first
        # filled while tracing would hold our wrappers for good, and `with
        # torch.device("meta"):` would stop applying to torch.rand once we are gone.
        _device._device_constructors()
        torch.jit._builtins._get_builtin_table()
        if not self._tables_filled:  # torch.overrides' tables, once: only a cache_clear() empties them
            fill_function_tables()
            self._tables_filled = True
        skipped_by_dynamo()

    def patches(self, hub: Any) -> Iterable[Patch]:
        return Patcher(hub).all()

    def owners(self) -> Iterable[object]:
        return (cpu_generator(), *initialised_cuda_generators())

    def owners_version(self) -> int:
        return len(torch.cuda.default_generators) if torch.cuda.is_initialized() else 0

    def functions(self) -> Iterable[object]:
        return self._functions

    def keep_types(self) -> tuple[type, ...]:
        # A call site that calls some Generator's method may be handed a default one next time.
        return (_Generator,)

    def classify(self, callee: Any, frame: FrameType, profile: bool) -> Hit | str | None:
        api = self._apis.get(id(callee))
        if api is not None:
            return ("torch", DRAW, api, frame, None)
        name = getattr(callee, "__name__", "")
        if name not in GENERATOR_SEEDS:
            return INTERNAL  # a default generator's reading methods
        owner = getattr(callee, "__self__", None)  # None for 3.12's unbound method: say CPU
        cuda = initialised_cuda_generators()
        if owner is not None and owner in cuda:
            i = cuda.index(owner)
            return (cuda_stream(i), SEED, f"torch.cuda.default_generators[{i}].{name}", frame, None)
        return ("torch", SEED, f"torch.default_generator.{name}", frame, None)

    def fingerprint(self) -> Any | None:
        # Proved once (about 0.1 ms), then valid while the generator keeps its implementation.
        generator = cpu_generator()
        key = (id(generator), _torch_state.impl_address(generator))
        if key != self._view_key:
            self._view, self._view_key = _torch_state.fingerprint(generator), key
        return self._view

    def snapshot(self) -> dict[str, Any]:
        # The CPU generator through its fingerprint (checked at every install and seed, so the
        # one kept is current); CUDA generators, which have none, in full.
        view = self._view if self._view_key is not None else self.fingerprint()
        states: dict[str, Any] = {"torch": view.value if view is not None else cpu_generator().get_state()}
        if torch.cuda.is_initialized():
            for i, generator in enumerate(torch.cuda.default_generators):
                states[cuda_stream(i)] = generator.get_state()
        return states

    def state_bytes(self, state: Any) -> bytes | None:
        """``state.numpy().tobytes()``; a contiguous CPU tensor (every generator's ``get_state()``) read in place.

        The first ``.numpy()`` in a child just forked costs ~0.2 ms (NumPy's bridge, touched
        afresh), and a DataLoader worker takes its digests there, at every seed.
        """
        if not isinstance(state, torch.Tensor):
            return None
        try:
            # In place only where its bytes are host memory (a generator's state always is).
            if state.is_cpu is True and state.is_contiguous() and state.numel() > 0:
                return read_in_place(((state.data_ptr(), state.numel() * state.element_size()),), state).value
        except (RuntimeError, TypeError, ValueError, AttributeError):
            pass
        try:
            return state.numpy().tobytes()
        except (RuntimeError, TypeError):
            return state.detach().cpu().numpy().tobytes()

    def digest_input(self) -> tuple[Any, dict[str, bytes]] | None:
        # get_state()'s bytes built from the CPU generator read in place: a DataLoader worker digests
        # torch at the manual_seed it starts with, where get_state() (its first call in a process
        # just forked) cost ~0.8 ms. CUDA generators have no in-place read: state() is digested then.
        if initialised_cuda_generators():
            return None
        generator = cpu_generator()
        key = (id(generator), _torch_state.impl_address(generator))
        if key != self._whole_key:
            self._whole, self._whole_key = _torch_state.whole(generator), key
        view = self._whole
        if view is None:
            return None
        return view, {"torch": _torch_state.as_state_bytes(view.value)}

    def state(self) -> dict[str, Any]:
        # The generators' own methods: torch.get_rng_state() is torch code the catch-all would see.
        states = {"torch": cpu_generator().get_state()}
        for i, generator in enumerate(initialised_cuda_generators()):
            states[cuda_stream(i)] = generator.get_state()
        return states

    def restore(self, states: dict[str, Any]) -> None:
        if "torch" in states:
            cpu_generator().set_state(states["torch"])
        for i, generator in enumerate(initialised_cuda_generators()):
            state = states.get(cuda_stream(i))
            if state is not None:
                generator.set_state(state)

    def same(self, a: Any, b: Any) -> bool:
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            return bool(a == b)  # two fingerprints
        return bool(torch.equal(a, b))
