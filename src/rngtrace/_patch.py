"""Setting and undoing one attribute, on modules, classes and extension types alike."""

from __future__ import annotations

import ctypes
import gc
from typing import Any

INHERITED = object()  # the attribute lived on a base class: undo by deleting ours


def set_attribute(parent: Any, attr: str, value: Any) -> None:
    """setattr, also on an extension type (numpy's RandomState) that refuses it."""
    if value is INHERITED:
        delattr(parent, attr)
        return
    try:
        setattr(parent, attr, value)
    except TypeError:
        if not isinstance(parent, type):
            raise
        # The type's namespace is an ordinary dict behind a read-only proxy;
        # PyType_Modified drops the method caches that remember the old entry.
        namespace = gc.get_referents(parent.__dict__)[0]
        namespace[attr] = value
        ctypes.pythonapi.PyType_Modified(ctypes.py_object(parent))
