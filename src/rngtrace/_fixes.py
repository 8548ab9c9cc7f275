"""Who made an event, in the user's words, and the fix that fits the library it was made in.

``_yours.call_of`` finds the user's line a draw came from and the user-facing
call made there; ``library_fix`` names the argument that library accepts
(``train_test_split(..., random_state=0)``) or where torch wants its seed. An
argument is proposed only to a callable whose signature takes it (``_callables``
reads it from the real object): ``GridSearchCV.fit`` takes no ``random_state``,
the ``RandomForestClassifier(n_estimators=10)`` the user built for it does. The
fixes come in the order a user should try them: seed the library call, draw
from a generator of one's own, ``torch.random.fork_rng()`` around torch-only
code, and ``rngtrace.rng_isolate()`` (the debugging tool as a dependency of the
fixed program) last. The findings (``_findings``) are written with these; which
file is the user's is ``_paths``' question.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from ._callables import ARGUMENT, built_before, resolve, subclasses, takes
from ._model import Event, Frame
from ._paths import short_path
from ._words import stream_base
from ._yours import call_at, call_of, is_yours, user_index
from .sources import stream as stream_info

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
        return _argument_fix(tuple(event.stack), call, argument)
    if call.package == "torch":
        if TORCH_DATA in path:
            return f"DataLoader(..., generator=torch.Generator().manual_seed(0)) for the loader at {line_of(call.line)}"
        if call.name.startswith("torch.nn.init") or "torch/nn/init.py" in path:
            return f"pass generator=g to {call.name} at {line_of(call.line)}"
    return None


@functools.lru_cache(maxsize=1024)  # a loop's draws share one stack: resolved once
def _argument_fix(stack: tuple[Frame, ...], call: Any, argument: str) -> str | None:
    """``train_test_split(..., random_state=0) at train.py:14``, or the constructor of the object the user built
    (``RandomForestClassifier(n_estimators=10, random_state=0) at grid.py:7``): only a callable that takes it."""
    found = resolve(call.callee)
    if found is not None and takes(found[0], argument):  # the call the user made takes it
        return f"{found[0].__name__}(..., {argument}=0) at {line_of(call.line)}"
    u = user_index(stack) or 0
    for classes in _objects(stack[:u]):
        seeded = [c for c in classes if takes(c, argument)]
        built = next(
            (b for f in stack[u:] if is_yours(f) and (b := built_before(f, seeded)) is not None),
            None,
        )
        if built is not None:
            return f"{built.with_argument(argument)} at {short_path(built.filename)}:{built.lineno}"
    if found is None and "." not in call.name and call.name in _METHODS:  # Python 3.10, its module not loaded
        return f"{argument}=0 for the estimator whose {call.name}() runs at {line_of(call.line)}"
    return None


def _objects(inside: Sequence[Frame]) -> list[list[type]]:
    """For each object whose methods ran, innermost first: the classes it can be (its methods' class's subclasses).

    Consecutive methods whose classes share subclasses ran on one object (``BaseEnsemble._make_estimator`` under
    ``BaseForest.fit``: a forest); a class with none in common (``BaseSearchCV.fit``) is the next object out.
    """
    out: list[list[type]] = []
    current: list[type] = []
    for frame in inside:
        found = resolve(frame)
        if found is None or found[1] is None:
            continue
        classes = list(subclasses(found[1]))
        common = [c for c in current if c in classes]
        if common:
            current = common
        else:
            if current:
                out.append(current)
            current = classes
    if current:
        out.append(current)
    return out


def isolate(event: Event, home: str = "") -> str:
    """Wrap the call that led to ``event`` so it cannot move the stream: made from ``home`` (the seed's file) where
    it can be. In the library's own block where its stream declares one (``torch.random.fork_rng()``), else in
    ``rngtrace.rng_isolate()``."""
    stack = event.stack
    k = next((i for i, frame in enumerate(stack) if frame.filename == home), None)
    call = call_of(stack)
    if k:  # the line in the seed's file that called into the other file
        call = call_at(stack, k)
    info = stream_info(stream_base(event.stream))
    block = f"`with {info.fork_call if info is not None and info.fork_call else 'rngtrace.rng_isolate()'}:`"
    if call is None or call.callee is None:
        return f"wrap the call in {block}"
    what = call.name if call.callee.function == "<module>" else f"{call.name}()"  # "the import of x"
    return f"wrap {what} at {line_of(call.line)} in {block}"


def seed_right_before(event: Event) -> str:
    """``np.random.seed(0) right before GridSearchCV.fit() at grid.py:8``: where no argument of the call is known."""
    call = call_of(event.stack)
    info = stream_info(stream_base(event.stream))
    if call is None or info is None or not info.seed_call:
        return isolate(event)
    what = f"{call.name}()" if call.callee is not None and call.callee.function != "<module>" else "the call"
    return f"{info.seed_call} right before {what} at {line_of(call.line)}"


def interleaved_fix(seed: Event, others: list[Event], draw: Event, built: Frame | None, home: str) -> str:
    """The fixes for other code's draws between the user's seed and their draw, the library's own first.

    Each library call seeded (``random_state=0``, ``generator=``) where every one takes it; the user's draw from
    a generator of their own (or the model seeded right before it is built); the calls wrapped in the library's
    fork block or ``rngtrace.rng_isolate()`` last.
    """
    seeded = [library_fix(e) for e in others]
    alternatives = []
    if all(seeded):
        alternatives.append(_listed([fix for fix in seeded if fix]))
    if built is not None:
        value = seed.detail if seed.detail not in (None, "None") else "seed"
        alternatives.append(f"torch.manual_seed({value}) right before building the model at {line_of(built)}")
    elif draw.frame is not None:
        own = own_generator(draw, seed.detail)
        if own:
            alternatives.append(f"draw your own at {line_of(draw.frame)}: {own}")
    if not all(seeded):
        alternatives.append(_listed([fix or isolate(e, home) for fix, e in zip(seeded, others)]))
    return ", or ".join(alternatives)


def _listed(fixes: list[str]) -> str:
    """The distinct fixes, three named and the rest counted."""
    fixes = list(dict.fromkeys(fixes))
    return and_list(fixes[:3]) + (f" (and {len(fixes) - 3} more)" if len(fixes) > 3 else "")


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
