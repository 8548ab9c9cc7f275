"""One module per global stream. Adding a stream means adding one file here.

``SOURCES`` maps each stream name to the module whose import makes it exist;
the source module itself is imported only when that stream is traced, so
``import rngtrace`` imports neither numpy nor torch.
"""

from __future__ import annotations

import importlib
import sys

from ._base import Source

#: stream name -> the library module that must be imported for it to exist
SOURCES: dict[str, str] = {
    "random": "random",
    "numpy": "numpy.random",
    "torch": "torch",
}


def load_source(name: str) -> Source:
    """Create the source for stream ``name``; its library must be imported."""
    qualified = f"{__name__}.{name}"
    # sys.modules first: 3.10's import_module takes the module's import lock every time, and a
    # Ctrl-C landing in that lock's Python weakref callback is printed and lost.
    module = sys.modules.get(qualified) or importlib.import_module(qualified)
    return module.SOURCE_CLASS()


__all__ = ["SOURCES", "Source", "load_source"]
