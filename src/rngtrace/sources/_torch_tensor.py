"""Where a CPU tensor says how many values it holds, read in place.

Every torch draw is counted: the C Recorder asks its result ``is_cpu`` and
``numel()``, two calls through torch's Python bindings that cost about a third
of what recording the draw costs. Both answers sit in the tensor's
``TensorImpl`` as plain data, next to each other; this module proves where, for
the installed torch, so the Recorder can read them with no call at all.

The declarations read, quoted from torch 2.13.0's headers (torch/include/...)::

    // torch/csrc/autograd/python_variable.h
    struct THPVariable {
      PyObject_HEAD
      at::Tensor cdata;             // one c10::intrusive_ptr<c10::TensorImpl>
      ...
    };

    // c10/core/TensorImpl.h, the members that end the struct's plain data
      int64_t numel_ = 1;
      caffe2::TypeMeta data_type_;              // uint16_t
      std::optional<c10::Device> device_opt_;   // int8 type, int8 index, bool engaged
      bool is_contiguous_ : 1;                  // first of 8 flags in one byte
      ...                                       // then, in the next byte:
      bool allow_tensor_metadata_change_ : 1;
      bool reserved_ : 1;
      uint8_t sizes_strides_policy_ : 2;
      bool has_symbolic_sizes_strides_ : 1;
      uint8_t custom_sizes_strides_ : 2;
      bool device_policy_ : 1;
      ...
      DispatchKeySet key_set_;

    int64_t numel() const {
      if (C10_UNLIKELY(matches_policy(SizesStridesPolicy::CustomSizes)))   // policy >= 2
        return numel_custom();
      return numel_;
    }
    bool is_cpu() const {
      if (C10_UNLIKELY(device_policy_)) return device_custom().is_cpu();
      return device_opt_.has_value() && device_opt_->type() == kCPU;       // kCPU == 0
    }

So a tensor is read in place only where ``device_policy_`` is clear, its
device is engaged and the CPU, and neither a custom-sizes policy nor symbolic
sizes stand behind ``numel()``; anything else (CUDA, meta, nested, sparse with
custom sizes, a symbolic shape) takes the calls, as before. ``numel_``'s offset
is searched for (the members before it differ across builds), then every other
position is proved on tensors made here, without drawing: element counts on
contiguous, strided, empty and 0-d tensors, the device byte on a meta tensor,
the contiguity bit on a transposed one, the policy bits on a nested tensor
(CustomSizes). Any torch release whose headers were not read, or any check that
fails, and the Recorder keeps asking torch.
"""

from __future__ import annotations

import ctypes
import functools
import re
import warnings
from typing import Any

import torch

_HEAD = object.__basicsize__  # PyObject_HEAD: THPVariable's at::Tensor follows it
#: The torch releases (major, minor) whose declarations above were read: no other is read in place.
_OLDEST, _NEWEST = (2, 13), (2, 13)
_SEARCHED = 256  # numel_ is looked for in this many bytes from the TensorImpl's start
# From numel_: data_type_ (2 bytes), then device_opt_ (type, index, engaged) and the two flag bytes
# read here, one after another from _DEVICE to _POLICIES.
_DEVICE, _ENGAGED, _POLICIES = 10, 12, 14
_CPU = 0  # c10::DeviceType::CPU
_CONTIGUOUS = 0x01  # is_contiguous_, bit 0 of the first flag byte
_CUSTOM_SIZES = 0x08  # sizes_strides_policy_ >= CustomSizes (2): the high bit of bits 2-3
#: In the second flag byte: device_policy_ (bit 7), has_symbolic_sizes_strides_ (bit 4) and
#: the CustomSizes bit of sizes_strides_policy_: any of them set, and torch is asked.
_ASK_TORCH = 0x80 | 0x10 | _CUSTOM_SIZES


def tensor_layout() -> tuple[int, int, int, int, int, int, int] | None:
    """Where the C Recorder reads a CPU tensor's count, proved for the installed torch; None if not.

    ``(impl_at, numel_at, device_at, cpu, engaged_at, flags_at, flags_mask)``: the
    TensorImpl pointer's offset in the Python object; then, in the TensorImpl,
    ``numel_``, the device type (``cpu`` there for the CPU), the optional's
    flag, and the flag byte whose ``flags_mask`` bits must all be clear.
    """
    numel_at = _numel_offset()
    if numel_at is None:
        return None
    return (_HEAD, numel_at, numel_at + _DEVICE, _CPU, numel_at + _ENGAGED, numel_at + _POLICIES, _ASK_TORCH)


