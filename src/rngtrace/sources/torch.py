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

import functools
import importlib
import inspect
import sys
import threading
from collections.abc import Callable, Iterable
from types import FrameType, FunctionType
from typing import Any

import torch
import torch.nn.functional as _F
import torch.nn.init as _init
import torch.nn.utils.rnn as _rnn_utils
import torch.utils._device as _device

from .._errors import GlobalRNGError
from .._model import DRAW, SEED
from . import _torch_state
from ._base import IN_PLACE, INTERNAL, Condition, Hit, Patch, Source, recorder, restore_wrapper, seed_wrapper, twin_of
from ._entropy import entropy_wrapper
from ._inplace import in_place as read_in_place
from .torch_stream import STREAM

_Generator = torch.Generator
_Tensor = torch.Tensor
_Module = torch.nn.Module
_PackedSequence = _rnn_utils.PackedSequence
_fake_tensor = importlib.import_module("torch._subclasses.fake_tensor")
_FakeTensor = _fake_tensor.FakeTensor
# A fake tensor, or a wrapper of one (AOTAutograd's FunctionalTensor): a compile tracing, drawing nothing.
_is_fake = getattr(_fake_tensor, "is_fake", lambda t: False)

# Private ops worth seeing: torch.distributions' Gamma, Beta, Chi2, StudentT and
# Dirichlet sample through them.
_PRIVATE_DRAWS = frozenset({"_standard_gamma", "_sample_dirichlet"})
# Ops that draw only for dropout between layers, reached through torch._VF: not plain
# tagged draws. Their draws are recorded at the modules' forward (see _recurrent_wrapper);
# a direct call of the op is left to the state checks.
_RECURRENT = ("lstm", "gru", "rnn_tanh", "rnn_relu")
_RECURRENT_MODULES = ("LSTM", "GRU", "RNN")

# The ops nn.functional's dropout family reaches through torch._VF (not through torch's attributes).
_VF_DRAWS = frozenset(
    {
        "dropout",
        "dropout_",
        "feature_dropout",
        "feature_dropout_",
        "alpha_dropout",
        "alpha_dropout_",
        "feature_alpha_dropout",
        "feature_alpha_dropout_",
    }
)
_INIT_DRAWS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "xavier_uniform_",
    "xavier_normal_",
    "orthogonal_",
    "sparse_",
)
# Modules that bind a drawing function at import (``from torch import randperm``).
_PREBOUND = (("torch.utils.data.dataset", "randperm"),)

_CPU_SEEDS = ("manual_seed", "seed", "set_rng_state")
_CUDA_SEEDS = ("manual_seed", "manual_seed_all", "seed", "seed_all", "set_rng_state", "set_rng_state_all")
# Methods of a default generator that move it; its other methods only read it.
_GENERATOR_SEEDS = frozenset({"manual_seed", "seed", "set_state", "set_offset", "graphsafe_set_state"})
# Their originals, taken at import (before any patch goes on).
_GENERATOR_METHODS = {name: vars(_Generator)[name] for name in sorted(_GENERATOR_SEEDS) if name in vars(_Generator)}


# -- which functions draw ---------------------------------------------------------
def _aten_overloads(keep: Callable[[str], bool] = lambda name: True) -> Iterable[tuple[str, str, Any]]:
    """(name, overload, OpOverload) of each aten operator overload whose name ``keep`` keeps."""
    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::"):
            continue
        name, _, overload = full[6:].partition(".")
        if not keep(name):
            continue
        try:
            yield name, overload or "default", getattr(getattr(torch.ops.aten, name), overload or "default")
        except (AttributeError, RuntimeError):
            continue


@functools.cache
def _tagged_overloads() -> tuple[tuple[str, Any], ...]:
    """(``aten.name.overload``, OpOverload) for each overload tagged ``nondeterministic_seeded``.

    Compiled code calls these directly (Inductor's seeds: ``aten.randint.low_out``), not
    torch's functions.
    """
    seeded = torch.Tag.nondeterministic_seeded
    return tuple((f"aten.{name}.{overload}", op) for name, overload, op in _aten_overloads() if seeded in op.tags)


