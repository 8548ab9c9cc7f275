"""Reading a saved log: bounded, streamed, and every field checked against docs/log-format.md.

A log is untrusted input (people attach them to bug reports), so reading one
must end in a Trace or in one line that says what is wrong: never a traceback,
never unbounded memory. The file is refused before it is read when it is not a
regular file or is larger than the limit; the big arrays (``events``,
``overflow``) are parsed one row at a time into compact tuples with shared
strings, so the parsed rows are never held twice; then every field is checked
in the documented order and the first bad one is named.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
from typing import Any, NamedTuple

from ._errors import LogError
from ._model import KINDS, NO_STACK, UNATTRIBUTED, Frame, Process

#: the largest log read unless the caller raises it (Trace.load(max_size=...), --max-log-size)
MAX_LOG_SIZE = 256 * 2**20
#: the largest whole number a field may hold: anything a recorder writes fits in 64 bits
_MAX_INT = 2**63
#: the most digits a number may have, as Python 3.11+ enforces by default (also kept on 3.10)
_MAX_DIGITS = 4300
PASS_A_LOG = "pass a file written by `rngtrace run --json` or Trace.save()"
_WHITESPACE = re.compile(r"[ \t\n\r]*")
_SURROGATE = re.compile(r"[\ud800-\udfff]")
#: the top-level arrays parsed row by row
_ROWS = ("events", "overflow")


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


# -- reading the file ------------------------------------------------------------


def size_words(size: int) -> str:
    """``256 MiB``, ``1.5 GiB``, ``12 KiB``, ``900 bytes``: a size as a reader says it."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if size >= scale:
            return f"{size / scale:.1f}".removesuffix(".0") + f" {unit}"
    return f"{size} bytes"


def read(path: str | os.PathLike[str], name: str, max_size: int) -> Any:
    """The parsed JSON of ``path`` (its ``events`` and ``overflow`` rows as tuples), or a LogError.

    Only a regular file is read, and at most ``max_size`` bytes of it: a device
    (``/dev/zero``), a FIFO or a directory is refused before anything is read.
    """
    text = _read_text(path, name, max_size)
    if not text.strip():
        raise LogError(f"{name} is empty; record the log again")
    try:
        return _parse(text)
    except json.JSONDecodeError as exc:
        where = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
        if text.lstrip().startswith("{") and '"rngtrace"' in text[:200]:
            raise LogError(f"{name} is a truncated or damaged rngtrace log ({where}); record it again") from None
        raise LogError(f"{name} is not JSON ({where}); {PASS_A_LOG}") from None
    except LogDamage as exc:
        if not text.lstrip().startswith("{"):  # a deep list, say: JSON perhaps, but no rngtrace log
            raise LogError(f"{name} is not an rngtrace log (no \"format\": \"rngtrace\"); {PASS_A_LOG}") from None
        raise LogError(f"{name} is a truncated or damaged rngtrace log ({exc}); record it again") from None


def _read_text(path: str | os.PathLike[str], name: str, max_size: int) -> str:
    # O_NONBLOCK: opening a FIFO must not wait for a writer; it is refused right after.
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise LogError(f"no such file: {name}; check the path") from None
    except IsADirectoryError:
        raise LogError(f"{name} is a directory; {PASS_A_LOG}") from None
    except OSError as exc:
        if os.path.isdir(path):  # Windows cannot open a directory at all
            raise LogError(f"{name} is a directory; {PASS_A_LOG}") from None
        raise LogError(f"cannot read {name} ({exc.strerror}); check its permissions") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise LogError(f"{name} is a directory; {PASS_A_LOG}")
        if not stat.S_ISREG(info.st_mode):
            raise LogError(f"{name} is {_file_kind(info.st_mode)}, not a regular file; {PASS_A_LOG}")
        if info.st_size > max_size:
            raise LogError(_too_big(name, f"is {size_words(info.st_size)}", max_size, info.st_size))
        with open(fd, "rb", buffering=0, closefd=False) as src:
            data = _read_at_most(src, max_size + 1, info.st_size)
    except OSError as exc:
        raise LogError(f"cannot read {name} ({exc.strerror}); check its permissions") from None
    finally:
        os.close(fd)
    if len(data) > max_size:
        raise LogError(_too_big(name, "has grown", max_size, len(data)))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise LogError(f"{name} is not JSON (not UTF-8 text); {PASS_A_LOG}") from None