def read_count(layout: tuple[int, ...], tensor: Any) -> int | None:
    """What the Recorder reads for ``tensor`` with ``layout`` (tests compare it with torch): None to ask torch."""
    impl_at, numel_at, device_at, cpu, engaged_at, flags_at, mask = layout
    if type(tensor) is not torch.Tensor:
        return None
    impl = ctypes.c_void_p.from_address(id(tensor) + impl_at).value
    if not impl:
        return None
    byte = ctypes.c_uint8.from_address
    if byte(impl + device_at).value != cpu or byte(impl + engaged_at).value != 1 or byte(impl + flags_at).value & mask:
        return None
    count = ctypes.c_int64.from_address(impl + numel_at).value
    return count if count >= 0 else None


@functools.cache
def _numel_offset() -> int | None:
    try:
        return _prove()
    except Exception:  # a layout we do not know: the Recorder asks torch
        return None


def torch_version() -> tuple[int, int]:
    """The installed torch's (major, minor), (0, 0) where its version string says none."""
    found = re.match(r"(\d+)\.(\d+)", str(torch.__version__))
    return (int(found[1]), int(found[2])) if found else (0, 0)


def _impl(tensor: Any) -> int:
    return ctypes.c_void_p.from_address(id(tensor) + _HEAD).value or 0


def _bytes(tensor: Any, start: int, size: int) -> bytes:
    return ctypes.string_at(_impl(tensor) + start, size)


def _prove() -> int | None:
    """numel_'s offset in a TensorImpl, every position read proved on tensors made here."""
    if not (_OLDEST <= torch_version() <= _NEWEST):
        return None
    # No constructor here draws: the proof may run inside a trace, and inside the user's own contexts
    # (a default device, inference mode), which every tensor here names or leaves.
    with torch.inference_mode(False):
        return _proved()


def _proved() -> int | None:
    cpu = "cpu"
    with torch.no_grad():
        cpu_tensors = [
            torch.zeros(3, 5, 7, device=cpu),
            torch.empty(11, 13, dtype=torch.int64, device=cpu),
            torch.zeros(17, 19, device=cpu).t(),  # strided: not contiguous
            torch.zeros((), device=cpu),
            torch.empty(0, 4, device=cpu),
            torch.ones(6, dtype=torch.bool, device=cpu)[::2],
            torch.arange(2310, dtype=torch.float64, device=cpu).view(2, 3, 5, 7, 11)[1],
        ]
    cpu_tensors.append(torch.zeros(2, 3, requires_grad=True, device=cpu))
    for t in cpu_tensors:
        if type(t) is not torch.Tensor or _impl(t) != t._cdata:
            return None
    # numel_: the one offset that holds every tensor's count (distinct counts, so no other word can).
    found = [
        at
        for at in range(0, _SEARCHED, 8)
        if all(ctypes.c_int64.from_address(_impl(t) + at).value == t.numel() for t in cpu_tensors)
    ]
    if len(found) != 1:
        return None
    at = found[0]
    for t in cpu_tensors:
        device, index, engaged, flags, policies = _bytes(t, at + _DEVICE, _POLICIES - _DEVICE + 1)
        if (device, index, engaged) != (_CPU, 0xFF, 1) or policies & _ASK_TORCH:
            return None
        if bool(flags & _CONTIGUOUS) != t.is_contiguous():
            return None
    meta = torch.empty(3, 5, 7, device="meta")
    tail = _bytes(meta, at + _DEVICE, 3)
    if _impl(meta) != meta._cdata or ctypes.c_int64.from_address(_impl(meta) + at).value != 105:
        return None
    if tail[0] == _CPU or tail[2] != 1:  # the device byte is the device's: a meta tensor's is not the CPU's
        return None
    with warnings.catch_warnings():  # "nested tensors are in prototype stage"
        warnings.simplefilter("ignore")
        nested = torch.nested.nested_tensor([torch.zeros(2, device=cpu), torch.zeros(3, device=cpu)], device=cpu)
    if type(nested) is not torch.Tensor or _impl(nested) != nested._cdata:
        return None
    if not _bytes(nested, at + _POLICIES, 1)[0] & _CUSTOM_SIZES:  # CustomSizes: the policy bits are where read
        return None
    return at
