"""The findings about where a process's streams start: ``at-import`` and ``unseeded``.

Listed, in their rank, in ``_findings.KINDS``; whose seed each seed was is ``_seeds``'.

- ``at-import``: after the user's seed, a library seeds a stream, or draws from one
  that is drawn from again, while it is being imported (GPy#160: ``import GPy``
  after ``np.random.seed(0)`` put NumPy back to GPy's own seed). A library that
  draws as it is imported before any seed is no cause: the user's later seed
  governs everything after it.
- ``unseeded``: a stream drawn from before any seed, in every process whose start
  the trace saw: the traced one under ``rngtrace run``, a child started by
  ``subprocess``, a spawned worker whose stream did not start from a state a seed
  made, a forked child of an unseeded parent (and, for ``random``, any forked
  child: CPython reseeds it from OS entropy at the fork).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence

from ._duplicates import in_which
from ._fixes import library_fix, line_of, own_generator
from ._model import DRAW, ENTROPY, SEED, Event, Finding, Frame
from ._rows import alike, per_stack, walk
from ._seed_findings import seed_call
from ._seeds import AT_IMPORT, RESTORE, USER, seed_roles
from ._store import RawStore
from ._streams import Stream
from ._words import plural, stream_base
from ._yours import call_of, import_of, library_import, user_index
from .sources import stream as stream_info

#: how each kind of child starts its streams: afresh from OS entropy, or as copies of its parent's
_FRESH = frozenset({"subprocess", "spawn", "forkserver"})
#: a raw event's thread key
_THREAD_OF = operator.itemgetter(5)


# -- at-import -----------------------------------------------------------------------------


def at_import(trace: RawStore, events: Sequence[Event]) -> list[Finding]:
    """A library seeding, or drawing from, a stream the user seeded, while it is being imported."""
    roles = seed_roles(events)
    users: dict[tuple, Event] = {}  # (pid, library) -> the user's latest seed
    groups: dict[tuple, list[Event]] = {}  # (pid, library, module, kind) -> its events at import
    drawn_after: set[tuple] = set()  # the groups of draws that a later draw of their stream depended on
    pending: dict[tuple, list[tuple]] = {}  # (pid, library) -> draw groups since the last seed
    imported = per_stack(library_import)
    # Nothing is noted before the user's first seed: the walk starts there (a log with none is not walked).
    for i, e in walk(events, start=min((i for i, r in roles.items() if r.role == USER), default=len(events))):
        role = roles.get(i)
        if role is None and (e.kind != DRAW or not (users or pending)):
            continue  # no seed of the user's, no import's draws waiting: nothing to note (a loop's many)
        library = (e.pid, stream_base(e.stream))
        if role is not None:
            e = events[i]
            if role.role == AT_IMPORT and role.mine is not None:
                groups.setdefault((*library, _module(e), SEED), [role.mine]).append(e)
            if role.role == USER:
                users[library] = e
            elif role.role != RESTORE:
                users.pop(library, None)
            pending.pop(library, None)
            continue
        drawn_after.update(pending.get(library, ()))
        if library in users and imported(e) is not None:
            key = (*library, _module(e), DRAW)
            groups.setdefault(key, [users[library]]).append(events[i])
            pending.setdefault(library, []).append(key)
            drawn_after.discard(key)  # only a draw after the import's last one depends on it
    return [
        _at_import_finding(trace, group[0], group[1:])
        for key, group in groups.items()
        if key[3] == SEED or key in drawn_after
    ]


def _module(event: Event) -> str:
    imported = import_of(event.stack)
    return imported.module if imported is not None else "?"


def _at_import_finding(trace: RawStore, mine: Event, theirs: list[Event]) -> Finding:
    """``numpy.random.seed(42) at import of reseedlib.legacy ... reseeds numpy after your seed at ...``."""
    first = theirs[0]
    library = stream_base(first.stream)
    module = _module(first)
    imported, line = _users_import(first)
    seed_line = _line(mine)
    inside = f"at import of {module} ({line_of(first.frame)}"  # type: ignore[arg-type]
    inside += f", imported at {line_of(line)})" if line is not None else ")"
    where = in_which(trace, (first.pid,))
    if first.kind == SEED:
        what = f"{first.api}({first.detail})"
        message = (
            f"{what} {inside} reseeds {library} after your seed at {seed_line}{where}: your seed no longer "
            "governs the draws after it"
        )
    else:
        message = (
            f"{plural(len(theirs), f'{first.stream} draw')} {inside} "
            f"come{'s' * (len(theirs) == 1)} after your seed at {seed_line}{where}: every draw after "
            f"{'them' if len(theirs) > 1 else 'it'} depends on the import"
        )
    again = f"seed again after the import at {line_of(line)}" if line is not None else "seed again after the import"
    fix = f"import {imported} before your seed at {seed_line}, or {again}"
    return Finding("at-import", library, (first.pid,), message, (mine.index, *(e.index for e in theirs)), fix)


def _users_import(event: Event) -> tuple[str, Frame | None]:
    """(the module the user's line imported, that line): the import to move above the seed."""
    u = user_index(event.stack)
    if u is None:
        inner = import_of(event.stack)
        return (inner.module if inner is not None else "it"), None
    outer = import_of(event.stack[: u + 1], outermost=True)
    return (outer.module if outer is not None else "it"), event.stack[u]


def _line(event: Event) -> str:
    call = call_of(event.stack)
    frame = call.line if call is not None else event.frame
    return line_of(frame) if frame is not None else "an unrecorded line"


# -- unseeded ------------------------------------------------------------------------------


def unseeded(trace: RawStore, events: Sequence[Event]) -> list[Finding]:
    """Streams drawn from before any seed, in every process whose start the trace saw."""
    starts = _starts(trace)
    spawned = {(pid, stream): digest for pid, stream, digest, why, _at in trace.origins if why in _FRESH}
    states: dict[str, set[int]] = {}  # state digest -> the processes that had it
    for pid, _stream, digest, _why, _at in trace.origins:
        states.setdefault(digest, set()).add(pid)
    seeds, first = _firsts(events)
    groups: dict[tuple, list[Event]] = {}  # (library, line) -> the first unseeded draws there, one per process
    for (pid, base), e in first.items():
        info = stream_info(base)
        if info is None or not info.entropy_at_start:
            continue
        if trace.settings.get(f"{base}.starts_fixed") and pid == trace.pid:
            continue  # this build starts the stream from a fixed seed, seen where the trace began
        start = starts.get(pid)
        if start is None:
            continue
        how, parent, at = start
        if how == "fork" and not info.reseeded_at_fork:
            if _seeded_before(parent, base, at, seeds, starts):
                continue
        elif how in ("spawn", "forkserver") and states.get(spawned.get((pid, base), ""), {pid}) != {pid}:
            # Its stream started from a state another process had too: no OS entropy makes one twice,
            # so a seed made it (the main module, imported again in the worker, seeded it untraced).
            continue
        groups.setdefault((base, e.frame), []).append(e)
    return [_unseeded_finding(trace, base, group) for (base, _line), group in groups.items()]


def _firsts(events: Sequence[Event]) -> tuple[dict[tuple, int], dict[tuple, Event]]:
    """(pid, library) -> the index of its first seed; (pid, library) -> its first draw before any seed.

    The walk stops once every library has both answers it can have: a long log's
    libraries are seeded in its first rows, and its millions of draws are not read.
    """
    seeds: dict[tuple, int] = {}
    first: dict[tuple, Event] = {}
    seeded = {(e.pid, stream_base(e.stream)) for e in alike(events, (SEED,))}
    never_seeded = {(e.pid, stream_base(e.stream)) for e in alike(events, (DRAW,))} - seeded
    waiting = len(seeded) + len(never_seeded)  # libraries whose answers may still come
    imported = per_stack(library_import)
    for i, e in walk(events, (SEED, DRAW)):
        if not waiting:
            break
        library = (e.pid, stream_base(e.stream))
        if e.kind == SEED:
            if library not in seeds:
                seeds[library] = i
                waiting -= 1
        elif library not in seeds and library not in first and imported(e) is None:
            first[library] = events[i]
            if library in never_seeded:
                waiting -= 1
    return seeds, first


def _starts(trace: RawStore) -> dict[int, tuple[str, int, int]]:
    """pid -> (how it started, its parent, the index of its first event), for the processes seen from their start."""
    firsts: dict[int, int] = {}
    pids = trace.pids
    for i, raw in enumerate(trace.raw):  # the traced process's own first row: nearly always row 0
        if raw[5] not in pids:
            firsts[trace.pid] = i
            break
    if pids:
        # A merged child's rows come after the parent's: each of its threads' first row found in C.
        threads = list(map(_THREAD_OF, trace.raw))
        for key, pid in pids.items():
            try:
                i = threads.index(key)
            except ValueError:
                continue
            if i < firsts.get(pid, i + 1):
                firsts[pid] = i
    starts = {p.pid: (p.start, p.ppid, firsts.get(p.pid, 0)) for p in trace.children}
    if trace.from_start:
        starts[trace.pid] = ("traced", 0, 0)
    return starts


def _seeded_before(pid: int, base: str, at: int, seeds: dict[tuple, int], starts: dict) -> bool:
    """Whether process ``pid`` (a forked child's parent), or a parent of its, seeded ``base`` before ``at``."""
    seen: set[int] = set()
    while pid not in seen:
        seen.add(pid)
        if seeds.get((pid, base), at) < at:
            return True
        start = starts.get(pid)
        if start is None or start[0] != "fork":
            return start is None  # a parent the trace did not see from its start: it may have seeded
        pid = start[1]
    return False


def _unseeded_finding(trace: RawStore, base: str, group: list[Event]) -> Finding:
    e = group[0]
    call = call_of(e.stack)
    at = line_of(e.frame) if e.frame is not None else "an unknown line"
    if call is not None and call.callee is not None:
        at = f"{line_of(call.line)} ({call.name})"
    where = in_which(trace, tuple(g.pid for g in group))
    message = f"{base} is drawn from at {at}{where} before it is ever seeded, so every run draws differently"
    fix = library_fix(e) or _unseeded_fix(e, seed_call(base))
    info = stream_info(base)
    workers = {p.pid for p in trace.children if p.start != "subprocess"}
    if info is not None and info.per_process_fix and all(g.pid in workers for g in group):
        # A worker starts its streams afresh (or from a copy): seeding the program's start does not reach it.
        drawn = f" (the draw at {line_of(e.frame)})" if e.frame is not None else ""
        fix = library_fix(e) or info.per_process_fix + drawn
    return Finding("unseeded", base, tuple(g.pid for g in group), message, tuple(g.index for g in group), fix)


def _unseeded_fix(event: Event, seed_call: str) -> str:
    """Seed the stream where the program starts, or draw from a generator of one's own at the line."""
    own = own_generator(event, "0") if event.frame else ""
    ways = [
        f"{seed_call} at the program's start" if seed_call else "",
        f"{own} at {line_of(event.frame)}" if own and event.frame else "",
    ]
    return " or ".join(way for way in ways if way).replace(" start or ", " start, or ")


# -- generators made from OS entropy -----------------------------------------------------


def entropy_generators(trace: RawStore, events: Sequence[Event]) -> list[Finding]:
    """Generators made from OS entropy: one finding per line, naming the seeded form its stream declares."""
    groups: dict[tuple, list[Event]] = {}  # (library, the user's line) -> its events, in every process
    for i, e in walk(events, (ENTROPY,)):
        call = call_of(e.stack)
        groups.setdefault((stream_base(e.stream), call.line if call is not None else e.frame), []).append(events[i])
    return [_entropy_finding(trace, base, group) for (base, _line), group in groups.items()]


def _entropy_finding(trace: RawStore, base: str, group: list[Event]) -> Finding:
    e = group[0]
    info = stream_info(base)
    name = spelled(e.api, info)
    call = call_of(e.stack)
    pids = tuple(dict.fromkeys(g.pid for g in group))
    where = in_which(trace, pids)
    if call is None:
        at = line_of(e.frame) if e.frame is not None else "an unrecorded line"
        message = f"{name}() at {at}{where} makes a generator from OS entropy, so every run draws differently from it"
        fix = f"give it a seed at {at}"
    elif call.callee is None:
        at = line_of(call.line)
        message = f"{name}() at {at}{where} makes a generator from OS entropy, so every run draws differently from it"
        form = seeded_form(e.api, info)
        fix = f"give it a seed: {form} at {at}" if form else f"give it a seed at {at}"
    else:
        at = line_of(call.line)
        message = (
            f"{name}() inside {call.name}, called at {at}{where}, makes a generator from OS entropy, so every run "
            "draws differently from it"
        )
        fix = f"pass {call.name} a seed at {at} where it takes one"
    return Finding("unseeded", base, pids, message, tuple(g.index for g in group), fix)


def spelled(api: str, info: Stream | None) -> str:
    """``numpy.random.default_rng`` as users write it (``np.random.default_rng``), by the stream's import names."""
    for alias, module in (info.import_names if info is not None else {}).items():
        if api == module or api.startswith(module + "."):
            return alias + api[len(module) :]
    return api


def seeded_form(api: str, info: Stream | None) -> str:
    """How the generator ``api`` made from entropy takes a seed, as its stream declares it ("" if it does not).

    ``np.random.default_rng(0)``, ``torch.Generator().manual_seed(0)``, ``torch.manual_seed(0)``.
    """
    if info is None or api not in info.entropy_seeded:
        return ""
    method, name = info.entropy_seeded[api], spelled(api, info)
    head, _, last = name.rpartition(".")
    if head and head.rsplit(".", 1)[-1][:1].isupper():  # a method of a class: on a new instance
        return f"{head}().{method or last}(0)"
    return f"{head}.{method}(0)" if method else f"{name}(0)"
