"""rngtrace: find the code that draws from or reseeds your global random streams."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._errors import GlobalRNGError, LogError, RNGDrawWarning
    from .isolate import rng_isolate
    from .trace import Event, Frame, Statistic, Trace
    from .tracer import RngTrace, rng_trace

# Each public name is imported when first used (PEP 562): a process that imports only a
# part of rngtrace (a traced subprocess starting up, pytest loading an inert plugin) pays
# for that part, not for wrapt and every module behind the public API.
_PUBLIC = {
    "Event": ".trace",
    "Frame": ".trace",
    "Statistic": ".trace",
    "Trace": ".trace",
    "GlobalRNGError": "._errors",
    "LogError": "._errors",
    "RNGDrawWarning": "._errors",
    "RngTrace": ".tracer",
    "rng_trace": ".tracer",
    "rng_isolate": ".isolate",
    # Not imported here: pytest loading the plugin imports this package under its assert
    # rewriting, before the plugin can turn that off for rngtrace's modules.
    "__version__": "._version",
}


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'rngtrace' has no attribute {name!r}")
    import importlib  # here: a traced child's start imports only the modules it names

    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # once: later lookups are plain attribute reads
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_PUBLIC])


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
