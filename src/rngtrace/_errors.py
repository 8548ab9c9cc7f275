"""The exception and warning rngtrace raises at a draw site."""

from __future__ import annotations


class GlobalRNGError(RuntimeError):
    """A global random stream was about to be drawn from under ``on_draw="raise"``."""


class RNGDrawWarning(UserWarning):
    """A global random stream was drawn from under ``on_draw="warn"``."""


class LogError(ValueError):
    """A saved draw log could not be read; the message says why and what to do."""
