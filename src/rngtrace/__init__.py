"""rngtrace: find the code that draws from or reseeds your global random streams."""

from __future__ import annotations

# The one place the version is written: pyproject.toml reads it from here. Set
# before the imports, so a module they import can read it.
__version__ = "0.1.0"

from typing import Any

from ._errors import GlobalRNGError, LogError, RNGDrawWarning
from .isolate import rng_isolate
from .trace import Event, Frame, Statistic, Trace
from .tracer import RngTrace, rng_trace


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%rng_trace`` and ``%%rng_trace``: ``%load_ext rngtrace`` calls this."""
    from ._ipython import load_ipython_extension as load  # IPython only when asked for

    load(ipython)


__all__ = [
    "Event",
    "Frame",
    "GlobalRNGError",
    "LogError",
    "RNGDrawWarning",
    "RngTrace",
    "Statistic",
    "Trace",
    "rng_isolate",
    "rng_trace",
]
