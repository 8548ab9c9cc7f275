"""In-place views of NumPy's legacy singletons: the words every draw moves, and the whole state, proved.

Read at every recorded call and block end instead of ``get_state()`` (~40 µs); each
view is checked against ``get_state()`` before it is trusted (see ``_inplace``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib
import struct
from collections.abc import Sequence
from typing import Any

from ._inplace import in_place, inside, read_with_state

_nprandom = importlib.import_module("numpy.random")
_mtrand = importlib.import_module("numpy.random.mtrand")
_RandomState = _mtrand.RandomState
_MT19937 = _nprandom.MT19937
_MAX_REGIONS = 4  # what one in-place view holds (MAX_REGIONS in _speedups/speedups.h)


def view_key(singletons: Sequence[Any]) -> tuple:
    """What a view of ``singletons`` was made for: each one and its bit generator, with their types."""
    key: tuple = ()
    for rand in singletons:
        bitgen = getattr(rand, "_bit_generator", None)
        key += (rand, type(rand), bitgen, type(bitgen))
    return key


def mt_view(singletons: Sequence[Any]) -> Any | None:
    """A view of each singleton's MT19937 (``key[623]`` and ``pos``) and cached-normal flag, read in place.

    A legacy normal draw may take the second sample of a pair, which moves no
    word but clears the singleton's ``has_gauss``: without that flag a draw could
    go unseen, so a singleton whose regions are not all proved makes no view at
    all, and the stream is compared in full (``state()``) at block ends instead.
    The hub asks again after every seed, so a bit generator swapped by
    ``set_bit_generator()`` is read from then on; the view holds what it reads,
    so the memory stays valid whatever happens to the singletons.
    """
    regions: list[tuple[int, int]] = []
    for rand in singletons:
        found = _regions(rand)
        if found is None:
            return None
        regions += found
    if len(regions) > _MAX_REGIONS:
        return None
    return in_place(regions, tuple((rand, rand._bit_generator) for rand in singletons))


def full_view(singletons: Sequence[Any]) -> Any | None:
    """A view of each singleton's whole legacy state (key, pos, has_gauss, gauss), read in place, proved.

    The regions of ``_regions`` widened to the whole ``mt19937_state`` and to the cached
    normal after its flag; checked against ``get_state()`` byte for byte.
    """
    regions: list[tuple[int, int]] = []
    for rand in singletons:
        if _regions(rand) is None:  # its layout proved first (its type, bit generator, flag offset)
            return None
        state_at, flag = rand._bit_generator.ctypes.state_address, _gauss_flag_offset()
        parts = [(state_at, 624 * 4 + 4), (id(rand) + flag, 4), (id(rand) + flag + 8, 8)]  # type: ignore[operator]
        if not inside(rand._bit_generator, state_at, 624 * 4 + 4) or not inside(rand, id(rand) + flag + 8, 8):  # type: ignore[operator]
            return None
        read = read_with_state(parts, lambda rand=rand: _RandomState.get_state(rand, legacy=False))  # type: ignore[misc]
        if read is None:
            return None
        (raw_state, raw_flag, raw_gauss), state = read
        key = state["state"]["key"]
        if raw_state != key.astype("<u4").tobytes() + struct.pack("<i", state["state"]["pos"]):
            return None
        if struct.unpack("<i", raw_flag)[0] != state["has_gauss"] or (
            state["has_gauss"] and struct.unpack("<d", raw_gauss)[0] != state["gauss"]
        ):
            return None
        regions += parts
    if len(regions) > _MAX_REGIONS:
        return None
    return in_place(regions, tuple((rand, rand._bit_generator) for rand in singletons))


def _regions(rand: Any) -> list[tuple[int, int]] | None:
    """The two regions of one RandomState that every draw moves, proved; None where one is not.

    numpy/random/src/mt19937/mt19937.h (numpy ships no header for it: the read is checked against
    ``get_state()`` as well)::

        typedef struct s_mt19937_state {
          uint32_t key[RK_STATE_LEN];  /* RK_STATE_LEN == 624 */
          int pos;
        } mt19937_state;

    ``pos`` moves with every 32-bit word drawn, ``key[623]`` when the key is
    regenerated. The MT19937 object holds that struct inline, so both words must
    lie inside it. Only MT19937 itself keeps it: another bit generator, even one
    whose class is named MT19937, keeps a smaller state there (PCG64's is about
    48 bytes), and a subclass may answer ``ctypes.state_address`` its own way.
    """
    if not isinstance(rand, _RandomState):
        return None
    bitgen = rand._bit_generator
    if type(bitgen) is not _MT19937:
        return None
    words = bitgen.ctypes.state_address + 623 * 4
    flag = _gauss_flag_offset()
    if flag is None or not inside(bitgen, words, 8) or not inside(rand, id(rand) + flag, 4):
        return None
    regions = [(words, 8), (id(rand) + flag, 4)]
    # The type's own get_state: a subclass's override may say anything.
    read = read_with_state(regions, lambda: _RandomState.get_state(rand, legacy=False))
    if read is None:
        return None
    (raw_words, raw_flag), state = read
    key, pos = state["state"]["key"], state["state"]["pos"]
    if len(key) != 624 or struct.unpack("<Ii", raw_words) != (int(key[623]), pos):
        return None
    if struct.unpack("<i", raw_flag)[0] != state["has_gauss"]:
        return None
    return regions


@functools.cache
def _gauss_flag_offset() -> int | None:
    """Where a RandomState keeps ``has_gauss``, proved on a private one; None if not found.

    The legacy state (``aug_bitgen_t``) is ``bitgen_t *``, ``int has_gauss``, ``double
    gauss``: set a distinctive cached normal through ``set_state()``, find it in the
    object, and check that the int before it follows the flag both ways.
    """
    state_type = _mtrand.RandomState
    private = state_type(20261130)
    name, key, pos = private.get_state(legacy=True)[:3]
    cached = 0.6180339887498949
    private.set_state((name, key, pos, 1, cached))
    size = state_type.__basicsize__
    memory = ctypes.string_at(id(private), size)
    found = [o for o in range(16, size - 7, 8) if memory[o : o + 8] == struct.pack("<d", cached)]
    if len(found) != 1 or found[0] < 24:
        return None
    offset = found[0] - 8
    flag = ctypes.c_int.from_address(id(private) + offset)
    if flag.value != 1:
        return None
    private.standard_normal()  # takes the cached sample
    if flag.value != 0:
        return None
    private.set_state((name, key, pos, 1, cached))
    return offset if flag.value == 1 else None
