"""Renderers: finished data in, text out.

A Trace is drawn by the renderer picked by name from ``RENDERERS`` ("text",
the log rng_trace prints; "html", the report); a TraceDiff from
``rngtrace.diff.compare`` by ``render_diff``. The data never imports these:
the faces (rng_trace, the command line, the Jupyter magics) call them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..diff import TraceDiff
from ..trace import Trace
from . import diff_text, html, text

RENDERERS: dict[str, Callable[..., str]] = {
    "text": text.render,
    "html": html.render,
}


def render(trace: Trace, fmt: str = "text", **options: Any) -> str:
    """Render ``trace`` in format ``fmt`` ("text" or "html"), passing ``options`` to its renderer."""
    try:
        renderer = RENDERERS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r}; choose from {', '.join(RENDERERS)}") from None
    return renderer(trace, **options)


def render_diff(diff: TraceDiff, *, names: tuple[str, str] = ("A", "B"), color: bool = False) -> str:
    """Render the comparison ``diff`` as text; ``names`` say where A and B came from."""
    return diff_text.render(diff, names=names, color=color)


__all__ = ["RENDERERS", "render", "render_diff"]
