"""What a raw event is: its kinds, the stack id of none, and the reads of a raw tuple the writers need.

Apart from the value classes (``_model``), which build frozen dataclasses: the code that
records and spools (a traced child's start) imports this and not them.
"""

from __future__ import annotations

from collections.abc import Iterable

DRAW = "draw"
SEED = "seed"
UNATTRIBUTED = "unattributed"
#: a generator of one's own made from OS entropy (``np.random.default_rng()``): no draw of the global stream
ENTROPY = "entropy"
#: a stream put back to a state a getter handed out earlier in the trace (``setstate``, ``fork_rng``): no reseed
RESTORE = "restore"
KINDS = (DRAW, SEED, UNATTRIBUTED, ENTROPY, RESTORE)

#: the stack id of an event with no stack (an unattributed move: no recorded call made it)
NO_STACK = -1

# Raw event: (stream, kind, api, count, stack_id, thread_ident, detail). An unattributed
# move's stack_id is NO_STACK and its detail (note, stack id of the call that noticed it);
# the window's other end, the stream's previous event, is found in the order when read.
RawEvent = tuple


def moved_parts(raw: RawEvent) -> tuple[str | None, int]:
    """(note, noticing stack id) of an unattributed raw event.

    A detail that is not a pair comes from code that still records the move the old
    way, with the noticing call's stack as the event's own: it is read the same way.
    """
    detail = raw[6]
    if detail.__class__ is tuple:
        return detail
    return detail, raw[4]


#: how a restore's detail begins: ``saved:BACK:LINENO:FUNCTION:FILENAME`` (``restore_detail``)
_SAVED = "saved:"


def restore_detail(back: int, filename: str, lineno: int, function: str) -> str:
    """A restore's detail: the stream's ``back`` events since its state was saved, and where it was saved."""
    return f"{_SAVED}{back}:{lineno}:{function}:{filename}"


def restore_parts(detail: str | None) -> tuple[int, str, int, str] | None:
    """(events back, filename, lineno, function) of a restore's detail, or None (none, or not one of ours)."""
    if detail is None or not detail.startswith(_SAVED):
        return None
    parts = detail[len(_SAVED) :].split(":", 3)
    if len(parts) != 4 or not parts[0].isdigit() or not parts[1].isdigit():
        return None  # a saved log's detail someone else wrote: a restore with no place saved
    return int(parts[0]), parts[3], int(parts[1]), parts[2]


def used_stacks(raws: Iterable[RawEvent]) -> set[int]:
    """Every stack id the raw events refer to, the calls that noticed a move included."""
    used = {raw[4] for raw in raws}
    used.update(moved_parts(raw)[1] for raw in raws if raw[1] == UNATTRIBUTED)
    used.discard(NO_STACK)
    return used
