"""What a draw does besides being recorded, as ``on_draw=`` asked: warn once per line, or raise.

The strongest policy any active trace asked for a stream wins. Read only where some
trace asked for more than "log" (``Snapshot.strict``): the usual draw never looks here.
"""

from __future__ import annotations

import os
import warnings
from types import FrameType
from typing import Any

from ._stack import StackTable

_STRENGTH = {"log": 0, "warn": 1, "raise": 2}


class OnDraw:
    """Each stream's strongest ``on_draw=`` among the active traces, and the warnings given so far."""

    def __init__(self) -> None:
        self._policy: dict[str, str] = {}
        self._registry: dict[Any, Any] = {}

    def set(self, sessions: tuple) -> bool:
        """Take the policies of ``sessions``; whether any asks for more than "log"."""
        policy: dict[str, str] = {}
        strict = False
        for s in sessions:
            if s.on_draw != "log":
                strict = True
                for name in s.streams:
                    if _STRENGTH[s.on_draw] > _STRENGTH[policy.get(name, "log")]:
                        policy[name] = s.on_draw
        self._policy = policy
        return strict

    def of(self, stream: str) -> str:
        """The policy for the base stream ``stream``: "log", "warn" or "raise"."""
        return self._policy.get(stream, "log")

    def raise_at(self, stream: str, api: str, frame: FrameType | None, table: StackTable, hint: str) -> None:
        """Raise GlobalRNGError for a draw about to be made from ``frame``."""
        site = table.resolve(table.capture(frame, 1), 1)
        where = f" at {site[0]}" if site else ""
        from ._errors import GlobalRNGError  # here, as RNGDrawWarning below: a child's trace only logs

        raise GlobalRNGError(f"{api} draws from the global {stream} stream{where}; use an explicit generator ({hint})")

    def warn(self, stream: str, api: str, sid: int, table: StackTable, hint: str) -> None:
        """Warn of a draw at stack ``sid``: once per line (one registry, the "default" filter)."""
        site = table.resolve(sid, 1)
        message = f"{api} drew from the global {stream} stream; use {hint}"
        from ._errors import RNGDrawWarning

        if not site:
            warnings.warn(message, RNGDrawWarning, stacklevel=3)  # as record() called it
            return
        f = site[0]
        module = os.path.splitext(os.path.basename(f.filename))[0] or "<unknown>"
        warnings.warn_explicit(message, RNGDrawWarning, f.filename, f.lineno, module, self._registry)

    def new_warnings(self) -> None:
        """Each outermost trace warns afresh."""
        if self._registry:
            self._registry.clear()
