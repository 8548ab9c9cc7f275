"""Fork digests: which state each stream drew from, so that two processes that drew alike are named.

Each process notes where each of its streams started from: the digest of the full
state at a fork and after each seed. Two processes that drew from one state drew the
same numbers: a ``duplicate`` finding (see ``trace``).
"""

from __future__ import annotations

import array
import os
from typing import Any

try:  # the builtin module itself: hashlib's import (OpenSSL's whole table) costs a traced child's start ms
    from _blake2 import blake2b
except ImportError:  # an interpreter built without it
    from hashlib import blake2b

from .sources._base import unmoved

#: id(source) -> the layout its ``digest_input()`` was proved for: its bytes hashed as ``state()``'s
_PROVED: dict[int, Any] = {}


def state_digests(source: Any) -> dict[str, str]:
    """sub-stream -> a digest of its full state (equal digests: the same numbers to come).

    Where the source reads what is hashed in place (``digest_input``), that is hashed, once
    its layout is proved to give ``state()``'s very digests.
    """
    fast = source.digest_input()
    if fast is not None:
        layout, fed = fast
        fast_out = {stream: blake2b(data, digest_size=12).hexdigest() for stream, data in fed.items()}
        if _PROVED.get(id(source)) is layout:
            return fast_out
    out = _digests_of_state(source)
    if fast is not None and fast_out == out:  # a draw between the two reads only defers the proof
        _PROVED[id(source)] = layout
    return out


def _digests_of_state(source: Any) -> dict[str, str]:
    out = {}
    for stream, state in source.state().items():
        h = blake2b(digest_size=12)
        data = source.state_bytes(state)  # the source knows its state's form (a tensor's bytes)
        if data is not None:
            h.update(data)
        else:
            _feed(h, state)
        out[stream] = h.hexdigest()
    return out


def _feed(h: Any, value: Any) -> None:
    """Feed a canonical form of a state (tuples, dicts, arrays, tensors) to ``h``."""
    if isinstance(value, dict):
        h.update(b"{")
        for key in sorted(value, key=repr):
            h.update(repr(key).encode())
            _feed(h, value[key])
        h.update(b"}")
    elif isinstance(value, (tuple, list)):
        if len(value) > 8:
            try:  # random's 625 twister words: packed, not repr'd (array refuses anything but ints)
                h.update(b"[")
                h.update(array.array("Q", value).tobytes())
                return
            except (TypeError, OverflowError):
                pass
        h.update(b"(")
        for item in value:
            _feed(h, item)
        h.update(b")")
    elif isinstance(value, (bytes, bytearray)):
        h.update(bytes(value))
    elif hasattr(value, "tobytes") and hasattr(value, "dtype"):  # a NumPy array
        h.update(value.tobytes())
    else:
        h.update(repr(value).encode())


class ForkDigests:
    """The digests of where streams stand at a fork: the parent's before it, the child's after.

    A full-state read costs up to tens of microseconds a stream (NumPy's ``get_state()``),
    more in a child just forked, whose every page is still its parent's. A stream
    whose quick state (``Source.snapshot()``, which moves with every draw and seed)
    is what it was at the last read still has that read's digest: a DataLoader's
    second worker reuses the first's, and each worker its parent's, except for the
    streams CPython reseeds in the child, which only the process that read them reuses
    (the parent forking its next worker).
    """

    def __init__(self) -> None:
        #: stream -> (its snapshot, its digests), as last read
        self._last: dict[str, tuple[Any, list[tuple[str, str]]]] = {}
        #: the process that made ``_last``: a forked child inherits it, read before its streams were reseeded
        self._pid = 0

    def read(self, rec: Any) -> list[tuple[str, str]]:
        """(sub-stream, digest) for every installed stream, as it stands now."""
        found: list[tuple[str, str]] = []
        last, now = self._last, {}
        pid = os.getpid()
        ours = self._pid == pid
        for name, source in list(rec.sources.items()):
            try:
                snapshot = source.snapshot()  # first: a draw between the two reads makes them differ
            except Exception:  # noqa: BLE001
                snapshot = None
            kept = last.get(name)
            if (
                kept is not None
                and snapshot is not None
                and (ours or not source.stream.reseeded_at_fork)
                and unmoved(source, kept[0], snapshot)
            ):
                digests = kept[1]
            else:
                try:
                    digests = list(state_digests(source).items())
                except Exception:  # noqa: BLE001 (a state that cannot be read is no finding, never an error)
                    continue
            if snapshot is not None:
                now[name] = (snapshot, digests)
            found.extend(digests)
        self._last, self._pid = now, pid
        return found

    def forget(self) -> None:
        self._last = {}
