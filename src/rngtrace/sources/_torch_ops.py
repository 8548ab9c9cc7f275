"""Which of torch's functions draw: the aten operators tagged ``nondeterministic_seeded`` and their conditions.

Found once per process. Also torch's identity-keyed function tables, filled before any
patch goes on, and Dynamo told to leave rngtrace's frames alone.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable, Iterable
from typing import Any

import torch
import torch.nn.functional as _F

from ._base import Condition

_Tensor = torch.Tensor

# Dirichlet sample through them.
_PRIVATE_DRAWS = frozenset({"_standard_gamma", "_sample_dirichlet"})
# Ops that draw only for dropout between layers, reached through torch._VF: not plain
# tagged draws. Their draws are recorded at the modules' forward (see recurrent_wrapper);
# a direct call of the op is left to the state checks.
_RECURRENT = ("lstm", "gru", "rnn_tanh", "rnn_relu")
RECURRENT_MODULES = ("LSTM", "GRU", "RNN")

# The ops nn.functional's dropout family reaches through torch._VF (not through torch's attributes).
VF_DRAWS = frozenset(
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
INIT_DRAWS = (
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
PREBOUND = (("torch.utils.data.dataset", "randperm"),)


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
def tagged_overloads() -> tuple[tuple[str, Any], ...]:
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


def torch_draw_names() -> list[str]:
    """Names on ``torch`` of tagged operators, without private and module attributes."""
    builtin = type(torch.rand)
    return [
        name
        for name in sorted(_tagged())
        if (not name.startswith("_") or name in _PRIVATE_DRAWS)
        and name not in _RECURRENT
        and type(getattr(torch, name, None)) is builtin
    ]


def tensor_draw_names() -> list[str]:
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


def dropout_draws(train: Any, p: Any) -> bool:
    return Condition.TESTS["dropout"](train, p)


def conditions() -> dict[str, Condition]:
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


def generator_positions(fn: Any, tagged_name: str | None) -> tuple[int, ...]:
    if tagged_name is not None:
        return _tagged().get(tagged_name, ())
    index, _, _ = _arg(fn, "generator", -1, None)
    return (index,) if index >= 0 else ()


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


def skipped_by_dynamo() -> None:
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


def fill_function_tables() -> None:
    """Build torch's cached function tables now, from the unpatched functions."""
    for module_name, name in _FUNCTION_TABLES:
        module = sys.modules.get(module_name)
        table = getattr(module, name, None) if module is not None else None
        if table is not None:  # named differently in another torch version: nothing to fill
            table()