@functools.cache
def _tagged() -> dict[str, tuple[int, ...]]:
    """Tagged operator name -> positions where a generator may be passed positionally."""
    candidates = [torch, _Tensor, _F]
    out: dict[str, tuple[int, ...]] = {}
    # Looking up an op packet is the slow part: only for names torch exposes.
    for name, _overload, op in _aten_overloads(lambda name: any(hasattr(ns, name) for ns in candidates)):
        if torch.Tag.nondeterministic_seeded not in op.tags and name not in out:
            continue
        positions = set(out.get(name, ()))
        for i, arg in enumerate(op._schema.arguments):
            if arg.name == "generator" and not arg.kwarg_only:
                positions.add(i)
        out[name] = tuple(sorted(positions))
    return out


def _torch_draw_names() -> list[str]:
    """Names on ``torch`` of tagged operators, without private and module attributes."""
    builtin = type(torch.rand)
    return [
        name
        for name in sorted(_tagged())
        if (not name.startswith("_") or name in _PRIVATE_DRAWS)
        and name not in _RECURRENT
        and type(getattr(torch, name, None)) is builtin
    ]


def _tensor_draw_names() -> list[str]:
    return [n for n in sorted(_tagged()) if not n.startswith("_") and callable(getattr(_Tensor, n, None))]


