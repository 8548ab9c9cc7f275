"""Parsing a saved log's text: the top-level object by hand, its big arrays row by row.

A log of millions of events must not be held twice: ``events`` and ``overflow``
are parsed one row at a time into compact tuples that share their strings, and
a number longer than Python allows is refused before it is converted. What is
wrong is a ``json.JSONDecodeError`` or a ``LogDamage`` naming where.
"""

from __future__ import annotations

import json
import re
import sys
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
                        if d is None and (c is None or c.__class__ is int):
                            # A loop's rows repeat: one tuple for all of them. Exact types only, so
                            # a row never stands for one that differs by type (True == 1).
                            row = share(row, row)
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
