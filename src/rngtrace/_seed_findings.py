"""The findings about seeds: ``interleaved``, ``reseeded`` and ``unseeded``.

Each reads a finished trace's events in order and keeps, per process and
library, the user's latest seed; which frame is the user's is ``_yours``'
question, and the words of each fix ``_fixes``'. Listed, in their rank, in
``_findings.KINDS``.

- ``interleaved``: after the user's seed, a draw inside other code (a package, or
  another file than the seed's) comes before the user's next draw of that stream;
- ``reseeded``: other code seeds a stream again after the user's seed; a seed from
  OS entropy, anywhere, is ``unseeded`` (found on the same pass);
- ``unseeded``: a stream drawn from before any seed, where the trace saw the
  program from its start (``rngtrace run``).
"""

from __future__ import annotations

from typing import Any

from ._fixes import and_list, interleaved_fix, isolate, library_fix, line_of, model_built, own_generator, place_of
from ._model import DRAW, SEED, Event, Finding
from ._paths import cell_label
from ._store import RawStore
from ._words import stream_base
from ._yours import call_of, is_yours, line_to_name
from .sources import stream as stream_info

#: PyTorch seeds random, NumPy and torch in each DataLoader worker from its base seed: no finding
_WORKER_SEEDING = "torch/utils/data/_utils/worker.py"


def _is_users_seed(event: Event) -> bool:
    """A seed on the user's line, or by a seeding helper the user's line calls (``seed_everything``)."""
    call = call_of(event.stack)
    if call is None:
        return False
    if call.callee is None:
        return True
    return "seed" in call.name.rsplit(".", 1)[-1].lower()


def _worker_seeding(event: Event) -> bool:
    return any(_WORKER_SEEDING in f.filename.replace("\\", "/") for f in event.stack)


def _entropy(event: Event) -> bool:
    return event.from_entropy


# -- interleaved ---------------------------------------------------------------------------


def interleaved(events: list[Event]) -> list[Finding]:
    """After the user's seed, other code's draws before the user's next draw of the same stream."""
    found = []
    seeds: dict[tuple, Event] = {}  # (pid, library) -> the user's latest seed, until reported
    others: dict[tuple, list[Event]] = {}  # (pid, sub-stream) -> other code's draws since that seed
    for e in events:
        library = (e.pid, stream_base(e.stream))
        if e.kind == SEED:
            if _is_users_seed(e) and not _entropy(e):
                seeds[library] = e
            else:
                seeds.pop(library, None)  # another seed governs now: reseeded's business
            for key in [k for k in others if k[0] == e.pid and stream_base(k[1]) == library[1]]:
                del others[key]
            continue
        seed = seeds.get(library)
        if e.kind != DRAW or seed is None or seed.frame is None or e.frame is None:
            continue
        key = (e.pid, e.stream)
        home = _seed_file(seed)
        built = model_built(e)
        mine = (is_yours(e.frame) and _same_file(e.frame.filename, home)) or (
            built is not None and _same_file(built.filename, home)
        )
        if not mine:
            others.setdefault(key, []).append(e)
        elif others.get(key):
            found.append(_interleaved_finding(seed, others.pop(key), e))
            seeds.pop(library)  # one finding per seed: the rest of the run depends on it the same way
    return found


def _same_file(filename: str, home: str) -> bool:
    """Whether ``filename`` is the seed's file; a notebook's cells are all one file."""
    return filename == home or (cell_label(filename) is not None and cell_label(home) is not None)


def _seed_file(seed: Event) -> str:
    call = call_of(seed.stack)
    return call.line.filename if call is not None else ""


def _interleaved_finding(seed: Event, others: list[Event], draw: Event) -> Finding:
    places = list(dict.fromkeys(place_of(e) for e in others))
    more = len(places) - 2
    where = and_list(places[:2] + ([f"{more} more place{'s' * (more > 1)}"] if more > 0 else []))
    n = len(others)
    seed_line = line_of(call_of(seed.stack).line)  # type: ignore[union-attr]
    built = model_built(draw)
    yours = f"the model you build at {line_of(built)}" if built else f"your draw at {line_of(draw.frame)}"  # type: ignore[arg-type]
    message = (
        f"{n} {draw.stream} draw{'s' * (n > 1)} inside {where} come{'s' * (n == 1)} between your seed at "
        f"{seed_line} and {yours}: your numbers depend on {'them' if n > 1 else 'it'}"
    )
    fix = interleaved_fix(seed, others, draw, built, _seed_file(seed))
    return Finding(
        "interleaved", draw.stream, (draw.pid,), message, (seed.index, *(e.index for e in others), draw.index), fix
    )


