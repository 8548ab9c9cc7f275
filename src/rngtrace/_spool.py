"""The spool files' format: how a child process's records reach its parent.

A child writes marshalled records, one per write, each prefixed by its length;
a record cut short (a kill in the middle of a write) ends the file, and what
came before it stands. ``_processes`` writes and reads them.
"""

from __future__ import annotations

import marshal
import struct

#: seconds between two looks of a child's writer at what it recorded (and of a parent waiting for a child)
FLUSH_INTERVAL = 0.01
#: the longest a child that keeps drawing goes without a write: what a killed child can lose, with one look
BUSY_FLUSH_INTERVAL = 0.05
#: the most a killed child can have drawn since its last write, in milliseconds
FLUSH_MS = round((BUSY_FLUSH_INTERVAL + FLUSH_INTERVAL) * 1000)
#: the spool files' format: a Python child started by ``subprocess`` writes only the one its parent reads
SPOOL_FORMAT = 2
#: marshal's format 4 reads alike on every Python 3 since 3.4 (a subprocess child may run another)
_MARSHAL = 4
#: each record of a spool file: its length, then one marshalled tuple
_LENGTH = struct.Struct("<I")


def record(payload: tuple) -> bytes:
    """One record of a spool file: its length, then ``payload`` marshalled."""
    data = marshal.dumps(payload, _MARSHAL)
    return _LENGTH.pack(len(data)) + data


def records(data: bytes) -> list[tuple]:
    """The records of a spool file: up to the first cut short (a kill in the middle of a write)."""
    found = []
    view = memoryview(data)
    at, size = 0, len(data)
    while at + _LENGTH.size <= size:
        (length,) = _LENGTH.unpack_from(data, at)
        at += _LENGTH.size
        if at + length > size:
            break
        try:
            item = marshal.loads(view[at : at + length])
        except (EOFError, ValueError, TypeError):
            break  # what came before it stands
        if not isinstance(item, tuple) or not item:
            break
        found.append(item)
        at += length
    return found
