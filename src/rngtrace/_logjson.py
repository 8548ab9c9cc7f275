"""Parsing a saved log's text: the top-level object by hand, its big arrays row by row.

A log of millions of events must not be held twice: ``events`` and ``overflow``
are parsed one row at a time into compact tuples that share their strings, and
a number longer than Python allows is refused before it is converted. What is
wrong is a ``json.JSONDecodeError`` or a ``LogDamage`` naming where. A log in the
layout ``Trace.save`` writes is read as a stream of lines (``parse_lines``), never
held as one text, and a row line seen before is not parsed again.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from typing import Any

from ._logfields import REQUIRED, LogDamage, shown

#: the most digits a number may have, as Python 3.11+ enforces by default (also kept on 3.10)
_MAX_DIGITS = 4300
_WHITESPACE = re.compile(r"[ \t\n\r]*")
#: the top-level arrays parsed row by row
_ROWS = ("events", "overflow")


def _decoder() -> json.JSONDecoder:
    if getattr(sys, "get_int_max_str_digits", lambda: 0)() in range(1, _MAX_DIGITS + 1):
        return json.JSONDecoder()  # the interpreter already refuses longer numbers, in C
    return json.JSONDecoder(parse_int=_bounded_int)  # 3.10, or the limit lifted: converting is quadratic


def _bounded_int(digits: str) -> int:
    if len(digits.lstrip("-")) > _MAX_DIGITS:
        raise ValueError("too many digits")
    return int(digits)


def parse(text: str) -> Any:
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
            data[key], pos = _value(text, pos, scan, key if key in REQUIRED or key == "notes" else shown(key))
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
    share: Any = {}.setdefault  # a string or id seen before: one object for all rows, not one per row
    skip = _WHITESPACE.match
    pos = skip(text, pos + 1).end()  # type: ignore[union-attr]
    if text[pos : pos + 1] == "]":
        return rows, pos + 1
    try:
        while True:
            row, pos = scan(text, pos)
            append(row_of(row, share) if row.__class__ is list else row)
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


def row_of(row: list[Any], share: Any) -> tuple:
    """A parsed row as a tuple; an event's strings and ids are ``share``d with earlier rows', and a
    repeated event row is one tuple for all of them."""
    if len(row) != 7:
        return tuple(row)
    s, k, a, c, sid, t, d = row
    # Only a str or an int is shared: True == 1 == 1.0, and a bool must stay a bool to be refused.
    if not (
        s.__class__ is str and k.__class__ is str and a.__class__ is str and sid.__class__ is int and t.__class__ is int
    ):
        return tuple(row)
    shared = (share(s, s), share(k, k), share(a, a), c, share(sid, sid), share(t, t), d)
    if d is None and (c is None or c.__class__ is int):
        # A loop's rows repeat: one tuple for all of them. Exact types only, so
        # a row never stands for one that differs by type (True == 1).
        return share(shared, shared)
    return shared


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


# -- the writer's layout, line by line ----------------------------------------------
#
# Trace.save writes one top-level field a line and one row a line (trace._dumps). A log in
# that layout is read as a stream of lines, never held whole: a row line seen before is
# its tuple again, without parsing. Anything else (another layout, or any error at all)
# is NotLines, and the caller parses the whole text with ``parse``, which says what is wrong.

#: the most distinct row lines remembered: a loop's rows repeat, a log of distinct rows gains nothing
_MAX_REMEMBERED = 1 << 16


class NotLines(Exception):
    """The text is not in the writer's layout, or has an error ``parse`` must put in words."""


def parse_lines(lines: Iterator[bytes]) -> dict[str, Any]:
    """What ``parse`` gives for a log in the writer's layout, read from its ``lines`` (bytes, no newline)."""
    if next(lines, b"").rstrip(b"\r") != b"{":
        raise NotLines
    scan = _decoder().scan_once  # type: ignore[attr-defined]
    share: Any = {}.setdefault  # strings and rows shared across both arrays, as parse shares them
    data: dict[str, Any] = {}
    more = True
    while more:
        text = _decoded(next(lines, b"")).rstrip("\r")
        if not text.startswith('  "'):
            raise NotLines
        try:
            key, pos = json.decoder.scanstring(text, 3)  # type: ignore[attr-defined]
        except ValueError:
            raise NotLines from None
        if text[pos : pos + 2] != ": ":
            raise NotLines
        value = text[pos + 2 :]
        if value == "[":  # the writer's multi-line array
            data[key], more = _array(lines, scan, share if key in _ROWS else None)
            continue
        more = value.endswith(",")
        data[key] = _scanned(scan, value[:-1] if more else value)
        if key in _ROWS and data[key].__class__ is list and data[key]:
            raise NotLines  # rows on one line: not the writer's; parse reads them
    if next(lines, b"").rstrip(b"\r") != b"}" or next(lines, None) is not None:
        raise NotLines
    return data


def _array(lines: Iterator[bytes], scan: Any, share: Any) -> tuple[list[Any], bool]:
    """The items of a multi-line array, one a line, and whether a field follows it.

    With ``share`` (``events``, ``overflow``), each item is a row as ``row_of`` makes it, and a
    line seen before is its row again: this loop runs once per event of a log of millions.
    """
    items: list[Any] = []
    append = items.append
    seen: dict[bytes, Any] = {}
    remembered = seen.get
    for line in lines:
        row = remembered(line)
        if row is None:
            text = _decoded(line).rstrip("\r")
            if text.startswith("  ]"):
                return items, _closed(text, items, lines)
            last = not text.endswith(",")
            if not text.startswith("    "):
                raise NotLines
            row = _scanned(scan, text[4:] if last else text[4:-1])
            if share is not None and row.__class__ is list:
                row = row_of(row, share)
            if last:  # the array's last item: its closing line comes next
                append(row)
                text = _decoded(next(lines, b"")).rstrip("\r")
                if not text.startswith("  ]"):
                    raise NotLines
                return items, _closed(text, items, lines)
            if share is not None and row.__class__ is tuple and len(seen) < _MAX_REMEMBERED:
                seen[line] = row
        append(row)
    raise NotLines  # the file ended inside the array


def _closed(text: str, items: list[Any], lines: Iterator[bytes]) -> bool:
    """Whether another field follows the array whose closing line is ``text``."""
    if text == "  ],":
        more = True
    elif text == "  ]":
        more = False
    else:
        raise NotLines
    if not items:  # the writer writes an empty array as []
        raise NotLines
    return more


def _decoded(line: bytes) -> str:
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError:
        raise NotLines from None


def _scanned(scan: Any, text: str) -> Any:
    """The JSON value that is all of ``text``."""
    try:
        value, end = scan(text, 0)
    except Exception:  # noqa: BLE001 - any error is parse's to put in words
        raise NotLines from None
    if end != len(text):
        raise NotLines
    return value
