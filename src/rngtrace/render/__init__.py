"""Renderers: a finished Trace in, text out. Picked by name from ``RENDERERS``."""

from __future__ import annotations

from typing import Any, Callable

from ..trace import Trace
from . import html, text

RENDERERS: dict[str, Callable[..., str]] = {
    "text": text.render,
    "html": html.render,
}


def render(trace: Trace, fmt: str = "text", **options: Any) -> str:
    """Render ``trace`` in format ``fmt``."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(RENDERERS)}") from None
    return renderer(trace, **options)
