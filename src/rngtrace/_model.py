"""The recorded data's value classes: Frame, Window, Event, Statistic, Process, Finding.

Small and frozen, as tracemalloc's: the raw store (``_store``) keeps raw tuples
and makes these from them when someone reads.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The raw event's vocabulary lives in _kinds (what the writers import); these are its names here too.
from ._kinds import DRAW as DRAW
from ._kinds import ENTROPY as ENTROPY
from ._kinds import KINDS as KINDS
from ._kinds import NO_STACK as NO_STACK
from ._kinds import RESTORE as RESTORE
from ._kinds import SEED as SEED
from ._kinds import UNATTRIBUTED as UNATTRIBUTED
from ._kinds import RawEvent as RawEvent
from ._kinds import moved_parts as moved_parts
from ._kinds import restore_parts
from ._kinds import used_stacks as used_stacks

FORMAT = "rngtrace"
FORMAT_VERSION = 2  # 2: the processes a trace saw (1 still loads)

#: how the end-of-block check's notes end: the window then closes at the block's end, not at a call
#: the seeding functions that draw their seed from OS entropy when given none
ENTROPY_SEEDERS = frozenset({"seed", "seed_all"})
BLOCK_END = "noticed when the block ended"


@dataclass(frozen=True)
class Frame:
    """One line of a stack: where a call was made."""

    filename: str
    lineno: int
    function: str

    def __str__(self) -> str:
        return f"{self.filename}:{self.lineno} in {self.function}"


@dataclass(frozen=True)
class Window:
    """Where an unattributed move happened: after one event of its stream, before the call that noticed it.

    Nothing recorded the move, so no line is blamed: the window is bounded by the
    stream's last event before it and by the call (or the block's end) that found
    the stream moved. Events are named by index, so a window never holds another
    Event and a long run of moves stays a flat list.
    """

    #: the index of the stream's last event before the move; None: none since the trace began
    after: int | None
    #: that event's calling line (for an unattributed one: where it was noticed)
    after_frame: Frame | None
    #: the index of the event the noticing call made; None where it made none (the block's end)
    noticed_by: int | None
    #: the stack of the call, or of the block's end, where the move was noticed
    noticed: tuple[Frame, ...]
    #: how the move was noticed, as recorded ("moved since the previous recorded event; noticed before ...")
    note: str | None

    @property
    def at_end(self) -> bool:
        """Whether the end-of-block check noticed the move, rather than a recorded call."""
        return self.note is not None and self.note.endswith(BLOCK_END)

    @property
    def appeared(self) -> bool:
        """Whether the stream itself appeared (a CUDA device's generator) rather than moved."""
        return self.note is not None and self.note.startswith("appeared")

    def __str__(self) -> str:
        start = "the start of the trace" if self.after is None else _place(self.after, self.after_frame)
        noticed = self.noticed[0] if self.noticed else None
        if self.noticed_by is not None:
            end = _place(self.noticed_by, noticed)
        elif self.at_end:
            end = f"the end of the block ({noticed})" if noticed else "the end of the block"
        else:
            end = f"the call at {noticed}" if noticed else "a call from C code"
        return f"between {start} and {end}" + (f": {self.note}" if self.note else "")


def _place(index: int, frame: Frame | None) -> str:
    return f"#{index} ({frame})" if frame is not None else f"#{index}"


@dataclass(frozen=True)
class Event:
    """One draw, reseed or unexplained move of a global stream."""

    index: int
    stream: str
    kind: str
    api: str
    count: int | None
    stack: tuple[Frame, ...]  # empty for an unattributed move: no recorded call made it
    thread: str
    pid: int
    #: the seed value for a seed; for an unattributed move, its window in words
    detail: str | None = None
    #: for an unattributed move: the events and lines around it (``detail`` says the same in words)
    window: Window | None = None

    @property
    def frame(self) -> Frame | None:
        """The frame that called the random API (innermost), or None."""
        return self.stack[0] if self.stack else None

    @property
    def compiled(self) -> bool:
        """Whether the call was made by code torch.compile compiled (Inductor's seeds, say), not by a line of Python."""
        return any(
            # The wrapper torch.compile puts around what it compiles (not a disabled region's);
            # 3.10 records no qualified names.
            (f.function.startswith("_TorchDynamoContext.__call__") or f.function == "compile_wrapper")
            and f.filename.replace("\\", "/").endswith("torch/_dynamo/eval_frame.py")
            for f in self.stack
        )

    @property
    def saved_at(self) -> tuple[int, Frame] | None:
        """For a restore: (how many of its stream's events came since the state was saved, the line that saved it)."""
        parts = restore_parts(self.detail) if self.kind == RESTORE else None
        if parts is None:
            return None
        back, filename, lineno, function = parts
        return back, Frame(filename, lineno, function)

    @property
    def from_entropy(self) -> bool:
        """A seed given no value by a function that then seeds from OS entropy (``random.seed()``).

        Only the ``seed`` functions do: a restore (``set_state``, ``setstate``) or
        ``manual_seed`` the catch-all recorded without its argument is no entropy seed.
        """
        return self.kind == SEED and self.detail in (None, "None") and self.api.rsplit(".", 1)[-1] in ENTROPY_SEEDERS


@dataclass(frozen=True)
class Statistic:
    """Events grouped by call site: how many calls, how many values drawn."""

    stream: str
    kind: str
    api: str
    stack: tuple[Frame, ...]
    calls: int
    values: int

    @property
    def frame(self) -> Frame | None:
        return self.stack[0] if self.stack else None


@dataclass(frozen=True)
class Process:
    """One process a trace saw: the one that traced, and each child whose events were merged in."""

    pid: int
    ppid: int
    #: how it started: "traced" (the process that ran the block), "fork", "spawn", ...
    start: str
    #: what it was, where a library says so ("DataLoader worker 1", "pool worker"), else None
    role: str | None
    #: how it ended: "normal", "exit code N", "killed by signal N", "ended abruptly"; None while running
    exit: str | None
    #: its events, dropped ones included
    events: int


#: a finding's level: this run's numbers depend on something the user's seeds do not govern
CAUSE = "cause"
#: reproducible as run, but any change before it moves the numbers
RISK = "risk"
LEVELS = (CAUSE, RISK)


@dataclass(frozen=True)
class Finding:
    """A conclusion drawn from the events: what made the run irreproducible, or may, and what to change."""

    kind: str
    stream: str
    pids: tuple[int, ...]
    message: str
    #: indexes into ``trace.events`` of the events it rests on
    events: tuple[int, ...]
    fix: str = ""
    #: ``CAUSE`` (the numbers depend on something the seeds do not govern) or ``RISK`` (reproducible as run)
    level: str = CAUSE


def build_events(
    raws: list[RawEvent],
    stacks: dict[int, tuple[Frame, ...]],
    threads: dict[int, str],
    pid: int,
    pids: dict[int, int] | None = None,
) -> list[Event]:
    """Events from raw tuples; each unattributed move gets its window, from the order around it.

    ``pids``: thread key -> pid for the threads of merged child processes (the rest are ``pid``'s).
    """
    pids = pids or {}
    windows = move_windows(raws, stacks, pids)
    events = []
    for i, (s, k, a, c, sid, t, d) in enumerate(raws):
        window = windows.get(i)
        p = pids.get(t, pid)
        if window is not None:
            events.append(Event(i, s, k, a, c, (), threads.get(t, str(t)), p, str(window), window))
        else:
            events.append(Event(i, s, k, a, c, stacks.get(sid, ()), threads.get(t, str(t)), p, d))
    return events


def move_windows(
    raws: list[RawEvent], stacks: dict[int, tuple[Frame, ...]], pids: dict[int, int] | None = None
) -> dict[int, Window]:
    """raw index -> Window, for every unattributed move in ``raws``.

    A window opens at the last event of the move's stream before it (a seed of its
    library counts: torch.manual_seed reseeds every device). It closes at the
    event the noticing call made, the next one its thread recorded when that has
    the noticing stack; a call that made none (the block's end) closes it by line.
    """
    if not any(raw[1] == UNATTRIBUTED for raw in raws):
        return {}
    found: dict[int, list[Any]] = {}  # index -> [after, its line, noticing stack, note, noticing event]
    last: dict[str, int] = {}  # stream -> index of its latest event so far
    last_seed: dict[str, int] = {}  # library -> index of its latest seed so far
    waiting: dict[Any, list[int]] = {}  # thread -> its moves whose noticing call's event may come next
    lines: list[Frame | None] = []  # per index: the line that stands for that event in a later window
    for i, raw in enumerate(raws):
        stream, kind, thread = raw[0], raw[1], raw[5]
        if pids and thread in pids:
            stream = (pids[thread], stream)  # a child's stream moves apart from the parent's
        if kind == UNATTRIBUTED:
            note, noticed = moved_parts(raw)
            frames = stacks.get(noticed, ())
            base = _base_of(stream)
            after = max(last.get(stream, -1), last_seed.get(base, -1) if base != stream else -1)
            found[i] = [after, lines[after] if after >= 0 else None, frames, note, None]
            waiting.setdefault(thread, []).append(i)
        else:
            frames = stacks.get(raw[4], ())
            # The thread's next event is the noticing call's own when it was made at the noticing stack.
            for j in waiting.pop(thread, ()):
                if frames and found[j][2] == frames:
                    found[j][4] = i
            if kind == SEED:
                last_seed[stream] = i
        lines.append(frames[0] if frames else None)
        last[stream] = i
    return {
        i: Window(after if after >= 0 else None, line, noticed_by, frames, note)
        for i, (after, line, frames, note, noticed_by) in found.items()
    }


def _base_of(stream: Any) -> Any:
    """The library stream of a (sub-)stream name, or of a (pid, name) pair."""
    if stream.__class__ is tuple:
        return (stream[0], stream[1].split(".", 1)[0])
    return stream.split(".", 1)[0]
