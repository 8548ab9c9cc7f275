"""rngtrace: find the code that draws from or reseeds your global random streams."""

from __future__ import annotations

from ._errors import GlobalRNGError, RNGDrawWarning
from .isolate import rng_isolate
from .trace import Event, Frame, Statistic, Trace
from .tracer import RngTrace, rng_trace

__version__ = "0.1.0"

__all__ = [
    "Event",
    "Frame",
    "GlobalRNGError",
    "RNGDrawWarning",
    "RngTrace",
    "Statistic",
    "Trace",
    "rng_isolate",
    "rng_trace",
]