def _arg(fn: Any, name: str, index: int, default: Any) -> tuple[int, str, Any]:
    """(position, keyword, default) of one parameter, read from the signature where there is one."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):  # a builtin without a text signature
        return index, name, default
    for i, p in enumerate(params):
        if p.name == name:
            return i, name, (p.default if p.default is not p.empty else default)
    return index, name, default


def _when(test: str, fn: Any, *params: tuple[str, int, Any]) -> Condition:
    """A Condition: ``test`` (a Condition.TESTS name) of ``params`` (name, position, default) of ``fn``."""
    return Condition(test, tuple(_arg(fn, *param) for param in params))


def _dropout_draws(train: Any, p: Any) -> bool:
    return Condition.TESTS["dropout"](train, p)


def _conditions() -> dict[str, Condition]:
    """Functions that draw only for some arguments, keyed by api name."""
    when: dict[str, Condition] = {}
    for name in ("dropout", "alpha_dropout", "feature_dropout", "feature_alpha_dropout"):
        for n in (name, name + "_"):
            if hasattr(torch, n):
                when[f"torch.{n}"] = _when("dropout", getattr(torch, n), ("train", 2, True), ("p", 1, 0.5))
    if hasattr(torch, "native_dropout"):  # train=None means training, and p=0 still draws
        when["torch.native_dropout"] = _when("not_false", None, ("train", 2, None))
    for n in ("rrelu", "rrelu_"):
        if hasattr(torch, n):
            when[f"torch.{n}"] = _when("truthy", getattr(torch, n), ("training", 3, False))
    for n in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"):
        if hasattr(_F, n):
            fn = getattr(_F, n)
            when[f"torch.nn.functional.{n}"] = _when("dropout", fn, ("training", 2, False), ("p", 1, 0.5))
    if hasattr(_F, "rrelu"):
        when["torch.nn.functional.rrelu"] = _when("truthy", _F.rrelu, ("training", 3, False))
    if hasattr(_F, "scaled_dot_product_attention"):
        when["torch.nn.functional.scaled_dot_product_attention"] = _when(
            "positive", _F.scaled_dot_product_attention, ("dropout_p", 4, 0.0)
        )
    return when


def _generator_positions(fn: Any, tagged_name: str | None) -> tuple[int, ...]:
    if tagged_name is not None:
        return _tagged().get(tagged_name, ())
    index, _, _ = _arg(fn, "generator", -1, None)
    return (index,) if index >= 0 else ()


# -- where a draw landed -----------------------------------------------------------
_CUDA_STREAMS: list[str] = []


def _cuda_stream(index: int) -> str:
    while len(_CUDA_STREAMS) <= index:
        _CUDA_STREAMS.append(f"torch.cuda:{len(_CUDA_STREAMS)}")
    return _CUDA_STREAMS[index]


def _placed(result: Any) -> tuple[str | None, int | None]:
    """(stream, values drawn) for a result; stream None for a meta or fake tensor, which draws nothing."""
    r = result[0] if type(result) is tuple else result
    if isinstance(r, _FakeTensor) or (type(r) is not _Tensor and _is_fake(r)):
        return None, None  # torch.compile tracing: no generator moved
    try:
        if r.is_cpu:  # the usual case first: one property read
            return "torch", r.numel()
        if r.is_cuda:
            return _cuda_stream(r.get_device()), r.numel()
        if r.is_meta:
            return None, None
        return "torch", r.numel()
    except (AttributeError, RuntimeError, TypeError):  # not a tensor, or a nested one
        return "torch", None


def _attention_count(result: Any, args: tuple, kwargs: dict) -> int | None:
    """Dropout in attention draws one value per attention weight: (..., L, S)."""
    try:
        query = args[0] if args else kwargs["query"]
        key = args[1] if len(args) > 1 else kwargs["key"]
        return query.numel() // query.shape[-1] * key.shape[-2]
    except (AttributeError, IndexError, KeyError, TypeError, ZeroDivisionError):
        return None


def _predicted(args: tuple, kwargs: dict) -> str | None:
    """The stream a call is about to draw from, None for meta: said only when raising."""
    device = kwargs.get("device")
    if device is None:
        first = args[0] if args else next(iter(kwargs.values()), None)
        if isinstance(first, _Module) and len(args) > 1:  # a module's forward: its input's device
            first = _sequence_data(args[1])
        device = first.device if isinstance(first, _Tensor) else torch.get_default_device()
    device = torch.device(device)
    if device.type == "meta":
        return None
    if device.type == "cuda":
        return _cuda_stream(device.index if device.index is not None else _current_cuda())
    return "torch"


def _is_default(generator: Any) -> bool:
    return generator is _cpu_generator() or generator in torch.cuda.default_generators


# -- wrappers ------------------------------------------------------------------------
def _draw_wrapper(
    rec: Any,
    api: str,
    original: Callable,
    generator_at: tuple[int, ...] = (),
    when: Callable[[tuple, dict], bool] | None = None,
    count_of: Callable[[Any, tuple, dict], int | None] | None = None,
    place: Callable[[Any], tuple[str | None, int | None]] = _placed,
) -> Callable:
    """Record each outermost call that draws from a default generator, on its result's device."""
    check = rec.check

    def strict_check(frame: FrameType | None, args: tuple, kwargs: dict) -> None:
        try:
            check("torch", api, frame)  # before the draw: on_draw="raise" leaves the stream as it was
        except GlobalRNGError:
            try:
                stream = _predicted(args, kwargs)
            except (RuntimeError, TypeError, ValueError):
                raise  # the first error: not a meta draw, and a stream name is only cosmetic
            if stream is not None:  # a meta tensor draws nothing
                check(stream, api, frame)  # names the CUDA stream where it is one
                raise

    def takes(args: tuple, kwargs: dict) -> bool:
        if generator_at or kwargs:
            generator = kwargs.get("generator")
            for i in generator_at:
                if generator is None and len(args) > i:
                    generator = args[i]
            # Its own generator draws from no global stream; what it calls inside still may.
            if generator is not None and not _is_default(generator):
                return False
        return when is None or _draws(when, args, kwargs)

    # A generator in a position: the Python wrapper always. Otherwise the C Recorder in front,
    # which sends generator= to it and asks the condition (dropout: in training) itself.
    simple = not generator_at and count_of is None
    return recorder(
        rec,
        "torch",
        DRAW,
        api,
        original,
        count_of=count_of,
        takes=takes,
        place=place,
        strict_check=strict_check,
        accelerate=simple,
        draws_if=when if when is None or isinstance(when, Condition) else functools.partial(_draws, when),
    )


