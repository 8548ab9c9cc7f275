"""Fingerprints read where a stream keeps its state: the bytes of a few regions of memory.

A source finds where its stream's state lives (and proves it) and names the
regions whose bytes change with every draw; this module gives it a view of them.
With the C accelerator the view is ``_speedups.InPlace``, which the hot path
compares in place without a copy. Without it, ctypes reads each region.

A view is read on every draw with no check at all, so everything is checked
once, before it is made: the owner's exact type (a look-alike or a subclass may
hold anything where the real object keeps its state), that each region lies
inside the object that holds it (``inside``), and that the bytes there say what
the library's own getter says. What fails a check gets no view: the source
compares its full state instead.
"""

from __future__ import annotations

import ctypes
import functools
import operator
from collections.abc import Callable, Sequence
from typing import Any

from .._hotpath import SPEEDUPS as _speedups


def in_place(regions: Sequence[tuple[int, int]], owners: Any) -> Any:
    """A view whose ``.value`` changes when the bytes at ``regions`` ((address, size), ...) do.

    ``owners`` keeps that memory alive for as long as the view lives.
    """
    regions = tuple(regions)
    for address, size in regions:
        # The C view refuses these too; ctypes would read address 0 when the view is first compared.
        if not address or size <= 0:
            raise ValueError(f"a region needs an address and a positive size, not ({address:#x}, {size})")
    if _speedups is not None:
        return _speedups.InPlace(regions, owners)
    views = [_raw_type(size).from_address(address) for address, size in regions]  # type: ignore[attr-defined]
    joined = _joined_type(len(views))()
    for i, view in enumerate(views):
        setattr(joined, f"v{i}", view)
    joined.owners = owners
    return joined


def inside(obj: object, address: int, size: int) -> bool:
    """Whether the ``size`` bytes at ``address`` lie within ``obj``'s fixed part (its type's basic size).

    CPython's id() is the object's address, and ``__basicsize__`` is what its type
    allocates for every instance: bytes past it belong to some other object.
    """
    start = id(obj)
    return size > 0 and start <= address and address + size <= start + type(obj).__basicsize__


@functools.cache
def _raw_type(size: int) -> type:
    """A ctypes array of ``size`` bytes whose ``.value`` is every byte (c_char's own stops at a NUL)."""
    base = ctypes.c_char * size
    raw = type(f"_Raw{size}", (base,), {})
    raw.value = base.raw  # type: ignore[attr-defined]
    return raw


@functools.cache
def _joined_type(count: int) -> type:
    """A holder of ``count`` raw views whose ``.value`` is their values, read by C code (attrgetter)."""
    names = tuple(f"v{i}" for i in range(count))
    return type(
        f"_Joined{count}",
        (),
        {"__slots__": (*names, "owners"), "value": property(operator.attrgetter(*(f"{n}.value" for n in names)))},
    )


def read_with_state(
    regions: Sequence[tuple[int, int]], full_state: Callable[[], Any], tries: int = 100
) -> tuple | None:
    """(the bytes at ``regions``, ``full_state()``), read with no draw in between; None if none was.

    A proof compares bytes read in place with the library's own state read. Another
    thread may draw between the two reads (the GIL changes hands there), which would
    fail the proof, and a failed proof leaves the stream with no view for good: so the
    bytes are read before and after the state, and the pair is used only where they
    did not move meanwhile.
    """
    for _ in range(tries):
        before = tuple(ctypes.string_at(address, size) for address, size in regions)
        state = full_state()
        if tuple(ctypes.string_at(address, size) for address, size in regions) == before:
            return before, state
    return None