# -- reseeded and seeded from OS entropy --------------------------------------------------


def reseeded(events: list[Event]) -> list[Finding]:
    """Other code seeding a library's streams again after the user seeded them; seeds from OS entropy."""
    found = []
    users: dict[tuple, Event] = {}  # (pid, library) -> the user's latest seed
    said: set[tuple] = set()  # (kind, library, line) already reported
    for e in events:
        if e.kind != SEED or _worker_seeding(e):
            continue
        library = (e.pid, stream_base(e.stream))
        site = (library[1], e.frame)
        if _entropy(e):
            if ("entropy", site) not in said:
                said.add(("entropy", site))
                found.append(_entropy_finding(e))
            users.pop(library, None)
        elif _is_users_seed(e):
            users[library] = e
        elif library in users and ("reseeded", site) not in said:
            said.add(("reseeded", site))
            found.append(_reseeded_finding(users[library], e))
    return found


def _at(event: Event) -> str:
    """``train.py:4``: the user's line of an event, else its innermost recorded one."""
    frame = line_to_name(event)
    return line_of(frame) if frame is not None else "an unrecorded line"


def _reseeded_finding(mine: Event, theirs: Event) -> Finding:
    library = stream_base(theirs.stream)
    call = call_of(theirs.stack)
    message = (
        f"{theirs.api}({theirs.detail}) {_where_seed(theirs, call)} reseeds {library} after your seed at "
        f"{_at(mine)}: your seed no longer governs the draws after it"
    )
    after = f"below {line_of(call.line)}" if call is not None else "after it"
    fix = f"move your seed {after}, or {isolate(theirs)}"
    return Finding("reseeded", library, (theirs.pid,), message, (mine.index, theirs.index), fix)


def _where_seed(event: Event, call: Any = None) -> str:
    """``inside legacylib.py:5 (setup, called at main.py:7)``: where other code seeded."""
    frame = event.frame
    if frame is None:
        return "in code with no recorded stack"
    at = f", called at {line_of(call.line)}" if call is not None and call.callee is not None else ""
    return f"inside {line_of(frame)} ({frame.function}{at})"


def _entropy_finding(event: Event) -> Finding:
    library = stream_base(event.stream)
    call = call_of(event.stack)
    if call is not None and call.callee is None:
        message = (
            f"{event.api}() at {line_of(call.line)} seeds {library} from OS entropy, so every run draws "
            "differently after it"
        )
        fix = f"give it a value: {_seed_call(library) or event.api + '(0)'} at {line_of(call.line)}"
    else:
        message = (
            f"{event.api}() {_where_seed(event, call)} seeds {library} from OS entropy, so every run draws "
            "differently after it"
        )
        fix = f"seed {library} again after it with a value, or {isolate(event)}"
    return Finding("unseeded", library, (event.pid,), message, (event.index,), fix)


# -- unseeded ------------------------------------------------------------------------------


def unseeded(trace: RawStore, events: list[Event]) -> list[Finding]:
    """Streams the program drew from before any seed: only where the trace saw it from its start."""
    if not trace.from_start:
        return []
    found = []
    seeded: set[str] = set()
    first: dict[str, Event] = {}
    for e in events:
        base = stream_base(e.stream)
        info = stream_info(base)
        if e.pid != trace.pid or info is None or not info.entropy_at_start:
            continue
        if e.kind == SEED:
            seeded.add(base)
        elif e.kind == DRAW and base not in seeded and base not in first:
            first[base] = e
    for base, e in first.items():
        call = call_of(e.stack)
        at = line_of(e.frame) if e.frame is not None else "an unknown line"
        if call is not None and call.callee is not None:
            at = f"{line_of(call.line)} ({call.name})"
        message = f"{base} is drawn from at {at} before it is ever seeded, so every run draws differently"
        fix = library_fix(e) or _unseeded_fix(e, _seed_call(base))
        found.append(Finding("unseeded", base, (e.pid,), message, (e.index,), fix))
    return found


def _unseeded_fix(event: Event, seed_call: str) -> str:
    """Seed the stream where the program starts, or draw from a generator of one's own at the line."""
    own = own_generator(event, "0") if event.frame else ""
    ways = [
        f"{seed_call} at the program's start" if seed_call else "",
        f"{own} at {line_of(event.frame)}" if own and event.frame else "",
    ]
    return " or ".join(way for way in ways if way).replace(" start or ", " start, or ")


def _seed_call(library: str) -> str:
    """How the user seeds ``library``'s stream with a value, as its source declares it ("" if it does not)."""
    info = stream_info(library)
    return info.seed_call if info is not None else ""