# -- the recurrent modules -------------------------------------------------------------
# nn.LSTM/GRU/RNN pass (num_layers, dropout, training) to torch._VF.lstm/gru/rnn_tanh/rnn_relu,
# which drop out after every layer but the last. They are wrapped at the module's forward, not
# at the op: torch.compile refuses these modules and runs them eagerly, but it compiles any
# Python frame entered from there, and a wrapper frame around the bare op would hand the op
# to inductor, which cannot lower it (a traced, compiled LSTM failed, in eval mode too).
def _sequence_data(x: Any) -> Any:
    """The tensor holding a sequence's values: a packed sequence's ``data``, else ``x``."""
    return x.data if isinstance(x, _PackedSequence) else x  # type: ignore[misc]


def _recurrent_draws(module: Any) -> bool:
    return module.num_layers > 1 and _dropout_draws(module.training, module.dropout)


def _recurrent_count(result: Any, args: tuple, kwargs: dict) -> int | None:
    """One value per element of each layer's output but the last's, all shaped like the result's."""
    try:
        output = _sequence_data(result[0])
        if output.is_cuda:  # cuDNN draws one seed for a state of its own: the output's size is no count
            return None
        return (args[0].num_layers - 1) * output.numel()
    except (AttributeError, IndexError, TypeError):
        return None


def _cuda_offset(tensor: Any) -> int | None:
    """The Philox offset of the default generator of a CUDA tensor's device; None for any other."""
    if not isinstance(tensor, _Tensor) or not tensor.is_cuda:
        return None
    return torch.cuda.default_generators[tensor.get_device()].get_offset()


def _recurrent_wrapper(rec: Any, api: str, original: Callable) -> Callable:
    """Record a recurrent module's forward where it drops out between layers."""
    before = threading.local()  # the CUDA offset seen before this thread's call, None on the CPU

    def when(args: tuple, kwargs: dict) -> bool:
        before.offset = None  # first: should a read below raise, place() finds no stale offset
        if not _recurrent_draws(args[0]):
            return False
        before.offset = _cuda_offset(_sequence_data(args[1] if len(args) > 1 else kwargs.get("input")))
        return True

    def place(result: Any) -> tuple[str | None, int | None]:
        output = _sequence_data(result[0])
        where, count = _placed(output)
        if count == 0:  # an empty batch: dropout returns it without drawing
            return None, None
        offset = getattr(before, "offset", None)
        # cuDNN draws a seed for its own dropout state from the device's generator on its
        # first call (and the first after a reseed), then draws from that state: later
        # calls leave the generator where it was, and name no line that did not draw.
        if offset is not None and where != "torch" and _cuda_offset(output) == offset:
            return None, None
        return where, count

    wrapper = _draw_wrapper(rec, api, original, (), when, _recurrent_count, place)
    # On a class, as forward: a plain function, as the one it replaces (torch.compile reads
    # the file of a module's forward); ``__call__`` of a Python wrapper is that function.
    function = getattr(type(wrapper), "__call__", None)  # noqa: B004 (the class's own function, not callable())
    return function if isinstance(function, FunctionType) else wrapper


def _draws(when: Callable[[tuple, dict], bool], args: tuple, kwargs: dict) -> bool:
    try:
        return when(args, kwargs)
    except Exception:  # arguments the function itself will reject: let it say so
        return True


def _current_cuda() -> int:
    # current_device() would initialise CUDA; before that, device 0 is current.
    return torch.cuda.current_device() if torch.cuda.is_initialized() else 0


