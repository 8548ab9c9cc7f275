"""A cheap fingerprint of torch's default CPU generator, read in place.

torch exposes no address for its CPU generator, and ``get_state()`` copies the
5 KB state (about 1.7 µs a read, twice per draw). The generator object holds a
pointer to its ``CPUGeneratorImpl``, which keeps the Mersenne Twister as plain
data: ``seed_, left_, seeded_, next_, state_[624]``, then the cached normal
samples (``optional<float>``, ``optional<double>``).

The fingerprint reads two regions of it: the head (``seed_`` through
``state_[0]``) and the cached samples. Every 32-bit word drawn moves ``next_``;
regenerating the words (every 624 of them) changes ``state_[0]``; taking a
cached normal clears its flag; a reseed changes ``seed_`` and the words. The
other 623 words change only with ``state_[0]``, or through ``set_state()``, a
recorded seed; the full state is compared when the block ends anyway.

The layout is not public, so nothing is dereferenced until it is proved for
the installed torch: its version is one whose headers were read (below), the
Python object is exactly ``torch._C.Generator`` with the size those headers
give it, and then, on a private generator, the seed is found, set through
``set_state()`` to values chosen here, read back at the offsets found and moved
by real draws. Every generator read later must pass the same checks on its own
type and device (a look-alike bound to ``torch.default_generator``, a subclass or
a CUDA generator keeps something else where the handle would be). Anything
unexpected, and the fingerprint falls back to copying the state through
``get_state()``, or to none, leaving the full state to the block-end check.

The declarations read, quoted from torch 2.13.0's headers (torch/include/...)::

    // torch/csrc/Generator.h
    struct THPGenerator {
      PyObject_HEAD
      at::Generator cdata;          // one c10::intrusive_ptr<c10::GeneratorImpl> impl_
      PyObject* weakreflist;
    };

    // ATen/CPUGeneratorImpl.h
    struct TORCH_API CPUGeneratorImpl : public c10::GeneratorImpl {
      ...
     private:
      at::mt19937 engine_;          // mt19937_engine: one mt19937_data_pod data_
      std::optional<float> next_float_normal_sample_;
      std::optional<double> next_double_normal_sample_;
    };

    // ATen/core/MT19937RNGEngine.h
    struct mt19937_data_pod {
      uint64_t seed_;
      int left_;
      bool seeded_;
      uint32_t next_;
      std::array<uint32_t, MERSENNE_STATE_N> state_;   // 624
    };

``c10::GeneratorImpl`` (vtable, refcount, mutex, device, key set, pyobj) comes
first; its size varies with the platform's mutex, which is why the offset of
``seed_`` is searched for, not assumed. Earlier 2.x releases declare the same
members (``c10::optional`` where 2.13 has ``std::optional``).
"""

from __future__ import annotations

import ctypes
import functools
import struct
from typing import Any

import torch

from ._inplace import in_place, read_with_state
from ._torch_tensor import torch_version

_HEAD = object.__basicsize__  # PyObject_HEAD: the generator's C++ handle follows it
_POINTER = ctypes.sizeof(ctypes.c_void_p)
_GENERATOR = torch._C.Generator
#: The torch releases (major, minor) whose declarations above were checked: the handle is
#: read in no other. Raise the newest after reading a new release's headers.
_OLDEST, _NEWEST = (2, 1), (2, 13)
_SEED = 0x5DEECE66D1234567  # distinctive: found in memory only where the seed lives
_N = 624
# CPUGeneratorImpl, from its seed_: seed_ u64, left_ i32, seeded_ u8 (pad 3), next_ u32,
# state_ u32[624] (pad 4), optional<float> (value, flag, pad), optional<double> (value, flag).
_LEFT, _SEEDED, _NEXT, _STATE = 8, 12, 16, 20
_WORDS_END = _STATE + 4 * _N
_FLOAT = (_WORDS_END + 7) // 8 * 8  # 2520: the plain-data struct ends 8-aligned (its u64)
_DOUBLE = _FLOAT + 8  # 2528
_SPAN = _DOUBLE + 9  # through the double's flag
# What get_state() returns: torch's legacy THGeneratorState plus the float sample.
_LEGACY = struct.Struct(f"<QiiQ{_N}Qdddi4xf?3x")


class CPUStateCopy:
    """The default CPU generator's whole state as bytes: the fallback fingerprint."""

    __slots__ = ("generator",)

    def __init__(self, generator: Any) -> None:
        self.generator = generator

    @property
    def value(self) -> bytes:
        return self.generator.get_state().numpy().tobytes()


