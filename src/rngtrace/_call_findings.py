"""The findings about how a library was called or set: ``global-generator`` and ``settings``.

- ``global-generator``: a call that takes a generator (``generator=``,
  ``random_state=``) left to draw from the global stream, named once per call;
- ``settings``: torch flags that make results differ run to run (read at the trace's end).

Listed, in their rank, in ``_findings.KINDS``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._duplicates import in_which
from ._fixes import ARGUMENT, TORCH_DATA, and_list, library_fix, line_of, seed_right_before
from ._model import DRAW, RISK, Event, Finding, Frame
from ._rows import alike, per_stack, walk
from ._store import RawStore
from ._words import stream_base
from ._yours import call_of

#: torch draws from user code that take generator=, named by global-generator
_TAKES_GENERATOR = ("torch.nn.init.", "torch.randperm")


def named_lines(events: Sequence[Event], found: list[Finding]) -> set[tuple[str, int]]:
    """The user's lines the findings so far named: a later kind does not name them again."""
    return {
        (call.line.filename, call.line.lineno)
        for f in found
        for i in f.events
        if (call := call_of(events[i].stack)) is not None
    }


def global_generator(trace: RawStore, events: Sequence[Event], named: set[tuple[str, int]]) -> list[Finding]:
    """Calls that take a generator but drew from the global stream: once per user line."""
    groups: dict[tuple, list[Event]] = {}
    generator_call = per_stack(_generator_call)
    if not any(_unnamed_call(generator_call(e), named) for e in alike(events, (DRAW,))):
        return []  # no draw of any line was such a call: the rows are not walked one by one
    for i, e in walk(events, (DRAW,)):
        what = generator_call(e)
        if _unnamed_call(what, named):
            groups.setdefault(what, []).append(events[i])
    # One finding per call and stream, naming every line it was made at: 50 lines calling resample()
    # are one thing to change, said once.
    calls: dict[tuple, dict[Frame, list[Event]]] = {}
    for (what, line, stream), group in groups.items():
        if what == "loader" and not any("sampler.py" in f.filename for e in group for f in e.stack):
            continue  # no shuffle: only the workers' base seed was drawn (interleaved's business, if any)
        calls.setdefault((what, stream), {})[line] = group
    return [_generator_finding(trace, what, lines) for (what, _stream), lines in calls.items()]


def _unnamed_call(what: tuple | None, named: set[tuple[str, int]]) -> bool:
    """Whether ``what`` (``_generator_call``'s) is a call at a line no earlier finding named."""
    return what is not None and (what[1].filename, what[1].lineno) not in named


def _generator_call(event: Event) -> tuple | None:
    """(what, user's line, stream) for a draw from a call that takes a generator, else None."""
    call = call_of(event.stack)
    if call is None:
        return None
    if call.callee is None:
        if event.api.startswith(_TAKES_GENERATOR):
            return (event.api, call.line, event.stream)
        return None
    path = call.callee.filename.replace("\\", "/")
    if call.package == "torch" and TORCH_DATA in path:
        return ("loader", call.line, event.stream)
    if call.package in ARGUMENT:
        return (call.name, call.line, event.stream)
    return None


def _generator_finding(trace: RawStore, what: str, lines: dict[Frame, list[Event]]) -> Finding:
    group = [e for events in lines.values() for e in events]
    group.sort(key=lambda e: e.index)
    stream = group[0].stream
    shown = [line_of(line) for line in list(lines)[:2]]
    more = len(lines) - len(shown)
    at = and_list(shown + ([f"{more} more line{'s' * (more > 1)}"] if more else []))
    at += in_which(trace, tuple(e.pid for e in group))
    if what == "loader":
        message = (
            f"the DataLoader iterated at {at} shuffles with torch's global generator (no "
            "generator=): its order depends on every torch draw before it"
        )
        fix = "DataLoader(..., generator=torch.Generator().manual_seed(0))"
    elif what.startswith("torch."):
        message = f"{what} at {at} draws from torch's global generator (no generator=)"
        fix = f"g = torch.Generator().manual_seed(0); {what}(..., generator=g)"
    else:
        message = (
            f"{what} at {at} draws from {'NumPy' if stream == 'numpy' else stream}'s global "
            f"stream (no random_state=): its result changes with every draw before it"
        )
        fix = library_fix(group[0]) or seed_right_before(group[0])  # never an argument the call may not take
        if len(lines) > 1:
            fix = fix.rsplit(" at ", 1)[0] + " at each"
    pids = tuple(dict.fromkeys(e.pid for e in group))
    return Finding("global-generator", stream, pids, message, tuple(e.index for e in group), fix, RISK)


# -- settings ------------------------------------------------------------------------------

#: what each torch flag does to a run, and the line that sets it right
_SETTINGS = {
    "cudnn.benchmark": (
        "torch.backends.cudnn.benchmark is True: cuDNN picks convolution algorithms by timing "
        "them, so results can differ run to run even with every seed set",
        "torch.backends.cudnn.benchmark = False",
    ),
    "nondeterministic": (
        "CUDA was used with torch.backends.cudnn.deterministic False and "
        "torch.use_deterministic_algorithms off: convolutions and some reductions differ run "
        "to run even with every seed set",
        "torch.use_deterministic_algorithms(True) (with CUBLAS_WORKSPACE_CONFIG=:4096:8), or "
        "torch.backends.cudnn.deterministic = True",
    ),
}


def settings(trace: RawStore, events: Sequence[Event]) -> list[Finding]:
    """Torch flags read when the trace ended, where torch was drawn from or seeded."""
    flags = trace.settings
    if not flags or not _torch_used(trace, events):
        return []
    found = []
    if flags.get("cudnn.benchmark"):
        message, fix = _SETTINGS["cudnn.benchmark"]
        found.append(Finding("settings", "torch", (trace.pid,), message, (), fix))
    if flags.get("cuda") and not flags.get("cudnn.deterministic") and not flags.get("deterministic_algorithms"):
        message, fix = _SETTINGS["nondeterministic"]
        found.append(Finding("settings", "torch", (trace.pid,), message, (), fix))
    return found


def _torch_used(trace: RawStore, events: Sequence[Event]) -> bool:
    """Whether any event, kept or counted, is of torch's streams (each stream looked at once, not each event)."""
    return any(stream_base(stream) == "torch" for stream in trace.streams_with_events())
