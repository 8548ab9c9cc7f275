"""What the pytest plugin prints and writes: the terminal summary, strict mode's failure, the saved log.

Everything here reads the plain records of ``_pytest_record``: it runs on the
process that prints (xdist's controller), which may never have traced a test.
A record's log is a saved-format log (docs/log-format.md) with one "thread" per
reported test or fixture, named after it, so ``rngtrace show`` reads it and
its thread column says which test made each event.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from ._paths import is_user_file, short_path
from ._pytest_record import MAX_RECORD_EVENTS
from .sources import declared, problems, rank
from .sources import stream as stream_info
from .trace import FORMAT, FORMAT_VERSION, Trace

#: call sites shown per record in the summary
TOP_SITES = 3
_PHASES = ("outside", "setup", "call", "teardown")
_KIND_WORDS = {
    "seed": ("seed", "seeds"),
    "draw": ("draw", "draws"),
    "unattributed": ("move with no recorded call", "moves with no recorded call"),
    "entropy": ("generator from entropy", "generators from entropy"),
    "dropped": ("event past max_events", "events past max_events"),
}


def _plural(n: int, kind: str) -> str:
    one, many = _KIND_WORDS.get(kind, (kind, kind))
    return f"{n:,} {one if n == 1 else many}"


def counts_line(record: dict[str, Any]) -> list[str]:
    """``numpy   1 seed, 2 draws in call; 1 draw in teardown``: one line per stream."""
    per: dict[str, dict[str, dict[str, int]]] = {}
    for slot, n in record["counts"].items():
        stream, kind, phase = slot.split("|")
        per.setdefault(stream, {}).setdefault(phase, {})[kind] = n
    width = max((len(s) for s in per), default=0)
    lines = []
    for stream in sorted(per):
        parts = []
        for phase in sorted(per[stream], key=lambda p: _PHASES.index(p) if p in _PHASES else 9):
            kinds = per[stream][phase]
            said = ", ".join(_plural(kinds[k], k) for k in _KIND_WORDS if k in kinds)
            parts.append(said if phase == "outside" else f"{said} in {phase}")
        lines.append(f"{'events' if stream == '*' else stream:<{width}}  {'; '.join(parts)}")
    return lines


def _site(frames: list, rootdir: str) -> tuple[str, str]:
    """(the user's own line, the line that called the API where that is another) of a stack."""
    if not frames:
        return "(no stack recorded)", ""
    mine = next((f for f in frames if is_user_file(f[0])), None)  # raw (file, line, function) rows: _yours' rule
    first = _where(frames[0], rootdir)
    if mine is None:
        return first, ""
    own = _where(mine, rootdir)
    return own, ("" if own == first else first)


def _where(frame: list, rootdir: str) -> str:
    return f"{short_path(frame[0], rootdir)}:{frame[1]} in {frame[2]}"


def sites(record: dict[str, Any], rootdir: str) -> list[str]:
    """The record's top call sites, most calls first: the user's own line, what it called, and through where."""
    groups: dict[tuple, list[int]] = {}
    found: dict[int, tuple[str, str]] = {}  # id(frames) -> its site: the events of one stack share one list
    for stream, kind, api, count, frames, _phase, detail in record["events"]:
        site = found.get(id(frames))
        if site is None:
            site = found[id(frames)] = _site(frames, rootdir)
        own, via = site
        if kind == "seed":
            label = f"{api}({detail if detail is not None else ''})"
        elif kind == "unattributed":
            label = f"{stream} moved with no recorded call (noticed here; this line did not draw)"
        elif kind == "restore":
            label = f"{api} (restored a state saved earlier: no reseed)"
        elif kind == "entropy":
            label = f"{api}() made a generator from OS entropy"
        else:
            label = api
        slot = groups.setdefault((own, label, via, kind == "draw"), [0, 0])
        slot[0] += 1
        slot[1] += count or 0
    ordered = sorted(groups.items(), key=lambda item: (-item[1][0], item[0]))
    lines = []
    for (own, label, via, draw), (calls, values) in ordered[:TOP_SITES]:
        amount = f" ×{values:,}" if draw and values else ""
        times = f" ({calls:,} calls)" if calls > 1 else ""
        lines.append(f"{own}  {label}{amount}{times}" + (f"  via {via}" if via else ""))
    if len(ordered) > TOP_SITES:
        more = len(ordered) - TOP_SITES
        lines.append(f"... and {more} more call site{'' if more == 1 else 's'} (--rng-trace-json PATH keeps them all)")
    if record["more"]:
        # The counts line counts every event; these lines only the kept ones: say where the rest went.
        n = record["more"]
        lines.append(
            f"... and {n:,} more event{'' if n == 1 else 's'} past the test's first {MAX_RECORD_EVENTS:,},"
            " counted above but not located"
        )
    return lines


def summary(records: list[dict[str, Any]], tests: int, rootdir: str, strict: bool) -> list[str]:
    """The terminal summary: a count line, then each test or fixture with its streams and call sites."""
    touched = [r for r in records if r["kind"] == "test" and _global(r)]
    made = [r for r in records if r["kind"] == "test" and not _global(r) and r["counts"]]
    leaking = [r for r in records if r["leaks"]]
    fixtures = [r for r in records if r["kind"] == "fixture"]
    traced = f"{tests:,} test{'' if tests == 1 else 's'} traced"
    notes = [f"Note: {problem}" for problem in problems()]  # a third-party stream that could not be traced
    if not records:
        return [f"no test drew from, reseeded or leaked a global random stream ({traced})", *notes]
    head = (
        f"{traced}: {len(touched)} drew from or reseeded a global random stream, "
        f"{len(leaking)} left one in another state than they found it (a leak: every later test sees it)"
    )
    if made:  # a generator of its own from OS entropy is no use of a global stream, but still changes each run
        head += f"; {len(made)} made a generator from OS entropy"
    if fixtures:
        head += f"; {len(fixtures)} wider-scoped fixture{'s' if len(fixtures) != 1 else ''} drew"
    lines = [head]
    order = {"test": 0, "fixture": 1, "outside": 2}
    for record in sorted(records, key=lambda r: (order.get(r["kind"], 3), r["key"])):
        lines.append("")
        lines.append(record["label"] + _notes(record, strict))
        lines.extend("    " + line for line in counts_line(record))
        lines.extend("      " + line for line in sites(record, rootdir))
        if record["leaks"]:
            lines.append(
                f"    leaks {', '.join(sorted(set(record['leaks'])))}: left in another state than "
                "the test found it" + ("" if record["counts"] else " (moved with no recorded call)")
            )
    return lines + ([""] + notes if notes else [])


def _global(record: dict[str, Any]) -> bool:
    """Whether the record's events used a global stream: anything but generators made from OS entropy."""
    return any(slot.split("|")[1] != "entropy" for slot in record["counts"])


def _notes(record: dict[str, Any], strict: bool) -> str:
    notes = []
    if record["leaks"]:
        notes.append("LEAKS " + ", ".join(sorted(set(record["leaks"]))))
    if record["exempt"]:
        notes.append(record["exempt"])
    elif strict and record["failed_by"]:
        notes.append(f"failed ({record['failed_by']})")
    return f"  [{'; '.join(notes)}]" if notes else ""


def _own_generators(record: dict[str, Any]) -> str:
    """`` (np.random.default_rng(seed), random.Random(seed))``: what each stream the test touched declares."""
    touched = {slot.split("|", 1)[0].split(".", 1)[0] for slot in record["counts"]}
    touched.update(leak.split(".", 1)[0] for leak in record["leaks"])
    said = [
        info.own_generator
        for name in sorted(touched, key=rank)
        if (info := stream_info(name)) is not None and info.own_generator
    ]
    return f" ({', '.join(said)})" if said else ""


def strict_message(record: dict[str, Any], rootdir: str) -> str:
    """The failure strict mode gives a test that touched a global stream."""
    what = (
        "leaked state into later tests"
        if record["leaks"] and not record["counts"]
        else "drew from or reseeded a global random stream"
    )
    lines = [f"rngtrace strict mode: this test {what}:"]
    lines += ["  " + line for line in counts_line(record)]
    lines += ["    " + line for line in sites(record, rootdir)]
    if record["leaks"]:
        lines.append(
            f"  leaks {', '.join(sorted(set(record['leaks'])))}: every later test starts from the changed state"
        )
    lines.append(
        f"Draw from a generator you own{_own_generators(record)}, "
        "or mark the test @pytest.mark.rng_global(reason=...) or give it the rng_trace fixture if it "
        "draws on purpose."
    )
    return "\n".join(lines)


def saved_log(records: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """One saved-format log holding every record's events; each record is a "thread" named after it."""
    stacks: dict[tuple, int] = {}
    threads: dict[str, str] = {}
    events = []
    more = 0
    for n, record in enumerate(records, start=1):
        threads[str(n)] = record["label"]
        more += record["more"]
        for stream, kind, api, count, frames, _phase, detail in record["events"]:
            key = tuple(tuple(f) for f in frames)
            sid = stacks.setdefault(key, len(stacks)) if frames else -1
            events.append([stream, kind, api, count, sid, n, detail])
    notes = [f"{more:,} events past the first 1,000 of a test were counted, not kept"] if more else []
    return {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "pid": os.getpid(),
        "streams": sorted(declared()),
        "depth": 24,
        "max_events": max(len(events), 1),
        "dropped": 0,
        "notes": notes,
        "stacks": [[list(f) for f in key] for key in stacks],
        "threads": threads,
        "events": events,
        "overflow": [],
        "ppid": os.getppid(),
        "processes": [],
        "pids": {},
        "origins": [],
        "from_start": False,
        "settings": {},
    }


def save_log(records: list[dict[str, Any]], path: str) -> None:
    """Write every record's events to ``path`` as one log (checked by reading it back before writing)."""
    log = saved_log(records)
    log["notes"] += problems()  # said once, in the run's log, not in each failing test's draw log
    Trace.from_dict(log).save(path)


def draw_log(record: dict[str, Any], rootdir: str) -> str:
    """A record's events as rngtrace's text log: the report section strict mode adds to a failure."""
    from .render import render

    if not record["events"]:
        return "no recorded call moved the stream: " + ", ".join(sorted(set(record["leaks"])))
    return render(Trace.from_dict(saved_log([record])), "text", max_lines=20)