def _read_at_most(src: Any, limit: int, expected: int) -> bytes:
    """Up to ``limit`` bytes of ``src``: what fstat said it holds first (read(n) allocates n bytes at once),
    then in chunks, for a file that grew since or does not know its size (/proc)."""
    chunks = []
    total = 0
    want = min(expected + 1, limit)
    while total < limit:
        chunk = src.read(want)
        if not chunk:
            break
        chunks.append(chunk)
        total += len(chunk)
        want = min(1 << 20, limit - total)
    return b"".join(chunks)


def _too_big(name: str, what: str, limit: int, size: int) -> str:
    need = f"{-(-size // 2**20)}M"  # the size rounded up to a whole MiB: a limit that reads this file
    return (
        f"{name} {what}, more than the {size_words(limit)} a log may have; to read it, raise the limit: "
        f"rngtrace show/diff --max-log-size {need}, or Trace.load(path, max_size=...)"
    )


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISFIFO, "a named pipe"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((words for test, words in kinds if test(mode)), "not a file")


# -- parsing: the top-level object by hand, its big arrays row by row ------------


def _decoder() -> json.JSONDecoder:
    if getattr(sys, "get_int_max_str_digits", lambda: 0)() in range(1, _MAX_DIGITS + 1):
        return json.JSONDecoder()  # the interpreter already refuses longer numbers, in C
    return json.JSONDecoder(parse_int=_bounded_int)  # 3.10, or the limit lifted: converting is quadratic


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > _MAX_DIGITS:
        raise ValueError("too many digits")
    return int(digits)


def _parse(text: str) -> Any:
    """``json.loads(text)``, with the rows of a top-level object's ``events`` and ``overflow`` as tuples."""
    scan = _decoder().scan_once  # type: ignore[attr-defined]
    pos = _skip(text, 0)
    if text[pos : pos + 1] != "{":
        value, pos = _value(text, pos, scan, "the file")
        return _end(text, value, pos)
    data: dict[str, Any] = {}
    pos = _skip(text, pos + 1)
    if text[pos : pos + 1] == "}":
        return _end(text, data, pos + 1)
    while True:
        if text[pos : pos + 1] != '"':
            raise json.JSONDecodeError("Expecting property name enclosed in double quotes", text, pos)
        key, pos = json.decoder.scanstring(text, pos + 1)  # type: ignore[attr-defined]
        pos = _skip(text, pos)
        if text[pos : pos + 1] != ":":
            raise json.JSONDecodeError("Expecting ':' delimiter", text, pos)
        pos = _skip(text, pos + 1)
        if key in _ROWS and text[pos : pos + 1] == "[":
            data[key], pos = _rows(text, pos, scan, key)
        else:
            data[key], pos = _value(text, pos, scan, key if key in _REQUIRED or key == "notes" else _shown(key))
        pos = _skip(text, pos)
        if text[pos : pos + 1] == "}":
            return _end(text, data, pos + 1)
        if text[pos : pos + 1] != ",":
            raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
        pos = _skip(text, pos + 1)


def _rows(text: str, pos: int, scan: Any, key: str) -> tuple[list[Any], int]:
    """The array at ``pos``, each row a tuple; an event shares its strings and thread id with earlier rows'.

    This loop runs once per event of a log of millions, so it is written for speed:
    locals for methods, the scanner called directly, its rare errors turned into
    messages outside the loop.
    """
    rows: list[Any] = []
    append = rows.append
    shared: dict[Any, Any] = {}  # a string or id seen before: one object for all rows, not one per row
    share = shared.setdefault
    skip = _WHITESPACE.match
    pos = skip(text, pos + 1).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] == "]":
        return rows, pos + 1
    try:
        while True:
            row, pos = scan(text, pos)
            if row.__class__ is list:
                if len(row) == 7:
                    s, k, a, c, sid, t, d = row
                    # Only a str or an int is shared: True == 1 == 1.0, and a bool must stay a bool to be refused.
                    if (
                        s.__class__ is str
                        and k.__class__ is str
                        and a.__class__ is str
                        and sid.__class__ is int
                        and t.__class__ is int
                    ):
                        row = (share(s, s), share(k, k), share(a, a), c, share(sid, sid), share(t, t), d)
                    else:
                        row = tuple(row)
                else:
                    row = tuple(row)
            append(row)
            after = text[pos : pos + 1]
            if after != "," and after != "]":
                pos = skip(text, pos).end()  # type: ignore[union-attr]
                after = text[pos : pos + 1]
            if after == ",":
                pos = skip(text, pos + 1).end()  # type: ignore[union-attr]
            elif after == "]":
                return rows, pos + 1
            else:
                raise json.JSONDecodeError("Expecting ',' delimiter", text, pos)
    except json.JSONDecodeError:
        raise
    except (StopIteration, RecursionError, ValueError):
        _value(text, pos, scan, f"{key}[{len(rows)}]")  # again, to raise the error in words
        raise