def _cuda_seed_stream(args: tuple, kwargs: dict, device_at: int | None) -> str:
    device = None
    if device_at is not None:
        device = args[device_at] if len(args) > device_at else kwargs.get("device")
    if isinstance(device, int):
        return _cuda_stream(device)
    if device is not None:
        index = torch.device(device).index
        if index is not None:
            return _cuda_stream(index)
    return _cuda_stream(_current_cuda())


def _generator_method_wrapper(rec: Any, name: str, original: Callable) -> Callable:
    """``torch.Generator.<name>`` recording the default generators' calls only, with their values.

    The method is patched on the (immutable) type, as NumPy's RandomState methods are:
    ``torch.default_generator.manual_seed(3)`` is then recorded from the first call, not
    left to the catch-all, which sees no arguments. The C Recorder in front takes the CPU
    generator's calls; on a build with CUDA a Python wrapper behind it takes the CUDA
    default generators' (``torch.cuda.default_generators[i]``), each on its device's
    stream. Every other generator's call goes straight to the method.
    """
    inner = original
    if name == "seed":  # a generator of the user's seeded from OS entropy: its own event, behind the recorders
        inner = entropy_wrapper(rec, "torch", original, _own_generator_seed)
    if torch.backends.cuda.is_built():

        def cuda_default(args: tuple, kwargs: dict) -> bool:
            return bool(args) and any(args[0] is g for g in _initialised_cuda_generators())

        def device_stream(args: tuple, kwargs: dict) -> str:
            return _cuda_stream(_initialised_cuda_generators().index(args[0]))

        inner = recorder(
            rec,
            "torch.cuda",
            SEED,
            f"torch.cuda.default_generators[i].{name}",
            inner,
            takes=cuda_default,
            seeded=device_stream,
            method=True,
        )
    if name == "set_state":
        return restore_wrapper(
            rec, "torch", f"torch.default_generator.{name}", inner, _cpu_holds, owner=_cpu_generator()
        )
    return recorder(rec, "torch", SEED, f"torch.default_generator.{name}", inner, owner=_cpu_generator())


def _own_generator_seed(args: tuple, kwargs: dict, frame: FrameType) -> tuple[str, FrameType] | None:
    """``torch.Generator().seed()``: a generator that is no default one seeded from OS entropy."""
    if not args or args[0] is _cpu_generator() or any(args[0] is g for g in _initialised_cuda_generators()):
        return None
    return "torch.Generator.seed", frame


def _cpu_holds(state: Any) -> bool:
    """Whether ``state`` is the CPU generator's state now (Dynamo restores it at every compile)."""
    return isinstance(state, _Tensor) and bool(torch.equal(state, _cpu_generator().get_state()))


