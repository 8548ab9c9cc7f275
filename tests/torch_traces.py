"""Helpers shared by the torch test modules (they need no torch themselves)."""

from __future__ import annotations

import sys
from typing import Any

from rngtrace import rng_trace


def next_line() -> int:
    """The line after the caller's: where the call under test is."""
    return sys._getframe(1).f_lineno + 1


def torch_trace(**kwargs: Any) -> Any:
    """A trace of the torch streams alone, printing nothing."""
    return rng_trace(streams="torch", print=False, **kwargs)


def summary(trace: Any) -> list[tuple]:
    """(stream, kind, api, count) of each event."""
    return [(e.stream, e.kind, e.api, e.count) for e in trace.events]


def cudnn_benchmark_trace() -> Any:
    """A trace of one torch draw made while ``torch.backends.cudnn.benchmark`` is True (put back after)."""
    import torch

    before = torch.backends.cudnn.benchmark
    try:
        with rng_trace(print=False, streams="torch") as trace:
            torch.backends.cudnn.benchmark = True
            torch.rand(2)
    finally:
        torch.backends.cudnn.benchmark = before
    return trace
