"""What ``TorchSource.patches`` installs, one kind of callable per method.

A ``_Patcher`` remembers the wrapper made for each original it met (torch.manual_seed
and torch.random.manual_seed are one object: one wrapper) and which of them record in
place, so an alias found later gets the same wrapper, or nothing where the builtin itself
already records.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as _F
import torch.nn.init as _init

from ._base import IN_PLACE, Patch, restore_wrapper, seed_wrapper, twin_of
from ._torch_ops import (
    INIT_DRAWS,
    PREBOUND,
    RECURRENT_MODULES,
    VF_DRAWS,
    conditions,
    generator_positions,
    tagged_overloads,
    tensor_draw_names,
    torch_draw_names,
)
from ._torch_wrappers import (
    GENERATOR_METHODS,
    attention_count,
    cpu_holds,
    cuda_seed_wrapper,
    draw_wrapper,
    generator_method_wrapper,
    recurrent_wrapper,
    state_digest,
    state_getter,
)

_Make = Callable[[Callable, str], Callable]

CPU_SEEDS = ("manual_seed", "seed", "set_rng_state")
CUDA_SEEDS = ("manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state", "set_rng_state_all")


class Patcher:
    """The patches of torch's streams for one install, made in the order they go on."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub
        self.when = conditions()
        self.seen: dict[int, Callable] = {}
        self.hooked: set[int] = set()

    def all(self) -> Iterable[Patch]:
        """Every patch: the draws, then the generators' methods, then the seeds."""
        yield from self.functions()
        yield from self.modules()
        yield from self.ops()
        for name, original in GENERATOR_METHODS.items():
            yield torch.Generator, name, generator_method_wrapper(self.hub, name, original)
        yield torch.Generator, "get_state", state_getter(self.hub)
        yield from self.seeds()

    def patch(self, parent: Any, attr: str, api: str, make: _Make) -> Iterable[Patch]:
        """``parent.attr`` recorded by ``make(original, api)``: in place where it can, once per original."""
        original = getattr(parent, attr, None)
        if original is None:
            return ()
        wrapper = self.seen.get(id(original))
        if wrapper is not None:
            return () if id(original) in self.hooked else ((parent, attr, wrapper),)
        hook = self.in_place(original, api, make)
        if hook:
            return hook
        wrapper = self.seen[id(original)] = make(original, api)
        return ((parent, attr, wrapper),)

    def in_place(self, original: Any, api: str, make: _Make) -> tuple[Patch, ...]:
        """A builtin that records in place: its twin wrapped, the builtin itself kept.

        torch.compile's guards check the identity of each builtin compiled code read
        (torch.rand), and every reference (torch._VF's, one bound at import) is then the
        same recording object.
        """
        twin = twin_of(original)
        if twin is None or id(original) in self.seen:
            return ()
        self.seen[id(original)] = make(twin, api)
        self.hooked.add(id(original))
        return ((original, IN_PLACE, self.seen[id(original)]),)

    def draw(self, tagged: str | None = None, count_of: Any = None) -> _Make:
        """How a drawing function is wrapped: its generator argument's place, its condition, its count."""
        hub, when = self.hub, self.when
        return lambda original, api: draw_wrapper(
            hub, api, original, generator_positions(original, tagged), when.get(api), count_of
        )

    def functions(self) -> Iterable[Patch]:
        """torch's drawing functions, and torch._VF's static methods that are the same builtins."""
        # nn.functional's dropout family is left alone (Python functions torch.compile inlines,
        # guarding their code's identity): each reaches its op through torch._VF, and the op is
        # recorded there, in place; without the accelerator _VF's class holds the op's wrapper too.
        variable_functions = torch._C._VariableFunctionsClass  # type: ignore[attr-defined]  # torch._VF reads its instance's attributes
        for name in torch_draw_names():
            original = getattr(torch, name)  # read first: each patch is in place once yielded
            yield from self.patch(torch, name, f"torch.{name}", self.draw(name))
            if (
                name in VF_DRAWS
                and id(original) not in self.hooked
                and isinstance(vars(variable_functions).get(name), staticmethod)
            ):
                # Held there as a static method: the wrapper is, as well. Only these: torch looks
                # every function a torch-function mode is handed up there (torch.device("meta")
                # knows the factory functions by identity).
                yield variable_functions, name, staticmethod(self.seen[id(original)])

    def modules(self) -> Iterable[Patch]:
        """The recurrent modules' forward, Tensor methods, nn.functional's and nn.init's draws, bound copies."""
        hub, draw = self.hub, self.draw
        recurrent = lambda original, api: recurrent_wrapper(hub, api, original)  # noqa: E731
        for name in RECURRENT_MODULES:
            yield from self.patch(getattr(torch.nn, name), "forward", f"torch.nn.{name} (dropout)", recurrent)
        for name in tensor_draw_names():
            yield from self.patch(torch.Tensor, name, f"torch.Tensor.{name}", draw(name))
        for api in self.when:
            if api == "torch.nn.functional.scaled_dot_product_attention":
                yield from self.patch(_F, api.rsplit(".", 1)[1], api, draw(None, attention_count))
        yield from self.patch(_F, "rrelu_", "torch.rrelu_", draw("rrelu_"))
        for name in INIT_DRAWS:
            yield from self.patch(_init, name, f"torch.nn.init.{name}", draw())
        for module_name, name in PREBOUND:
            module = sys.modules.get(module_name)
            if module is not None:
                yield from self.patch(module, name, f"torch.{name}", draw(name))

    def ops(self) -> Iterable[Patch]:
        """The ops themselves, as compiled code calls them: each overload's callable records in place.

        Only there: an OpOverload holds its callable, no namespace to patch.
        """
        if twin_of(torch.rand) is None:
            return
        hub, when = self.hub, self.when
        for op_name, op in tagged_overloads():
            name = op_name.split(".")[1]
            yield from self.in_place(
                getattr(op, "_op", None),
                f"torch.ops.{op_name}",
                lambda twin, api, name=name: draw_wrapper(  # type: ignore[misc]
                    hub, api, twin, generator_positions(None, name), when.get(f"torch.{name}")
                ),
            )

    def seeds(self) -> Iterable[Patch]:
        """The CPU generator's reseeds, and CUDA's where a device exists."""
        hub = self.hub

        def cpu_seed(original: Callable, api: str) -> Callable:
            if api.endswith(".set_rng_state"):
                return restore_wrapper(hub, "torch", api, original, cpu_holds, digest=state_digest)
            return seed_wrapper(hub, "torch", api, original)

        for module in (torch, torch.random):
            for name in CPU_SEEDS:
                yield from self.patch(module, name, f"torch.{name}", cpu_seed)
        # CUDA reseeds only where a device exists: without one torch queues the call for a CUDA
        # that never starts, and a torch.cuda:0 stream in the log would name a generator there is
        # not (device_count() asks the driver once and never initialises CUDA).
        cuda_modules = (torch.cuda, sys.modules.get("torch.cuda.random")) if torch.cuda.device_count() else ()
        for cuda_module in cuda_modules:
            for name in CUDA_SEEDS if cuda_module is not None else ():
                device_at = 1 if name == "set_rng_state" else None
                make = lambda original, api, d=device_at: cuda_seed_wrapper(hub, api, original, d)  # noqa: E731
                yield from self.patch(cuda_module, name, f"torch.cuda.{name}", make)