def _cuda_seed_wrapper(rec: Any, api: str, original: Callable, device_at: int | None) -> Callable:
    """Record a CUDA reseed on the stream of the device it seeds (the current one for *_all)."""
    return recorder(
        rec, "torch.cuda", SEED, api, original, seeded=lambda args, kwargs: _cuda_seed_stream(args, kwargs, device_at)
    )


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
            return bool(torch.equal(_cpu_generator().get_state(), fixed))
        except Exception:  # noqa: BLE001 (a state that cannot be read says nothing)
            return None

    def __init__(self) -> None:
        # Taken before any patch goes on: these are the originals, for references
        # bound before tracing. Only functions that always draw and run no patched
        # code inside, so one call is one event.
        when = _conditions()
        self._apis: dict[int, str] = {}
        self._functions: list[object] = []
        for name in _torch_draw_names():
            if f"torch.{name}" not in when:
                self._remember(getattr(torch, name), f"torch.{name}")
        for name in _tensor_draw_names():
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
            _fill_function_tables()
            self._tables_filled = True
        _skipped_by_dynamo()

    def patches(self, hub: Any) -> Iterable[Patch]:
        when = _conditions()
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
            return lambda original, api: _draw_wrapper(
                hub, api, original, _generator_positions(original, tagged), when.get(api), count_of
            )

        for name in _torch_draw_names():
            original = getattr(torch, name)  # read first: each patch is in place once yielded
            yield from patch(torch, name, f"torch.{name}", draw(name))
            if (
                name in _VF_DRAWS
                and id(original) not in hooked
                and isinstance(vars(variable_functions).get(name), staticmethod)
            ):
                # Held there as a static method: the wrapper is, as well. Only these: torch looks
                # every function a torch-function mode is handed up there (torch.device("meta")
                # knows the factory functions by identity).
                yield variable_functions, name, staticmethod(seen[id(original)])
        recurrent = lambda original, api: _recurrent_wrapper(hub, api, original)  # noqa: E731
        for name in _RECURRENT_MODULES:
            yield from patch(getattr(torch.nn, name), "forward", f"torch.nn.{name} (dropout)", recurrent)
        for name in _tensor_draw_names():
            yield from patch(_Tensor, name, f"torch.Tensor.{name}", draw(name))
        for api in when:
            if api.startswith("torch.nn.functional."):
                name = api.rsplit(".", 1)[1]
                if name == "scaled_dot_product_attention":
                    yield from patch(_F, name, api, draw(None, _attention_count))
        yield from patch(_F, "rrelu_", "torch.rrelu_", draw("rrelu_"))
        for name in _INIT_DRAWS:
            yield from patch(_init, name, f"torch.nn.init.{name}", draw())
        for module_name, name in _PREBOUND:
            module = sys.modules.get(module_name)
            if module is not None:
                yield from patch(module, name, f"torch.{name}", draw(name))
        # The ops themselves, as compiled code calls them: each overload's callable records in
        # place (only there: an OpOverload holds its callable, no namespace to patch).
        if twin_of(torch.rand) is not None:
            for op_name, op in _tagged_overloads():
                name = op_name.split(".")[1]
                yield from in_place(
                    getattr(op, "_op", None),
                    f"torch.ops.{op_name}",
                    lambda twin, api, name=name: _draw_wrapper(  # type: ignore[misc]
                        hub, api, twin, _generator_positions(None, name), when.get(f"torch.{name}")
                    ),
                )
        for name, original in _GENERATOR_METHODS.items():
            yield _Generator, name, _generator_method_wrapper(hub, name, original)

        def cpu_seed(original: Callable, api: str) -> Callable:
            if api.endswith(".set_rng_state"):
                return restore_wrapper(hub, "torch", api, original, _cpu_holds)
            return seed_wrapper(hub, "torch", api, original)

        for module in (torch, torch.random):
            for name in _CPU_SEEDS:
                yield from patch(module, name, f"torch.{name}", cpu_seed)
        for module in (torch.cuda, sys.modules.get("torch.cuda.random")):
            for name in _CUDA_SEEDS if module is not None else ():
                device_at = 1 if name == "set_rng_state" else None
                make = lambda original, api, d=device_at: _cuda_seed_wrapper(hub, api, original, d)  # noqa: E731
                yield from patch(module, name, f"torch.cuda.{name}", make)

    def owners(self) -> Iterable[object]:
        return (_cpu_generator(), *_initialised_cuda_generators())

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
        if name not in _GENERATOR_SEEDS:
            return INTERNAL  # a default generator's reading methods
        owner = getattr(callee, "__self__", None)  # None for 3.12's unbound method: say CPU
        cuda = _initialised_cuda_generators()
        if owner is not None and owner in cuda:
            i = cuda.index(owner)
            return (_cuda_stream(i), SEED, f"torch.cuda.default_generators[{i}].{name}", frame, None)
        return ("torch", SEED, f"torch.default_generator.{name}", frame, None)

    def fingerprint(self) -> Any | None:
        # Proved once (about 0.1 ms), then valid while the generator keeps its implementation.
        generator = _cpu_generator()
        key = (id(generator), _torch_state.impl_address(generator))
        if key != self._view_key:
            self._view, self._view_key = _torch_state.fingerprint(generator), key
        return self._view

    def snapshot(self) -> dict[str, Any]:
        # The CPU generator through its fingerprint (checked at every install and seed, so the
        # one kept is current); CUDA generators, which have none, in full.
        view = self._view if self._view_key is not None else self.fingerprint()
        states: dict[str, Any] = {"torch": view.value if view is not None else _cpu_generator().get_state()}
        if torch.cuda.is_initialized():
            for i, generator in enumerate(torch.cuda.default_generators):
                states[_cuda_stream(i)] = generator.get_state()
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
        states = {"torch": _cpu_generator().get_state()}
        for i, generator in enumerate(_initialised_cuda_generators()):
            states[_cuda_stream(i)] = generator.get_state()
        return states

    def restore(self, states: dict[str, Any]) -> None:
        if "torch" in states:
            _cpu_generator().set_state(states["torch"])
        for i, generator in enumerate(_initialised_cuda_generators()):
            state = states.get(_cuda_stream(i))
            if state is not None:
                generator.set_state(state)

    def same(self, a: Any, b: Any) -> bool:
        if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor):
            return bool(a == b)  # two fingerprints
        return bool(torch.equal(a, b))


