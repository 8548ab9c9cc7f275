"""The wrappers that record torch's draws and reseeds, and where each one landed (CPU or a CUDA device)."""

from __future__ import annotations

import functools
import importlib
import threading
from collections.abc import Callable
from types import FrameType, FunctionType
from typing import Any

import torch
import torch.nn.utils.rnn as _rnn_utils

from .._errors import GlobalRNGError
from .._kinds import DRAW, SEED
from ._base import Condition, getter_wrapper, recorder, restore_wrapper
from ._entropy import entropy_wrapper
from ._torch_ops import dropout_draws

_Generator = torch.Generator
_Tensor = torch.Tensor
_Module = torch.nn.Module
_PackedSequence = _rnn_utils.PackedSequence
_fake_tensor = importlib.import_module("torch._subclasses.fake_tensor")
_FakeTensor = _fake_tensor.FakeTensor
# A fake tensor, or a wrapper of one (AOTAutograd's FunctionalTensor): a compile tracing, drawing nothing.
_is_fake = getattr(_fake_tensor, "is_fake", lambda t: False)

# Methods of a default generator that move it; its other methods only read it.
GENERATOR_SEEDS = frozenset({"manual_seed", "seed", "set_state", "set_offset", "graphsafe_set_state"})
# Their originals, taken at import (before any patch goes on).
GENERATOR_METHODS = {name: vars(_Generator)[name] for name in sorted(GENERATOR_SEEDS) if name in vars(_Generator)}
#: the original getter: a restore's check reads the state without handing it out (no digest)
_GET_STATE = vars(_Generator)["get_state"]


# -- where a draw landed -----------------------------------------------------------
_CUDA_STREAMS: list[str] = []


def cuda_stream(index: int) -> str:
    while len(_CUDA_STREAMS) <= index:
        _CUDA_STREAMS.append(f"torch.cuda:{len(_CUDA_STREAMS)}")
    return _CUDA_STREAMS[index]


def placed(result: Any) -> tuple[str | None, int | None]:
    """(stream, values drawn) for a result; stream None for a meta or fake tensor, which draws nothing."""
    r = result[0] if type(result) is tuple else result
    if isinstance(r, _FakeTensor) or (type(r) is not _Tensor and _is_fake(r)):
        return None, None  # torch.compile tracing: no generator moved
    try:
        if r.is_cpu:  # the usual case first: one property read
            return "torch", r.numel()
        if r.is_cuda:
            return cuda_stream(r.get_device()), r.numel()
        if r.is_meta:
            return None, None
        return "torch", r.numel()
    except (AttributeError, RuntimeError, TypeError):  # not a tensor, or a nested one
        return "torch", None


def attention_count(result: Any, args: tuple, kwargs: dict) -> int | None:
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
            first = sequence_data(args[1])
        device = first.device if isinstance(first, _Tensor) else torch.get_default_device()
    device = torch.device(device)
    if device.type == "meta":
        return None
    if device.type == "cuda":
        return cuda_stream(device.index if device.index is not None else _current_cuda())
    return "torch"


def _is_default(generator: Any) -> bool:
    return generator is cpu_generator() or generator in torch.cuda.default_generators


