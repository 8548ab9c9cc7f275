"""The findings about the user's seeds: ``interleaved`` and ``reseeded`` (with seeds from OS entropy).

Each reads a finished trace's events in order, in every process; whose seed each
seed was is ``_seeds``' question, which frame is the user's ``_yours``', and the
words of each fix ``_fixes``'. Listed, in their rank, in ``_findings.KINDS``.

- ``interleaved``: after the user's seed, a draw inside other code (a package, or
  another file than the seed's) comes before the user's next draw of that stream;
  a library's draw as it is imported is ``at-import``'s (``_start_findings``), and a
  draw a restore undid (``fork_rng``'s body, Lightning's sanity check) is nobody's;
- ``reseeded``: other code seeds a stream again, with another value, after the
  user's seed; a seed from OS entropy, anywhere, is ``unseeded`` (found on the
  same pass). A restore, or a seed given the user's own value, is neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._duplicates import in_which
from ._fixes import and_list, interleaved_fix, isolate, line_of, model_built, place_of
from ._model import DRAW, Event, Finding, Frame
from ._paths import cell_label
from ._rows import per_stack, walk
from ._seeds import ENTROPY, RESEED, RESTORE, USER, SeedRole, seed_home, seed_roles, undone_by_restores
from ._store import RawStore
from ._words import stream_base
from ._yours import call_of, is_yours, library_import, line_to_name
from .sources import stream as stream_info

# -- interleaved ---------------------------------------------------------------------------


def interleaved(trace: RawStore, events: Sequence[Event]) -> list[Finding]:
    """After the user's seed, other code's draws before the user's next draw of the same stream."""
    found = []
    roles = seed_roles(events)
    seeds: dict[tuple, Event] = {}  # (pid, library) -> the user's latest seed, until reported
    others: dict[tuple, list[Event]] = {}  # (pid, sub-stream) -> other code's draws since that seed
    mine_at = per_stack(_mine_at)
    home_of = per_stack(seed_home)
    undone = undone_by_restores(events)  # a draw a restore undid changed none of the user's numbers
    # Nothing is collected before the user's first seed: the walk starts there (a log with none is not walked).
    for i, e in walk(events, start=min((i for i, r in roles.items() if r.role == USER), default=len(events))):
        role = roles.get(i)
        if role is None and (not seeds or e.kind != DRAW):
            continue  # no seed of the user's in force: nothing to say about this draw (a loop's many)
        library = (e.pid, stream_base(e.stream))
        if role is not None:
            e = events[i]
            if role.role == RESTORE:
                continue  # back to a state the user's seed governed
            if role.role == USER:
                seeds[library] = e
            else:
                seeds.pop(library, None)  # another seed governs now: reseeded's business
            for key in [k for k in others if k[0] == e.pid and stream_base(k[1]) == library[1]]:
                del others[key]
            continue
        seed = seeds.get(library)
        if seed is None or seed.frame is None or e.frame is None:
            continue
        verdicts = mine_at(e)  # judged once per line and seed file, not once per row
        home = home_of(seed)
        mine = verdicts.get(home)
        if mine is None:
            mine = verdicts[home] = _mine(e, home)
        if mine is _IMPORT:
            continue  # a library drawing as it is imported: at-import's
        key = (e.pid, e.stream)
        if not mine:
            if i not in undone:
                others.setdefault(key, []).append(events[i])
        elif others.get(key):
            found.append(_interleaved_finding(trace, seed, others.pop(key), events[i]))
            seeds.pop(library)  # one finding per seed: the rest of the run depends on it the same way
    return found


#: a draw made while a library is imported: neither the user's nor other code's, for ``interleaved``
_IMPORT = "import"


def _mine_at(event: Event) -> dict[str, Any]:
    """A draw's verdicts by the file of the seed they are judged against: filled by ``_mine``, which reads
    only its stack."""
    return {}


def _mine(e: Event, home: str) -> Any:
    """Whether a draw is the user's own draw in the seed's file ``home`` (or ``_IMPORT``)."""
    if library_import(e) is not None:
        return _IMPORT
    built = model_built(e)
    frame = _drawn_at(e.stack)
    return bool(
        (frame is not None and is_yours(frame) and _same_file(frame.filename, home))
        or (built is not None and _same_file(built.filename, home))
    )


#: where torch.compile'd code makes the ``random`` calls Dynamo took out of the user's function, in its order
_DYNAMO_REPLAY = ("torch/_dynamo/output_graph.py", "_gen_rand_values")


def _drawn_at(stack: Sequence[Frame]) -> Frame | None:
    """The frame that made a draw: past Dynamo's replay of a compiled function's own ``random.random()``."""
    k = 0
    while k < len(stack) and _DYNAMO_REPLAY[1] in stack[k].function:
        if not stack[k].filename.replace("\\", "/").endswith(_DYNAMO_REPLAY[0]):
            break
        k += 1
    return stack[k] if k < len(stack) else None


def _same_file(filename: str, home: str) -> bool:
    """Whether ``filename`` is the seed's file; a notebook's cells are all one file."""
    return filename == home or (cell_label(filename) is not None and cell_label(home) is not None)