class _Span(ctypes.c_char * _SPAN):  # type: ignore[misc]
    """The generator's state bytes, read in place; ``.value`` copies them whole."""


# A c_char array's own .value stops at the first NUL byte; .raw is every byte.
_Span.value = (ctypes.c_char * _SPAN).raw


def fingerprint(generator: Any) -> Any | None:
    """A view whose ``.value`` changes with every draw from ``generator``: in place where proved.

    A generator whose memory cannot be read gets a copy of its state instead; an
    object that is no torch generator at all, None (its state is compared at block ends).
    """
    if not isinstance(generator, _GENERATOR):
        return None
    start = _proved_start(generator)
    if start is not None:
        return in_place([(start, _STATE + 4), (start + _FLOAT, _SPAN - _FLOAT)], generator)
    return CPUStateCopy(generator)


def whole(generator: Any) -> Any | None:
    """A view of ``generator``'s whole plain-data state (``seed_`` through the double's flag), read in place.

    Proved as ``fingerprint()``'s view is, on this very generator. None where the layout is not
    proved or the generator not readable.
    """
    start = _proved_start(generator)
    return None if start is None else in_place([(start, _SPAN)], generator)


def _proved_start(generator: Any) -> int | None:
    """Where ``generator``'s ``seed_`` lives, once the bytes read there say what its ``get_state()`` says; else None."""
    offset = _layout()
    if offset is None or not _readable(generator):
        return None
    span = _span(generator, offset)
    if span is None:
        return None
    start = ctypes.addressof(span)
    read = read_with_state([(start, _SPAN)], lambda: _legacy(generator))
    return start if read is not None and _matches(read[0][0], read[1]) else None


_ZERO4, _ZERO8 = bytes(4), bytes(8)


def as_state_bytes(raw: bytes) -> bytes:
    """``get_state()``'s bytes, made from ``whole()``'s: the legacy struct torch fills from the same members.

    Each word widened to 8 bytes; ``normal_x`` and ``normal_rho`` are torch's zeros, and each
    cached sample is written only where its flag says it is there. ``_digests`` compares the
    digest of these with that of ``get_state()`` itself once before it uses them.
    """
    words = bytearray(_N * 8)
    for k in range(4):
        words[k::8] = raw[_STATE + k : _WORDS_END : 4]
    double_valid, float_valid = raw[_DOUBLE + 8], raw[_FLOAT + 4]
    return b"".join(
        (
            raw[:_SEEDED],  # seed_ (u64), left_ (i32)
            raw[_SEEDED : _SEEDED + 1],  # seeded_ widened to an int
            b"\0\0\0",
            raw[_NEXT:_STATE],  # next_ widened to a u64
            _ZERO4,
            words,
            _ZERO8,  # normal_x
            raw[_DOUBLE : _DOUBLE + 8] if double_valid else _ZERO8,  # normal_y: the cached double
            _ZERO8,  # normal_rho
            b"\1\0\0\0" if double_valid else _ZERO4,  # normal_is_valid
            _ZERO4,
            raw[_FLOAT : _FLOAT + 4] if float_valid else _ZERO4,  # the cached float
            b"\1\0\0\0" if float_valid else _ZERO4,  # its flag, then padding
        )
    )


def impl_address(generator: Any) -> int:
    """Where the generator's implementation lives (0 if unknown): the fingerprint is valid while it stays."""
    return _impl(generator) if _layout() is not None and _readable(generator) else 0


def _readable(generator: Any) -> bool:
    """Whether ``generator`` holds a CPUGeneratorImpl handle where THPGenerator keeps it.

    Exactly torch's type (whose size _prove() checked) and on the CPU: a CUDA
    generator's implementation is another struct. Checked when a view is made,
    never per draw: the type of a torch._C.Generator cannot be reassigned.
    """
    last = _LAST_READABLE
    if last[0] is generator:  # read at every install: the device property costs a µs or two
        return last[1]
    readable = type(generator) is _GENERATOR and generator.device.type == "cpu"
    # One entry, usually the default generator, which lives as long as the process.
    last[0], last[1] = generator, readable
    return readable


#: [the generator last asked about, whether it was readable]
_LAST_READABLE: list = [None, False]