# -- wrappers ------------------------------------------------------------------------
def draw_wrapper(
    rec: Any,
    api: str,
    original: Callable,
    generator_at: tuple[int, ...] = (),
    when: Callable[[tuple, dict], bool] | None = None,
    count_of: Callable[[Any, tuple, dict], int | None] | None = None,
    place: Callable[[Any], tuple[str | None, int | None]] = placed,
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
def sequence_data(x: Any) -> Any:
    """The tensor holding a sequence's values: a packed sequence's ``data``, else ``x``."""
    return x.data if isinstance(x, _PackedSequence) else x  # type: ignore[misc]


def _recurrent_draws(module: Any) -> bool:
    return module.num_layers > 1 and dropout_draws(module.training, module.dropout)


def _recurrent_count(result: Any, args: tuple, kwargs: dict) -> int | None:
    """One value per element of each layer's output but the last's, all shaped like the result's."""
    try:
        output = sequence_data(result[0])
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


def recurrent_wrapper(rec: Any, api: str, original: Callable) -> Callable:
    """Record a recurrent module's forward where it drops out between layers."""
    before = threading.local()  # the CUDA offset seen before this thread's call, None on the CPU

    def when(args: tuple, kwargs: dict) -> bool:
        before.offset = None  # first: should a read below raise, place() finds no stale offset
        if not _recurrent_draws(args[0]):
            return False
        before.offset = _cuda_offset(sequence_data(args[1] if len(args) > 1 else kwargs.get("input")))
        return True

    def place(result: Any) -> tuple[str | None, int | None]:
        output = sequence_data(result[0])
        where, count = placed(output)
        if count == 0:  # an empty batch: dropout returns it without drawing
            return None, None
        offset = getattr(before, "offset", None)
        # cuDNN draws a seed for its own dropout state from the device's generator on its
        # first call (and the first after a reseed), then draws from that state: later
        # calls leave the generator where it was, and name no line that did not draw.
        if offset is not None and where != "torch" and _cuda_offset(output) == offset:
            return None, None
        return where, count

    wrapper = draw_wrapper(rec, api, original, (), when, _recurrent_count, place)
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
        return cuda_stream(device)
    if device is not None:
        index = torch.device(device).index
        if index is not None:
            return cuda_stream(index)
    return cuda_stream(_current_cuda())


def generator_method_wrapper(rec: Any, name: str, original: Callable) -> Callable:
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
            return bool(args) and any(args[0] is g for g in initialised_cuda_generators())

        def device_stream(args: tuple, kwargs: dict) -> str:
            return cuda_stream(initialised_cuda_generators().index(args[0]))

        def put_back(args: tuple, kwargs: dict) -> str | None:
            """A CUDA default generator's state handed out earlier (fork_rng's), put back: a restore."""
            return handed(rec, device_stream, args, kwargs, 1)

        inner = recorder(
            rec,
            "torch.cuda",
            SEED,
            f"torch.cuda.default_generators[i].{name}",
            inner,
            takes=cuda_default,
            seeded=device_stream,
            method=True,
            restored=put_back if name == "set_state" else None,
        )
    if name == "set_state":
        api = f"torch.default_generator.{name}"
        return restore_wrapper(rec, "torch", api, inner, cpu_holds, cpu_generator(), state_digest)
    return recorder(rec, "torch", SEED, f"torch.default_generator.{name}", inner, owner=cpu_generator())


def state_getter(rec: Any) -> Callable:
    """``torch.Generator.get_state`` remembering the states the default generators hand out (``fork_rng``'s)."""

    def stream_of(args: tuple) -> str | None:
        if not args:
            return None
        if args[0] is cpu_generator():
            return "torch"
        cuda = initialised_cuda_generators()
        return next((cuda_stream(i) for i, g in enumerate(cuda) if args[0] is g), None)

    return getter_wrapper(rec, _GET_STATE, stream_of, state_digest)


def state_digest(state: Any) -> int:
    """A digest of a generator's ``get_state()`` tensor: its bytes, hashed."""
    if not isinstance(state, _Tensor):
        raise TypeError(f"not a generator's state: {type(state).__name__}")
    return hash(state.detach().cpu().numpy().tobytes())


def _own_generator_seed(args: tuple, kwargs: dict, frame: FrameType) -> tuple[str, FrameType] | None:
    """``torch.Generator().seed()``: a generator that is no default one seeded from OS entropy."""
    if not args or args[0] is cpu_generator() or any(args[0] is g for g in initialised_cuda_generators()):
        return None
    return "torch.Generator.seed", frame


def cpu_holds(state: Any) -> bool:
    """Whether ``state`` is the CPU generator's state now (Dynamo restores it at every compile)."""
    return isinstance(state, _Tensor) and bool(torch.equal(state, _GET_STATE(cpu_generator())))


def cuda_seed_wrapper(rec: Any, api: str, original: Callable, device_at: int | None) -> Callable:
    """Record a CUDA reseed on the stream of the device it seeds (the current one for *_all).

    ``set_rng_state`` (``set_rng_state_all``) of states handed out earlier is a restore.
    """
    where = lambda args, kwargs: _cuda_seed_stream(args, kwargs, device_at)  # noqa: E731
    restored: Callable[[tuple, dict], str | None] | None = None
    if api.endswith(".set_rng_state"):
        restored = lambda args, kwargs: handed(rec, where, args, kwargs, 0)  # noqa: E731
    elif api.endswith(".set_rng_state_all"):
        restored = lambda args, kwargs: _all_handed(rec, args, kwargs)  # noqa: E731
    return recorder(rec, "torch.cuda", SEED, api, original, seeded=where, restored=restored)


def handed(rec: Any, where: Callable[[tuple, dict], str], args: tuple, kwargs: dict, at: int) -> str | None:
    """The restore's detail where the state argument (``args[at]``, else the first keyword's) was handed out
    on its stream; None where it was not."""
    try:
        state = args[at] if len(args) > at else next(iter(kwargs.values()))
        return rec.handed.restore_detail(where(args, kwargs), state_digest(state))
    except Exception:  # noqa: BLE001 (a state it cannot digest is recorded as the seed it may be)
        return None


def _all_handed(rec: Any, args: tuple, kwargs: dict) -> str | None:
    """``set_rng_state_all(states)``: the first device's restore detail where each device's state was handed
    out on that device's stream; None where one was not."""
    try:
        states = list(args[0] if args else next(iter(kwargs.values())))
        details = [rec.handed.restore_detail(cuda_stream(i), state_digest(s)) for i, s in enumerate(states)]
        return details[0] if details and all(d is not None for d in details) else None
    except Exception:  # noqa: BLE001
        return None


def cpu_generator() -> Any:
    """The CPU generator torch's functions draw from: torch._C's, whatever ``torch.default_generator`` is bound to."""
    return torch._C.default_generator


def initialised_cuda_generators() -> tuple:
    """CUDA's default generators, without initialising CUDA to find them."""
    if not torch.cuda.is_initialized():
        return ()
    return tuple(torch.cuda.default_generators)
