"""A saved log's fields, each checked against docs/log-format.md and converted to what a Trace holds.

A log is untrusted input (people attach them to bug reports): every field is
checked in the documented order and the first bad one is named (``LogDamage``),
in a few words that never print a huge value. ``_logjson`` parses the text and
``_logfile`` reads the file; ``check`` runs on what they give.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from ._model import KINDS, NO_STACK, UNATTRIBUTED, Frame, Process

#: the largest whole number a field may hold: anything a recorder writes fits in 64 bits
_MAX_INT = 2**63
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: the fields every log has, in the order they are checked
REQUIRED = ("version", "pid", "streams", "depth", "max_events", "dropped", "stacks", "threads", "events", "overflow")


class LogDamage(ValueError):
    """What is wrong with one field of a log, in words (the caller adds the file and the advice)."""


class Fields(NamedTuple):
    """A log's fields, checked and converted to what a Trace holds."""

    pid: int
    streams: tuple[str, ...]
    depth: int
    max_events: int
    dropped: int
    notes: list[str]
    stacks: dict[int, tuple[Frame, ...]]
    threads: dict[int, str]
    raw: list[tuple]
    overflow: dict[tuple, list[int]]
    # Version 2 (a version 1 log reads as one process: 0, [], {}, [])
    ppid: int
    children: list
    pids: dict
    origins: list
    # Optional, read by the findings (missing in older logs: False, {})
    from_start: bool = False
    settings: dict = {}
    untraced: list = []


# -- checking: every field, in the documented order; the first bad one is named ----


def check(data: dict[str, Any]) -> Fields:
    """``data``'s fields, checked against docs/log-format.md and converted; LogDamage names the first bad one.

    ``format`` and a too new ``version`` are the caller's to check first, with their own messages.
    """
    missing = [key for key in REQUIRED if key not in data]
    if missing:
        raise LogDamage("no " + ", ".join(map(repr, missing)) + " field" + "s" * (len(missing) > 1))
    _whole(data["version"], "version", least=1)
    pid = _whole(data["pid"], "pid")
    streams = tuple(_texts(data["streams"], "streams"))
    depth = _whole(data["depth"], "depth", least=1)
    max_events = _whole(data["max_events"], "max_events")
    dropped = _whole(data["dropped"], "dropped")
    notes = _texts(data.get("notes", []), "notes")
    stacks = _stacks(data["stacks"])
    threads = _threads(data["threads"])
    raw = _events(data["events"], len(stacks), threads)
    overflow = _overflow(data["overflow"], len(stacks))
    ppid = _whole(data.get("ppid", 0), "ppid")
    children = _processes(data.get("processes", []))
    pids = _pids(data.get("pids", {}), threads)
    origins = _origins(data.get("origins", []), len(raw))
    from_start = _flag(data.get("from_start", False), "from_start")
    settings = _settings(data.get("settings", {}))
    untraced = [
        _whole(pid, f"untraced[{i}]")
        for i, pid in enumerate(_list(data.get("untraced", []), "untraced", "a list of pids"))
    ]
    return Fields(
        pid,
        streams,
        depth,
        max_events,
        dropped,
        notes,
        stacks,
        threads,
        raw,
        overflow,
        ppid,
        children,
        pids,
        origins,
        from_start,
        settings,
        untraced,
    )


def _flag(value: Any, where: str) -> bool:
    if value is not True and value is not False:
        raise LogDamage(f"{where}: expected true or false, got {shown(value)}")
    return value


def _settings(value: Any) -> dict[str, bool]:
    """Torch's flags at the trace's end: names (strings) -> true or false."""
    if not isinstance(value, dict):
        raise LogDamage(f"settings: expected an object of flags, got {shown(value)}")
    return {_text(name, "settings"): _flag(flag, f"settings[{shown(name)}]") for name, flag in value.items()}


def _maybe_text(value: Any, where: str) -> Any:
    return None if value is None else _text(value, where)


def _processes(value: Any) -> list:
    """Version 2's child processes: [pid, ppid, start, role or null, exit or null, events]."""
    children = []
    for i, row in enumerate(_list(value, "processes", "a list of processes")):
        if row.__class__ is not list and row.__class__ is not tuple or len(row) != 6:
            got = f"{len(row)} values" if row.__class__ in (list, tuple) else shown(row)
            raise LogDamage(f"processes[{i}]: expected [pid, ppid, start, role, exit, events], got {got}")
        pid, ppid, start, role, exit, events = row
        children.append(
            Process(
                _whole(pid, f"processes[{i}] pid"),
                _whole(ppid, f"processes[{i}] ppid"),
                _text(start, f"processes[{i}] start"),
                _maybe_text(role, f"processes[{i}] role"),
                _maybe_text(exit, f"processes[{i}] exit"),
                _whole(events, f"processes[{i}] events"),
            )
        )
    return children