def _impl(generator: Any) -> int:
    read = _IMPL_READ
    if read[0] is not generator:
        # Kept with the generator it reads (held here, so its address names no other object):
        # each read is then one attribute, not a ctypes object made anew at every install.
        read[0], read[1] = generator, ctypes.c_void_p.from_address(id(generator) + _HEAD)
    return read[1].value or 0


#: [the generator last read, the pointer to its implementation, read in place]
_IMPL_READ: list = [None, None]


def _span(generator: Any, offset: int) -> _Span | None:
    address = _impl(generator)
    return _Span.from_address(address + offset) if address else None


def _legacy(generator: Any) -> tuple:
    return _LEGACY.unpack(generator.get_state().numpy().tobytes())


def _matches(raw: bytes, legacy: tuple) -> bool:
    """Whether the bytes read in place say what ``get_state()`` says."""
    seed, left, seeded, next_ = legacy[:4]
    words = legacy[4 : 4 + _N]
    double_y, double_valid, float_sample, float_valid = legacy[4 + _N + 1], legacy[4 + _N + 3], legacy[-2], legacy[-1]
    if struct.unpack_from("<QiBxxxI", raw, 0) != (seed, left, seeded, next_):
        return False
    if raw[_STATE:_WORDS_END] != struct.pack(f"<{_N}I", *(w & 0xFFFFFFFF for w in words)):
        return False
    if bool(raw[_FLOAT + 4]) != float_valid or bool(raw[_DOUBLE + 8]) != bool(double_valid):
        return False
    if float_valid and raw[_FLOAT : _FLOAT + 4] != struct.pack("<f", float_sample):
        return False
    return not double_valid or raw[_DOUBLE : _DOUBLE + 8] == struct.pack("<d", double_y)


@functools.cache
def _layout() -> int | None:
    """The offset of ``seed_`` in a CPU generator, proved on a private one; None if not."""
    try:
        return _prove()
    except Exception:  # a layout we do not know: copy the state instead
        return None


def _handle_where_declared() -> bool:
    """Whether the installed torch is one checked, and its THPGenerator is the size declared.

    ``cdata`` (one pointer) must fill exactly the bytes between PyObject_HEAD and
    ``weakreflist`` (or the object's end, where there is none).
    """
    if not _OLDEST <= torch_version() <= _NEWEST:
        return False
    cdata_end = _GENERATOR.__weakrefoffset__ or _GENERATOR.__basicsize__
    return cdata_end == _HEAD + _POINTER and _GENERATOR.__basicsize__ >= cdata_end


def _prove() -> int | None:
    if not _handle_where_declared():
        return None  # no handle read at all: the state is copied instead
    g = torch.Generator()
    if not _readable(g):
        return None
    g.manual_seed(_SEED)
    size = len(g.get_state())
    if size != _LEGACY.size:
        return None
    address = _impl(g)
    if not address or address % _POINTER:
        return None
    # A CPUGeneratorImpl holds 624 state words inline, so its first 256 bytes are surely its own.
    head = ctypes.string_at(address, 256)
    found = [o for o in range(0, 256 - 8, 8) if struct.unpack_from("<Q", head, o)[0] == _SEED]
    if len(found) != 1:
        return None
    offset = found[0]
    view = _Span.from_address(address + offset)
    # Chosen values, set through torch's own setter, must read back where we expect them.
    legacy = list(_legacy(g))
    legacy[1], legacy[3] = 300, _N + 1 - 300  # left_, next_
    for i in range(_N):
        legacy[4 + i] = (legacy[4 + i] * 2654435761 + i) & 0xFFFFFFFF
    for double_valid, float_valid in ((1, 1), (0, 0)):
        # normal_x, normal_y, normal_rho, normal_is_valid: torch sets the cached double from x and rho
        legacy[4 + _N : 4 + _N + 4] = 0.1, 0.123456789, 2.0, double_valid
        legacy[-2], legacy[-1] = 1.5, bool(float_valid)
        g.set_state(torch.frombuffer(bytearray(_LEGACY.pack(*legacy)), dtype=torch.uint8))
        if not _matches(view.value, _legacy(g)) or view.value[_DOUBLE + 8] != double_valid:
            return None
    # And real draws move it: a pair of normals, then the cached second one alone.
    before = view.value
    torch.randn(1, dtype=torch.float64, generator=g)
    middle = view.value
    torch.randn(1, dtype=torch.float64, generator=g)
    if len({before, middle, view.value}) != 3 or not _matches(view.value, _legacy(g)):
        return None
    return offset