# Cached tables of torch functions keyed by identity, filled on first call. Built
# inside a trace they would hold our wrappers: resolve_name(torch.rand) would be
# None and is_tensor_method_or_property(Tensor.uniform_) False for the rest of the
# process. Built once here they hold the originals; later calls are cache hits.
_FUNCTION_TABLES = (
    ("torch.overrides", "get_ignored_functions"),
    ("torch.overrides", "get_default_nowrap_functions"),
    ("torch.overrides", "get_testing_overrides"),
    ("torch.overrides", "_get_overridable_functions"),
    ("torch.overrides", "_get_tensor_methods"),
    # Importing dynamo takes seconds: filled only where the program already has.
    ("torch._dynamo.trace_rules", "get_tensor_method"),
)


_DYNAMO_SKIPS: list[bool] = []


def _skipped_by_dynamo() -> None:
    """Have torch.compile's Dynamo run rngtrace's frames as they are, once it is imported.

    Inside a compiled call Dynamo is handed every Python frame that starts, and would
    compile the catch-all's profile callback or a Python wrapper run from there (frames
    counted as compiled, graph breaks): rngtrace's package joins the directories it skips,
    as numpy's and its own do. Only where the program imported Dynamo already (its import
    takes seconds); a program that imports it inside the trace has it at the next trace.
    """
    rules = sys.modules.get("torch._dynamo.trace_rules")
    add = getattr(rules, "add", None)
    if _DYNAMO_SKIPS or add is None:
        return
    _DYNAMO_SKIPS.append(True)
    try:
        add(__name__.split(".", 1)[0])
    except Exception:  # noqa: BLE001 (another torch: its frames then show as Dynamo's compiles, no more)
        pass


def _fill_function_tables() -> None:
    """Build torch's cached function tables now, from the unpatched functions."""
    for module_name, name in _FUNCTION_TABLES:
        module = sys.modules.get(module_name)
        table = getattr(module, name, None) if module is not None else None
        if table is not None:  # named differently in another torch version: nothing to fill
            table()


def _cpu_generator() -> Any:
    """The CPU generator torch's functions draw from: torch._C's, whatever ``torch.default_generator`` is bound to."""
    return torch._C.default_generator


def _initialised_cuda_generators() -> tuple:
    """CUDA's default generators, without initialising CUDA to find them."""
    if not torch.cuda.is_initialized():
        return ()
    return tuple(torch.cuda.default_generators)