def _pids(value: Any, threads: dict[int, str]) -> dict[int, int]:
    """Version 2's thread id -> pid, for the threads of child processes."""
    if value.__class__ is not dict:
        raise LogDamage(f"pids: expected an object of thread id -> pid, got {shown(value)}")
    pids = {}
    for key, pid in value.items():
        if (
            key.__class__ is not str
            or not (key.isascii() and key.isdigit() and len(key) < 20)
            or int(key) not in threads
        ):
            raise LogDamage(f"pids: expected thread ids listed in threads, got the key {shown(key)}")
        pids[int(key)] = _whole(pid, f"pids[{key!r}]")
    return pids


def _origins(value: Any, events: int) -> list:
    """Version 2's origins: [pid, stream, state digest, why, index of the next event]."""
    origins = []
    for i, row in enumerate(_list(value, "origins", "a list of origins")):
        if row.__class__ is not list and row.__class__ is not tuple or len(row) != 5:
            got = f"{len(row)} values" if row.__class__ in (list, tuple) else shown(row)
            raise LogDamage(f"origins[{i}]: expected [pid, stream, digest, why, event index], got {got}")
        pid, stream, digest, why, at = row
        at = _whole(at, f"origins[{i}] event index")
        if at > events:
            raise LogDamage(f"origins[{i}] event index: expected at most {events} (the events), got {at}")
        origins.append(
            (
                _whole(pid, f"origins[{i}] pid"),
                _text(stream, f"origins[{i}] stream"),
                _text(digest, f"origins[{i}] digest"),
                _text(why, f"origins[{i}] why"),
                at,
            )
        )
    return origins


def _whole(value: Any, where: str, least: int = 0) -> int:
    """``value`` if it is an int from ``least`` up to 2**63 (not a bool, a float or a string)."""
    if value.__class__ is not int or not least <= value < _MAX_INT:
        raise LogDamage(f"{where}: expected a whole number >= {least}, got {shown(value)}")
    return value


def _text(value: Any, where: str) -> str:
    """``value`` if it is a string; a lone surrogate (no encoder can write it) is kept as its escape, ``\\udcff``."""
    if value.__class__ is not str:
        raise LogDamage(f"{where}: expected a string, got {shown(value)}")
    if not value.isascii() and _SURROGATE.search(value):
        return escape_surrogates(value)
    return value


