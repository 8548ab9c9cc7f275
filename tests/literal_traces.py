"""Finished Traces built from literal events, for specifying renderers without tracing anything."""

from __future__ import annotations

from typing import Any

from rngtrace import Trace


def ev(
    stream: str, kind: str, api: str, count: int | None, *stack: tuple, detail: str | None = None, thread: int = 1
) -> dict[str, Any]:
    """One event; ``stack`` holds (filename, lineno, function) tuples, innermost first."""
    return {
        "stream": stream,
        "kind": kind,
        "api": api,
        "count": count,
        "stack": stack,
        "detail": detail,
        "thread": thread,
    }


def draw(api: str, count: int | None, *stack: tuple, stream: str | None = None, thread: int = 1) -> dict:
    return ev(stream or api.split(".")[0], "draw", api, count, *stack, thread=thread)


def seed(api: str, value: str | None, *stack: tuple) -> dict:
    return ev(api.split(".")[0], "seed", api, None, *stack, detail=value)


def moved(stream: str, note: str, *stack: tuple) -> dict:
    return ev(stream, "unattributed", f"{stream} state", None, *stack, detail=note)


def build(
    *events: dict,
    overflow: tuple = (),
    notes: tuple = (),
    max_events: int = 100_000,
    origins: tuple = (),
    from_start: bool = False,
    settings: dict | None = None,
    pid: int = 1,
) -> Trace:
    """A finished Trace via ``Trace.from_dict``; ``overflow`` holds (event, calls, values).

    ``origins`` holds (stream, digest, why, index of the next event) for ``pid``: where a stream
    started anew (its state at the start, after a seed); ``from_start`` says the trace saw the
    program start (``rngtrace run``); ``settings`` is torch's flags at the trace's end.
    """
    stacks: list[list] = []

    def sid(stack: tuple) -> int:
        frames = [list(f) for f in stack]
        if frames not in stacks:
            stacks.append(frames)
        return stacks.index(frames)

    raw = [[e["stream"], e["kind"], e["api"], e["count"], sid(e["stack"]), e["thread"], e["detail"]] for e in events]
    over = [[e["stream"], e["kind"], e["api"], sid(e["stack"]), calls, values] for e, calls, values in overflow]
    return Trace.from_dict(
        {
            "format": "rngtrace",
            "version": 2,
            "pid": pid,
            "ppid": 0,
            "origins": [[pid, *origin] for origin in origins],
            "from_start": from_start,
            "settings": settings or {},
            "streams": ["numpy", "random", "torch"],
            "depth": 16,
            "max_events": max_events,
            "dropped": sum(calls for _e, calls, _v in overflow),
            "notes": list(notes),
            "stacks": stacks,
            "threads": {"1": "MainThread", "2": "loader-0"},
            "events": raw,
            "overflow": over,
        }
    )


def events_block(log: str) -> str:
    """The block of a text log that holds the event table (after the findings, where there are some)."""
    return next(block for block in log.split("\n\n") if any(line.startswith("  #") for line in block.splitlines()))
