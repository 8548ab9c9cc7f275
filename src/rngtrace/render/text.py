"""The printed draw log (placeholder renderer replaced below)."""
from __future__ import annotations
from ..trace import Trace

def render(trace: Trace, *, color: bool = False, max_lines: int = 60) -> str:
    return "\n".join(f"#{e.index} {e.stream} {e.kind} {e.api} x{e.count} {e.frame} {e.detail or ''}" for e in trace.events)