def _value(text: str, pos: int, scan: Any, where: str) -> tuple[Any, int]:
    try:
        return scan(text, pos)
    except StopIteration as stop:
        raise json.JSONDecodeError("Expecting value", text, stop.value) from None
    except RecursionError:
        raise LogDamage(f"{where}: nested too deeply to read") from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # a number past the digit limit (Python's own, or _bounded_int's)
        raise LogDamage(f"{where}: a number with more than {_MAX_DIGITS} digits") from None


def _skip(text: str, pos: int) -> int:
    return _WHITESPACE.match(text, pos).end()  # type: ignore[union-attr]


def _end(text: str, value: Any, pos: int) -> Any:
    pos = _skip(text, pos)
    if pos != len(text):
        raise json.JSONDecodeError("Extra data", text, pos)
    return value


# -- checking: every field, in the documented order; the first bad one is named ----

_REQUIRED = ("version", "pid", "streams", "depth", "max_events", "dropped", "stacks", "threads", "events", "overflow")


def check(data: dict[str, Any]) -> Fields:
    """``data``'s fields, checked against docs/log-format.md and converted; LogDamage names the first bad one.

    ``format`` and a too new ``version`` are the caller's to check first, with their own messages.
    """
    missing = [key for key in _REQUIRED if key not in data]
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
        raise LogDamage(f"{where}: expected true or false, got {_shown(value)}")
    return value


def _settings(value: Any) -> dict[str, bool]:
    """Torch's flags at the trace's end: names (strings) -> true or false."""
    if not isinstance(value, dict):
        raise LogDamage(f"settings: expected an object of flags, got {_shown(value)}")
    return {_text(name, "settings"): _flag(flag, f"settings[{_shown(name)}]") for name, flag in value.items()}


def _maybe_text(value: Any, where: str) -> Any:
    return None if value is None else _text(value, where)


def _processes(value: Any) -> list:
    """Version 2's child processes: [pid, ppid, start, role or null, exit or null, events]."""
    children = []
    for i, row in enumerate(_list(value, "processes", "a list of processes")):
        if row.__class__ is not list and row.__class__ is not tuple or len(row) != 6:
            got = f"{len(row)} values" if row.__class__ in (list, tuple) else _shown(row)
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
        raise LogDamage(f"pids: expected an object of thread id -> pid, got {_shown(value)}")
    pids = {}
    for key, pid in value.items():
        if (
            key.__class__ is not str
            or not (key.isascii() and key.isdigit() and len(key) < 20)
            or int(key) not in threads
        ):
            raise LogDamage(f"pids: expected thread ids listed in threads, got the key {_shown(key)}")
        pids[int(key)] = _whole(pid, f"pids[{key!r}]")
    return pids


def _origins(value: Any, events: int) -> list:
    """Version 2's origins: [pid, stream, state digest, why, index of the next event]."""
    origins = []
    for i, row in enumerate(_list(value, "origins", "a list of origins")):
        if row.__class__ is not list and row.__class__ is not tuple or len(row) != 5:
            got = f"{len(row)} values" if row.__class__ in (list, tuple) else _shown(row)
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
        raise LogDamage(f"{where}: expected a whole number >= {least}, got {_shown(value)}")
    return value


