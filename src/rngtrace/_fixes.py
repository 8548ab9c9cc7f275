"""Who made an event, in the user's words, and the fix that fits the library it was made in.

``call_of`` finds the user's line a draw came from and the user-facing call made
there (the outermost library frame, past generic wrappers and private base
classes); ``library_fix`` names the argument that library accepts
(``train_test_split(..., random_state=0)``) or where torch wants its seed. The
findings (``_findings``) are written with these; which file is the user's is
``_paths``' question.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ._paths import is_user_file, package_of, short_path
from ._model import Event, Frame
from .sources import stream as stream_info

#: how a library's generic call wrappers are named: the user-facing call is the frame below them
_WRAPPERS = frozenset({"wrapper", "inner", "wrapped", "decorator", "_wrapper", "decorate_context",
                       "_call_impl", "_wrapped_call_impl", "__call__"})
#: the import system's own frames: a package drawing as it is imported is named by its import
_IMPORT_MACHINERY = ("<frozen importlib._bootstrap", "<frozen importlib._bootstrap_external")
#: the argument that makes a library call draw from its own generator, by package
ARGUMENT = {"sklearn": "random_state", "scipy": "random_state"}
TORCH_DATA = "torch/utils/data/"
#: estimator methods: on Python 3.10 a frame names the method without its class
_METHODS = frozenset({"fit", "fit_predict", "fit_transform", "partial_fit", "predict", "transform", "score",
                      "split", "sample", "fit_resample"})

@dataclass(frozen=True)
class Call:
    """Where a draw entered other code: the user's line and the call it made there."""

    line: Frame  # the user's line that made the call
    callee: Frame | None  # the outermost library frame it called (None: the user's line drew itself)
    package: str | None  # the installed package called, or None for another of the user's files

    @property
    def name(self) -> str:
        """``train_test_split``, ``KMeans.fit``, ``Linear`` (a constructor), or the function drawn in."""
        frame = self.callee or self.line
        if self.callee is not None and self.callee.function == "<module>":  # a package drew as it was imported
            return f"the import of {self.package or short_path(self.callee.filename)}"
        parts = [p for p in frame.function.split(".") if p not in ("<locals>", "")] or [frame.function or "?"]
        if parts[-1] == "__init__" and len(parts) > 1:
            return parts[-2]
        return ".".join(parts[-2:])


def user_index(stack: Sequence[Frame]) -> int | None:
    """The position of the first (innermost) frame of ``stack`` in the user's own code, or None."""
    for i, frame in enumerate(stack):
        if is_user_file(frame.filename):
            return i
    return None


def call_of(stack: Sequence[Frame]) -> Call | None:
    """The user's line an event came from and the library call made there; None without a user frame."""
    u = user_index(stack)
    if u is None:
        return None
    if u == 0:
        return Call(stack[0], None, None)
    callee = _callee(stack[:u])
    return Call(stack[u], callee, package_of(callee.filename))


def _callee(inside: Sequence[Frame]) -> Frame:
    """The user-facing call among the frames a user's line called into (innermost first, not empty)."""
    # Outermost first: the first frame that is not a generic wrapper; where that is a private base
    # class's method (_BaseKMeans.fit_predict), the public class's method it calls names the call better.
    frames = [f for f in reversed(inside) if f.function.rsplit(".", 1)[-1] not in _WRAPPERS
              and not f.filename.startswith(_IMPORT_MACHINERY)] or [inside[-1]]
    callee = frames[0]
    if _private_owner(callee):
        package = package_of(callee.filename)
        callee = next((f for f in frames[1:] if "." in f.function and not _private_owner(f)
                       and package_of(f.filename) == package), callee)
    return callee


def _private_owner(frame: Frame) -> bool:
    """Whether ``frame`` is a method of a class the user does not name (``_BaseKMeans``, ``BaseShuffleSplit``)."""
    parts = [p for p in frame.function.split(".") if p != "<locals>"]
    return len(parts) > 1 and parts[-2].startswith(("_", "Base"))


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
        callee = _callee(stack[:k])
        call = Call(stack[k], callee, package_of(callee.filename))
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