def escape_surrogates(text: str) -> str:
    """``text`` with its lone surrogates as escapes: a byte that was not UTF-8 as ``\\xe9``, others as ``\\ud800``.

    A file name that was not UTF-8 reaches a log this way (os.fsdecode keeps its bytes
    as surrogates); no encoder can print one, so it reads as the bytes it stands for.
    """
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _texts(value: Any, where: str) -> list[str]:
    if value.__class__ is not list:
        raise LogDamage(f"{where}: expected a list of strings, got {shown(value)}")
    return [_text(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _list(value: Any, where: str, what: str) -> Any:
    if value.__class__ is not list and value.__class__ is not tuple:
        raise LogDamage(f"{where}: expected {what}, got {shown(value)}")
    return value


def _stacks(value: Any) -> dict[int, tuple[Frame, ...]]:
    stacks = {}
    for i, stack in enumerate(_list(value, "stacks", "a list of stacks")):
        frames = []
        for j, frame in enumerate(_list(stack, f"stacks[{i}]", "a list of frames")):
            where = f"stacks[{i}][{j}]"
            if len(_list(frame, where, "a frame [filename, line, function]")) != 3:
                raise LogDamage(f"{where}: expected a frame [filename, line, function], got {len(frame)} values")
            filename, lineno, function = frame
            frames.append(
                Frame(
                    _text(filename, f"{where} filename"),
                    _whole(lineno, f"{where} line"),
                    _text(function, f"{where} function"),
                )
            )
        stacks[i] = tuple(frames)
    return stacks


def _threads(value: Any) -> dict[int, str]:
    if value.__class__ is not dict:
        raise LogDamage(f"threads: expected an object of thread id -> name, got {shown(value)}")
    threads = {}
    for key, name in value.items():
        # The key is the thread id as a decimal string: what str(get_ident()) wrote.
        if key.__class__ is not str or not (key.isascii() and key.isdigit() and len(key) < 20):
            raise LogDamage(f"threads: expected thread ids as decimal strings, got the key {shown(key)}")
        threads[int(key)] = _text(name, f"threads[{key!r}]")
    return threads


def _events(value: Any, stacks: int, threads: dict[int, str]) -> list[tuple]:
    """The raw event tuples a Trace holds; an unattributed move keeps its noticing stack in its detail."""
    raw: list[tuple] = []
    append = raw.append
    kinds = frozenset(KINDS)
    checked: set[int] = set()  # ids of row tuples already checked: a loop's rows are one tuple (see _logjson)
    for i, row in enumerate(_list(value, "events", "a list of events")):
        if row.__class__ is tuple and id(row) in checked:
            append(row)  # the whole list is held, so an id stands for one tuple throughout
            continue
        if row.__class__ is not tuple and row.__class__ is not list:
            raise LogDamage(f"events[{i}]: expected an event of 7 values, got {shown(row)}")
        if len(row) != 7:
            raise LogDamage(f"events[{i}]: expected an event of 7 values, got {len(row)}")
        stream, kind, api, count, sid, thread, detail = row
        if stream.__class__ is not str or not stream.isascii():
            stream = _text(stream, f"events[{i}] stream")
        if kind.__class__ is not str or kind not in kinds:
            raise LogDamage(f"events[{i}] kind: expected one of {', '.join(KINDS)}, got {shown(kind)}")
        if api.__class__ is not str or not api.isascii():
            api = _text(api, f"events[{i}] api")
        if count is not None and (count.__class__ is not int or not 0 <= count < _MAX_INT):
            raise LogDamage(f"events[{i}] count: expected a whole number >= 0 or null, got {shown(count)}")
        if sid.__class__ is not int or not NO_STACK <= sid < stacks:
            raise LogDamage(f"events[{i}] stack: expected -1 or an index into the {stacks} stacks, got {shown(sid)}")
        if thread.__class__ is not int or thread not in threads:
            raise LogDamage(f"events[{i}] thread: expected a thread id listed in threads, got {shown(thread)}")
        if detail is not None and (detail.__class__ is not str or not detail.isascii()):
            detail = _text(detail, f"events[{i}] detail")
        if kind == UNATTRIBUTED:  # the saved stack is the noticing call's (see Trace._saved_event)
            raw.append((stream, kind, api, count, NO_STACK, thread, (detail, sid)))
        elif row.__class__ is tuple and stream is row[0] and api is row[2] and detail is row[6]:
            raw.append(row)  # as parsed: no copy
            if len(checked) < 1 << 16:  # bounded: a log of distinct rows gains nothing from it
                checked.add(id(row))
        else:
            raw.append((stream, kind, api, count, sid, thread, detail))
    return raw


def _overflow(value: Any, stacks: int) -> dict[tuple, list[int]]:
    overflow = {}
    for i, row in enumerate(_list(value, "overflow", "a list of rows")):
        if row.__class__ is not tuple and row.__class__ is not list or len(row) != 6:
            got = f"{len(row)} values" if row.__class__ in (list, tuple) else shown(row)
            raise LogDamage(f"overflow[{i}]: expected [stream, kind, api, stack, calls, values], got {got}")
        stream, kind, api, sid, calls, values = row
        if kind not in KINDS:
            raise LogDamage(f"overflow[{i}] kind: expected one of {', '.join(KINDS)}, got {shown(kind)}")
        if sid.__class__ is not int or not NO_STACK <= sid < stacks:
            raise LogDamage(f"overflow[{i}] stack: expected -1 or an index into the {stacks} stacks, got {shown(sid)}")
        key = (_text(stream, f"overflow[{i}] stream"), kind, _text(api, f"overflow[{i}] api"), sid)
        overflow[key] = [_whole(calls, f"overflow[{i}] calls"), _whole(values, f"overflow[{i}] values")]
    return overflow


def shown(value: Any) -> str:
    """``value`` in a few words for a one-line message: never long, never recursive, never a str() of a huge int."""
    if value is None or value.__class__ is bool:
        return {None: "null", True: "true", False: "false"}[value]
    if value.__class__ is int:
        if abs(value) < 10**18:
            return str(value)
        return f"a number of about {int(value.bit_length() * 0.30103) + 1} digits"  # log10(2): no str() of it
    if value.__class__ is float:
        return repr(value)
    if value.__class__ is str:
        return repr(value) if len(value) <= 40 else repr(value[:40]) + "…"
    words = {list: "a list", tuple: "a list", dict: "an object"}
    return words.get(value.__class__, f"a {type(value).__name__}")
