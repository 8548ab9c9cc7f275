"""Whose seed each seed event is: the user's, a reseed by other code, OS entropy, a library's import, a restore.

Decided once per trace, in event order, per process and library, and read by every
finding about seeds (``_seed_findings``, ``_start_findings``), so that they agree:
a seed ``interleaved`` takes for the user's is never ``reseeded``, and the reverse.

- the user's: a seed on the user's line; a seeding helper the user's line calls
  (a function named ``*seed*``: ``seed_everything``, ``set_seed``, the user's own
  ``seed_all``); a seed given a value the user's seeds gave (``set_seed(0)`` inside
  a Trainer after ``torch.manual_seed(0)``: the user's seed repeated); a seed in
  the program's own file; and the first seed in the user's code, wherever it is;
- ``RESEED``: after the user's seed, other code seeds with another value: a
  package, or another file of the user's project (``helpers.py`` seeding inside
  ``setup_data()``, called from ``train.py``);
- ``AT_IMPORT``: after the user's seed, a library seeds as it is imported;
- ``ENTROPY``: a seed given no value (``random.seed()``);
- ``WORKER``: PyTorch seeding each DataLoader worker; ``RESTORE``: a stream put back
  to a state it had (``set_state``), which changes nothing the user's seed decided;
- ``OTHER``: a library's seed before any of the user's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ._model import DRAW, SEED, Event
from ._model import RESTORE as _RESTORE_KIND
from ._rows import walk
from ._words import stream_base
from ._yours import call_of, import_of, is_yours, user_index

USER = "user"
RESEED = "reseed"
AT_IMPORT = "at-import"
ENTROPY = "entropy"
WORKER = "worker"
RESTORE = "restore"
OTHER = "other"

#: PyTorch seeds random, NumPy and torch in each DataLoader worker from its base seed: no finding
_WORKER_SEEDING = "torch/utils/data/_utils/worker.py"


def is_restore(event: Event) -> bool:
    """Whether ``event`` put a stream back to a state it had earlier in the trace (``set_state``, ``fork_rng``).

    A restore is never a reseed nor a seed from entropy: the state it puts back is one
    the user's seed already governed. Read here only, so the recording side decides it.
    """
    return event.kind == _RESTORE_KIND


def undone_by_restores(events: Sequence[Event]) -> dict[int, int]:
    """draw index -> the restore that undid it: a draw between a state's save and the restore that put it back.

    Its numbers changed nothing after the restore (``fork_rng``'s body, Lightning's sanity
    check), so no finding blames it. A restore's detail says how many of its stream's
    events came since the save (``Event.saved_at``): those are walked back over.
    """
    undone: dict[int, int] = {}
    for i, _alike in walk(events, (_RESTORE_KIND,)):
        restore = events[i]
        saved = restore.saved_at
        back, j = (saved[0] if saved is not None else 0), i - 1
        while back > 0 and j >= 0:
            e = events[j]
            if e.stream == restore.stream:
                back -= 1
                if e.kind == DRAW and e.pid == restore.pid:
                    undone.setdefault(j, i)  # the innermost restore that undid it
            j -= 1
    return undone


@dataclass(frozen=True)
class SeedRole:
    """What one seed event was, and the user's seed of its library in force before it (None: none yet)."""

    role: str
    mine: Event | None


def seed_roles(events: Sequence[Event]) -> dict[int, SeedRole]:
    """event index -> its SeedRole, for every seed and restore in ``events``."""
    roles: dict[int, SeedRole] = {}
    users: dict[tuple, Event] = {}  # (pid, library) -> the user's latest seed
    values: dict[int, set[str]] = {}  # pid -> the values the user's seeds gave
    for i, _alike in walk(events, (SEED, _RESTORE_KIND)):
        e = events[i]  # kept as a role's seed: its own index
        library = (e.pid, stream_base(e.stream))
        mine = users.get(library)
        role = _role(e, mine, values.get(e.pid, set()))
        roles[e.index] = SeedRole(role, mine)
        if role == USER:
            users[library] = e
            if e.detail not in (None, "None"):
                values.setdefault(e.pid, set()).add(e.detail)
        elif role in (ENTROPY, RESEED, AT_IMPORT):
            users.pop(library, None)  # that seed governs the draws after it now
    return roles


def _role(e: Event, mine: Event | None, values: set[str]) -> str:
    if is_restore(e):
        return RESTORE
    if _worker_seeding(e):
        return WORKER
    if e.from_entropy:
        return ENTROPY
    if e.detail is not None and e.detail in values:
        return USER  # the user's value again, whoever passed it on
    imported = import_of(e.stack)
    if imported is not None and not imported.yours:
        return AT_IMPORT if mine is not None else OTHER
    if not _in_users_reach(e):
        return RESEED if mine is not None else OTHER
    if mine is None or seeding_helper(e) or _file(e) in (seed_home(mine), _entry_file(e)):
        return USER
    return RESEED  # another of the user's files, in a function that is no seeding helper


def _worker_seeding(event: Event) -> bool:
    return any(_WORKER_SEEDING in f.filename.replace("\\", "/") for f in event.stack)


def _in_users_reach(event: Event) -> bool:
    """A seed on the user's line, or by a seeding helper of a library the user's line calls."""
    call = call_of(event.stack)
    if call is None:
        return False
    return call.callee is None or _named_seed(call.callee.function)


def seeding_helper(event: Event) -> bool:
    """Whether the seed was made by a function named ``*seed*``: the user's own (``seed_all``) or a library's.

    Only the user's innermost function and the library frames inside its line count: a test
    named ``test_reseed`` around a seed is no seeding helper.
    """
    call = call_of(event.stack)
    if call is None:
        return False
    u = user_index(event.stack) or 0
    return _named_seed(call.line.function) or any(_named_seed(f.function) for f in event.stack[:u])


def _named_seed(function: str) -> bool:
    return "seed" in function.rsplit(".", 1)[-1].lower()


def _file(event: Event) -> str:
    """The file of the user's line the seed was made on ("" without one)."""
    call = call_of(event.stack)
    return call.line.filename if call is not None else ""


def _entry_file(event: Event) -> str:
    """The file of the outermost of the user's frames: the program's own (``train.py``), or the test's."""
    for frame in reversed(event.stack):
        if is_yours(frame):
            return frame.filename
    return ""


def seed_home(seed: Event) -> str:
    """The file a user's seed stands for: its line's, or for the user's own seeding helper, its caller's."""
    u = user_index(seed.stack)
    if u is None:
        return ""
    if _named_seed(seed.stack[u].function):
        caller = user_index(seed.stack[u + 1 :])
        if caller is not None:
            return seed.stack[u + 1 + caller].filename
    return seed.stack[u].filename
