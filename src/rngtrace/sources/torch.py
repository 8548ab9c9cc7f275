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

import sys
from collections.abc import Callable, Iterable
from types import FrameType
from typing import Any

import torch
import torch.nn.functional as _F
import torch.nn.init as _init
import torch.utils._device as _device

from .._model import DRAW, SEED
from . import _torch_state
from ._base import IN_PLACE, INTERNAL, Hit, Patch, Source, restore_wrapper, seed_wrapper, twin_of
from ._inplace import in_place as read_in_place
from ._torch_ops import (
    INIT_DRAWS,
    PREBOUND,
    RECURRENT_MODULES,
    VF_DRAWS,
    conditions,
    fill_function_tables,
    generator_positions,
    skipped_by_dynamo,
    tagged_overloads,
    tensor_draw_names,
    torch_draw_names,
)
from ._torch_wrappers import (
    GENERATOR_METHODS,
    GENERATOR_SEEDS,
    attention_count,
    cpu_generator,
    cpu_holds,
    cuda_seed_wrapper,
    cuda_stream,
    draw_wrapper,
    generator_method_wrapper,
    initialised_cuda_generators,
    recurrent_wrapper,
    state_digest,
    state_getter,
)
from .torch_stream import STREAM

_Tensor = torch.Tensor
_Generator = torch.Generator

_CPU_SEEDS = ("manual_seed", "seed", "set_rng_state")
_CUDA_SEEDS = ("manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state", "set_rng_state_all")


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
        when = conditions()
        seen: dict[int, Callable] = {}
        hooked: set[int] = set()
        # nn.functional's dropout family is left alone (Python functions torch.compile inlines,
        # guarding their code's identity): each reaches its op through torch._VF, and the op is
        # recorded there, in place; without the accelerator _VF's class holds the op's wrapper too.
        variable_functions = torch._C._VariableFunctionsClass  # type: ignore[attr-defined]  # torch._VF reads its instance's attributes

        def patch(parent: Any, attr: str, api: str, make: Callable[[Callable, str], Callable]) -> Iterable[Patch]:
            original = getattr(parent, attr, None)
            if original is None:
                return ()
            # torch.manual_seed and torch.random.manual_seed are one object: one wrapper.
            wrapper = seen.get(id(original))
            if wrapper is not None:
                return () if id(original) in hooked else ((parent, attr, wrapper),)
            hook = in_place(original, api, make)
            if hook:
                return hook
            wrapper = seen[id(original)] = make(original, api)
            return ((parent, attr, wrapper),)

        def in_place(original: Any, api: str, make: Callable[[Callable, str], Callable]) -> tuple[Patch, ...]:
            # A builtin records in place where it can: torch.compile's guards check the identity of
            # each builtin compiled code read (torch.rand), and every reference (torch._VF's, one
            # bound at import) is then the same recording object.
            twin = twin_of(original)
            if twin is None or id(original) in seen:
                return ()
            seen[id(original)] = make(twin, api)
            hooked.add(id(original))
            return ((original, IN_PLACE, seen[id(original)]),)

        def draw(tagged: str | None = None, count_of: Any = None) -> Callable[[Callable, str], Callable]:
            return lambda original, api: draw_wrapper(
                hub, api, original, generator_positions(original, tagged), when.get(api), count_of
            )

        for name in torch_draw_names():
            original = getattr(torch, name)  # read first: each patch is in place once yielded
            yield from patch(torch, name, f"torch.{name}", draw(name))
            if (
                name in VF_DRAWS
                and id(original) not in hooked
                and isinstance(vars(variable_functions).get(name), staticmethod)
            ):
                # Held there as a static method: the wrapper is, as well. Only these: torch looks
                # every function a torch-function mode is handed up there (torch.device("meta")
                # knows the factory functions by identity).
                yield variable_functions, name, staticmethod(seen[id(original)])
        recurrent = lambda original, api: recurrent_wrapper(hub, api, original)  # noqa: E731
        for name in RECURRENT_MODULES:
            yield from patch(getattr(torch.nn, name), "forward", f"torch.nn.{name} (dropout)", recurrent)
        for name in tensor_draw_names():
            yield from patch(_Tensor, name, f"torch.Tensor.{name}", draw(name))
        for api in when:
            if api.startswith("torch.nn.functional."):
                name = api.rsplit(".", 1)[1]
                if name == "scaled_dot_product_attention":
                    yield from patch(_F, name, api, draw(None, attention_count))
        yield from patch(_F, "rrelu_", "torch.rrelu_", draw("rrelu_"))
        for name in INIT_DRAWS:
            yield from patch(_init, name, f"torch.nn.init.{name}", draw())
        for module_name, name in PREBOUND:
            module = sys.modules.get(module_name)
            if module is not None:
                yield from patch(module, name, f"torch.{name}", draw(name))
        # The ops themselves, as compiled code calls them: each overload's callable records in
        # place (only there: an OpOverload holds its callable, no namespace to patch).
        if twin_of(torch.rand) is not None:
            for op_name, op in tagged_overloads():
                name = op_name.split(".")[1]
                yield from in_place(
                    getattr(op, "_op", None),
                    f"torch.ops.{op_name}",
                    lambda twin, api, name=name: draw_wrapper(  # type: ignore[misc]
                        hub, api, twin, generator_positions(None, name), when.get(f"torch.{name}")
                    ),
                )
        for name, original in GENERATOR_METHODS.items():
            yield _Generator, name, generator_method_wrapper(hub, name, original)
        yield _Generator, "get_state", state_getter(hub)

        def cpu_seed(original: Callable, api: str) -> Callable:
            if api.endswith(".set_rng_state"):
                return restore_wrapper(hub, "torch", api, original, cpu_holds, digest=state_digest)
            return seed_wrapper(hub, "torch", api, original)

        for module in (torch, torch.random):
            for name in _CPU_SEEDS:
                yield from patch(module, name, f"torch.{name}", cpu_seed)
        # CUDA reseeds only where a device exists: without one torch queues the call for a CUDA
        # that never starts, and a torch.cuda:0 stream in the log would name a generator there is
        # not (device_count() asks the driver once and never initialises CUDA).
        cuda_modules = (torch.cuda, sys.modules.get("torch.cuda.random")) if torch.cuda.device_count() else ()
        for module in cuda_modules:
            for name in _CUDA_SEEDS if module is not None else ():
                device_at = 1 if name == "set_rng_state" else None
                make = lambda original, api, d=device_at: cuda_seed_wrapper(hub, api, original, d)  # noqa: E731
                yield from patch(module, name, f"torch.cuda.{name}", make)

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
