"""Who made an event, in the user's words, and the fix that fits the library it was made in.

``_yours.call_of`` finds the user's line a draw came from and the user-facing
call made there; ``library_fix`` names the argument that library accepts
(``train_test_split(..., random_state=0)``) or where torch wants its seed. The
findings (``_findings``) are written with these; which file is the user's is
``_paths``' question.
"""

from __future__ import annotations

from ._model import Event, Frame
from ._paths import short_path
from ._yours import call_at, call_of
from .sources import stream as stream_info

#: the argument that makes a library call draw from its own generator, by package
ARGUMENT = {"sklearn": "random_state", "scipy": "random_state"}
TORCH_DATA = "torch/utils/data/"
#: estimator methods: on Python 3.10 a frame names the method without its class
_METHODS = frozenset(
    {
        "fit",
        "fit_predict",
        "fit_transform",
        "partial_fit",
        "predict",
        "transform",
        "score",
        "split",
        "sample",
        "fit_resample",
    }
)


def and_list(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def line_of(frame: Frame) -> str:
    return f"{short_path(frame.filename)}:{frame.lineno}"


def place_of(event: Event) -> str:
    """``acc/devinit.py:10 (init)`` or ``train_test_split (train.py:14)``: the code a draw was made in."""
    call = call_of(event.stack)
    frame = event.frame
    if call is None or call.package is None or frame is None:
        return f"{line_of(frame)} ({frame.function})" if frame else "code with no recorded stack"
    if call.package == "torch" and TORCH_DATA in call.callee.filename.replace("\\", "/"):  # type: ignore[union-attr]
        return f"the DataLoader ({line_of(call.line)})"  # its iterator's methods say less
    return f"{call.name} ({line_of(call.line)})"


def library_fix(event: Event) -> str | None:
    """The argument the user-facing call accepts, or where torch wants its seed; None if unknown."""
    call = call_of(event.stack)
    if call is None or call.callee is None or call.callee.function == "<module>":
        return None
    path = call.callee.filename.replace("\\", "/")
    argument = ARGUMENT.get(call.package or "")
    if argument:
        if "." not in call.name and call.name in _METHODS:  # Python 3.10 names no class (no co_qualname)
            return f"{argument}=0 for the estimator whose {call.name}() runs at {line_of(call.line)}"
        owner = call.name.split(".")[0]  # an estimator's method: the argument goes to its constructor
        return f"{owner}(..., {argument}=0) at {line_of(call.line)}"
    if call.package == "torch":
        if TORCH_DATA in path:
            return f"DataLoader(..., generator=torch.Generator().manual_seed(0)) for the loader at {line_of(call.line)}"
        if call.name.startswith("torch.nn.init") or "torch/nn/init.py" in path:
            return f"pass generator=g to {call.name} at {line_of(call.line)}"
    return None


def isolate(event: Event, home: str = "") -> str:
    """Wrap the call that led to ``event`` in rng_isolate(): made from ``home`` (the seed's file) where it can be."""
    stack = event.stack
    k = next((i for i, frame in enumerate(stack) if frame.filename == home), None)
    call = call_of(stack)
    if k:  # the line in the seed's file that called into the other file
        call = call_at(stack, k)
    if call is None or call.callee is None:
        return "wrap the call in `with rngtrace.rng_isolate():`"
    what = call.name if call.callee.function == "<module>" else f"{call.name}()"  # "the import of x"
    return f"wrap {what} at {line_of(call.line)} in `with rngtrace.rng_isolate():`"


def own_generator(event: Event, seed: str | None) -> str:
    """``rng = np.random.default_rng(666); rng.random()``: the user's draw from a generator of their own.

    "" where the event's stream declares no generator of one's own.
    """
    info = stream_info(event.stream)
    if info is None:
        return ""  # a stream that declared no generator gets no advice, never another library's
    value = seed if seed not in (None, "None") else "seed"
    return info.own_draw(event.api.rsplit(".", 1)[-1], event.api, value)


def model_built(event: Event) -> Frame | None:
    """The user's line that built a torch module whose initial weights ``event`` drew, or None."""
    call = call_of(event.stack)
    if call is None or call.callee is None or call.package != "torch":
        return None
    path = call.callee.filename.replace("\\", "/")
    return call.line if "torch/nn/modules/" in path and call.callee.function.endswith("__init__") else None