def _text(value: Any, where: str) -> str:
    """``value`` if it is a string; a lone surrogate (no encoder can write it) is kept as its escape, ``\\udcff``."""
    if value.__class__ is not str:
        raise LogDamage(f"{where}: expected a string, got {_shown(value)}")
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
        raise LogDamage(f"{where}: expected a list of strings, got {_shown(value)}")
    return [_text(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _list(value: Any, where: str, what: str) -> Any:
    if value.__class__ is not list and value.__class__ is not tuple:
        raise LogDamage(f"{where}: expected {what}, got {_shown(value)}")
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
        raise LogDamage(f"threads: expected an object of thread id -> name, got {_shown(value)}")
    threads = {}
    for key, name in value.items():
        # The key is the thread id as a decimal string: what str(get_ident()) wrote.
        if key.__class__ is not str or not (key.isascii() and key.isdigit() and len(key) < 20):
            raise LogDamage(f"threads: expected thread ids as decimal strings, got the key {_shown(key)}")
        threads[int(key)] = _text(name, f"threads[{key!r}]")
    return threads


def _events(value: Any, stacks: int, threads: dict[int, str]) -> list[tuple]:
    """The raw event tuples a Trace holds; an unattributed move keeps its noticing stack in its detail."""
    raw = []
    kinds = frozenset(KINDS)
    for i, row in enumerate(_list(value, "events", "a list of events")):
        if row.__class__ is not tuple and row.__class__ is not list:
            raise LogDamage(f"events[{i}]: expected an event of 7 values, got {_shown(row)}")
        if len(row) != 7:
            raise LogDamage(f"events[{i}]: expected an event of 7 values, got {len(row)}")
        stream, kind, api, count, sid, thread, detail = row
        if stream.__class__ is not str or not stream.isascii():
            stream = _text(stream, f"events[{i}] stream")
        if kind.__class__ is not str or kind not in kinds:
            raise LogDamage(f"events[{i}] kind: expected one of {', '.join(KINDS)}, got {_shown(kind)}")
        if api.__class__ is not str or not api.isascii():
            api = _text(api, f"events[{i}] api")
        if count is not None and (count.__class__ is not int or not 0 <= count < _MAX_INT):
            raise LogDamage(f"events[{i}] count: expected a whole number >= 0 or null, got {_shown(count)}")
        if sid.__class__ is not int or not NO_STACK <= sid < stacks:
            raise LogDamage(f"events[{i}] stack: expected -1 or an index into the {stacks} stacks, got {_shown(sid)}")
        if thread.__class__ is not int or thread not in threads:
            raise LogDamage(f"events[{i}] thread: expected a thread id listed in threads, got {_shown(thread)}")
        if detail is not None and (detail.__class__ is not str or not detail.isascii()):
            detail = _text(detail, f"events[{i}] detail")
        if kind == UNATTRIBUTED:  # the saved stack is the noticing call's (see Trace._saved_event)
            raw.append((stream, kind, api, count, NO_STACK, thread, (detail, sid)))
        elif row.__class__ is tuple and stream is row[0] and api is row[2] and detail is row[6]:
            raw.append(row)  # as parsed: no copy
        else:
            raw.append((stream, kind, api, count, sid, thread, detail))
    return raw


def _overflow(value: Any, stacks: int) -> dict[tuple, list[int]]:
    overflow = {}
    for i, row in enumerate(_list(value, "overflow", "a list of rows")):
        if row.__class__ is not tuple and row.__class__ is not list or len(row) != 6:
            got = f"{len(row)} values" if row.__class__ in (list, tuple) else _shown(row)
            raise LogDamage(f"overflow[{i}]: expected [stream, kind, api, stack, calls, values], got {got}")
        stream, kind, api, sid, calls, values = row
        if kind not in KINDS:
            raise LogDamage(f"overflow[{i}] kind: expected one of {', '.join(KINDS)}, got {_shown(kind)}")
        if sid.__class__ is not int or not NO_STACK <= sid < stacks:
            raise LogDamage(f"overflow[{i}] stack: expected -1 or an index into the {stacks} stacks, got {_shown(sid)}")
        key = (_text(stream, f"overflow[{i}] stream"), kind, _text(api, f"overflow[{i}] api"), sid)
        overflow[key] = [_whole(calls, f"overflow[{i}] calls"), _whole(values, f"overflow[{i}] values")]
    return overflow


def _shown(value: Any) -> str:
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