def _interleaved_finding(trace: RawStore, seed: Event, others: list[Event], draw: Event) -> Finding:
    places = list(dict.fromkeys(place_of(e) for e in others))
    more = len(places) - 2
    where = and_list(places[:2] + ([f"{more} more place{'s' * (more > 1)}"] if more > 0 else []))
    n = len(others)
    seed_line = line_of(call_of(seed.stack).line)  # type: ignore[union-attr]
    built = model_built(draw)
    yours = f"the model you build at {line_of(built)}" if built else f"your draw at {line_of(draw.frame)}"  # type: ignore[arg-type]
    message = (
        f"{n} {draw.stream} draw{'s' * (n > 1)} inside {where} come{'s' * (n == 1)} between your seed at "
        f"{seed_line} and {yours}{in_which(trace, (draw.pid,))}: your numbers depend on {'them' if n > 1 else 'it'}"
    )
    fix = interleaved_fix(seed, others, draw, built, seed_home(seed))
    return Finding(
        "interleaved", draw.stream, (draw.pid,), message, (seed.index, *(e.index for e in others), draw.index), fix
    )


# -- reseeded and seeded from OS entropy --------------------------------------------------


def reseeded(trace: RawStore, events: Sequence[Event]) -> list[Finding]:
    """Other code seeding a library's streams again after the user seeded them; seeds from OS entropy."""
    found = []
    said: set[tuple] = set()  # (kind, pid, library, line) already reported
    for e, role in _seeds_of(events):
        site = (e.pid, stream_base(e.stream), e.frame)
        if role.role == ENTROPY and ("entropy", site) not in said:
            said.add(("entropy", site))
            found.append(_entropy_finding(trace, e))
        elif role.role == RESEED and role.mine is not None and ("reseeded", site) not in said:
            said.add(("reseeded", site))
            found.append(_reseeded_finding(trace, role.mine, e))
    return found


def _seeds_of(events: Sequence[Event]) -> list[tuple[Event, SeedRole]]:
    roles = seed_roles(events)
    return [(events[i], role) for i, role in roles.items()]


def _at(event: Event) -> str:
    """``train.py:4``: the user's line of an event, else its innermost recorded one."""
    frame = line_to_name(event)
    return line_of(frame) if frame is not None else "an unrecorded line"


def _reseeded_finding(trace: RawStore, mine: Event, theirs: Event) -> Finding:
    library = stream_base(theirs.stream)
    called = _called_at(theirs, seed_home(mine))
    message = (
        f"{theirs.api}({theirs.detail}) {_where_seed(theirs, called)} reseeds {library} after your seed at "
        f"{_at(mine)}{in_which(trace, (theirs.pid,))}: your seed no longer governs the draws after it"
    )
    after = f"below {line_of(called)}" if called is not None else "after it"
    if is_yours(theirs.frame):  # the user's own file: the seed there is theirs to take out
        fix = f"remove {theirs.api}({theirs.detail}) at {line_of(theirs.frame)}, or move your seed {after}"  # type: ignore[arg-type]
    else:
        fix = f"move your seed {after}, or {isolate(theirs)}"
    return Finding("reseeded", library, (theirs.pid,), message, (mine.index, theirs.index), fix)


def _called_at(event: Event, home: str) -> Frame | None:
    """The line that led to another code's seed: in the user's seed's file where one is, else the user's call."""
    stack = event.stack
    k = next((i for i, frame in enumerate(stack) if frame.filename == home), None)
    if k:
        return stack[k]
    call = call_of(stack)
    return call.line if call is not None and call.line is not event.frame else None


def _where_seed(event: Event, called: Frame | None = None) -> str:
    """``inside legacylib.py:5 (setup, called at main.py:7)``: where other code seeded."""
    frame = event.frame
    if frame is None:
        return "in code with no recorded stack"
    at = f", called at {line_of(called)}" if called is not None else ""
    return f"inside {line_of(frame)} ({frame.function}{at})"


def _entropy_finding(trace: RawStore, event: Event) -> Finding:
    library = stream_base(event.stream)
    call = call_of(event.stack)
    where = in_which(trace, (event.pid,))
    if call is not None and call.callee is None:
        message = (
            f"{event.api}() at {line_of(call.line)}{where} seeds {library} from OS entropy, so every run draws "
            "differently after it"
        )
        fix = f"give it a value: {seed_call(library) or event.api + '(0)'} at {line_of(call.line)}"
    else:
        called = call.line if call is not None and call.callee is not None else None
        message = (
            f"{event.api}() {_where_seed(event, called)}{where} seeds {library} from OS entropy, so every run "
            "draws differently after it"
        )
        fix = f"seed {library} again after it with a value, or {isolate(event)}"
    return Finding("unseeded", library, (event.pid,), message, (event.index,), fix)


def seed_call(library: str) -> str:
    """How the user seeds ``library``'s stream with a value, as its source declares it ("" if it does not)."""
    info = stream_info(library)
    return info.seed_call if info is not None else ""
