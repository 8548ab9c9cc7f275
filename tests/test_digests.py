"""A stream's state digest read in place is the digest of its ``state()``, and is what gets used."""

from __future__ import annotations

import random
import struct

import numpy as np
import pytest

from rngtrace import _hotpath, rng_trace
from rngtrace._digests import state_digests
from rngtrace._hub import HUB


def _moves() -> list:
    """Ways to leave random's and NumPy's states: seeded, drawn from, a normal cached, a state put back."""
    saved_random, saved_numpy = random.getstate(), np.random.get_state()
    return [
        lambda: None,
        lambda: (random.seed(7), np.random.seed(7)),
        lambda: (random.random(), np.random.rand(700)),  # past a twister block
        lambda: (random.gauss(0, 1), np.random.standard_normal()),  # a normal cached on both
        lambda: (random.gauss(0, 1), np.random.standard_normal()),  # and taken
        lambda: (random.setstate(saved_random), np.random.set_state(saved_numpy)),
    ]


def _torch_moves(torch) -> list:
    """Ways to leave torch's CPU generator: seeded, drawn past a block, a double normal cached and taken,
    a float normal cached (put there through set_state(), as a checkpoint restores one), a state put back."""
    saved = torch.get_rng_state()

    def float_cached() -> None:
        state = bytearray(torch.get_rng_state().numpy().tobytes())
        state[-8:-4] = struct.pack("<f", 0.75)  # next_float_normal_sample
        state[-4] = 1  # and its flag
        torch.set_rng_state(torch.frombuffer(state, dtype=torch.uint8))

    return [
        lambda: None,
        lambda: torch.manual_seed(7),
        lambda: torch.rand(700),  # past the twister's 624 words
        lambda: torch.randn(1, dtype=torch.float64),  # a pair of normals: the second cached
        lambda: torch.randn(1, dtype=torch.float64),  # and taken
        float_cached,
        lambda: torch.set_rng_state(saved),
    ]


def _stream(name: str) -> tuple:
    """(a draw that brings the stream into the trace, a reseed, its moves, torch or None) for ``name``.

    torch (skipped where it is not installed): a DataLoader worker digests it at the manual_seed it
    starts with, where get_state() cost ~0.8 ms.
    """
    if name == "torch":
        torch = pytest.importorskip("torch")
        return (lambda: torch.rand(1)), (lambda: torch.manual_seed(3)), (lambda: _torch_moves(torch)), torch
    return (lambda: (random.random(), np.random.rand())), (lambda: (random.seed(3), np.random.seed(3))), _moves, None


@pytest.mark.parametrize("stream", ["random", "numpy", "torch"])
def test_a_digest_read_in_place_equals_the_digest_of_the_whole_state(stream):
    draw, _reseed, moves, torch = _stream(stream)
    with rng_trace(print=False):
        draw()
        source = HUB.rec.sources[stream]
        for move in moves():
            move()
            state = source.state()
            whole = state_digests(_StateOnly(source, state))
            assert state_digests(source) == whole
            fast = source.digest_input()
            # The pure-Python mode reads no state in place, nor does torch once CUDA holds generators.
            if _hotpath.SPEEDUPS is not None and (torch is None or not torch.cuda.is_initialized()):
                assert fast is not None  # the in-place read was there to compare
            if torch is not None and fast is not None:  # the very bytes get_state() returns, not only an equal digest
                assert fast[1]["torch"] == torch.get_rng_state().numpy().tobytes()


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the pure-Python mode reads no state in place")
@pytest.mark.parametrize("stream", ["random", "numpy", "torch"])
def test_a_proved_digest_is_read_in_place_without_building_the_state(stream, monkeypatch):
    """A DataLoader worker digests its streams at its fork and at each seed: getstate()'s tuple cost it page faults."""
    draw, reseed, _moves_of, _torch = _stream(stream)
    with rng_trace(print=False):
        draw()
        source = HUB.rec.sources[stream]
        first = state_digests(source)  # proves the in-place layout against state()

        def no_state() -> None:
            raise AssertionError("state() read for a digest the in-place read gives")

        monkeypatch.setattr(source, "state", no_state)
        assert state_digests(source) == first
        reseed()
        moved = state_digests(source)
        assert moved != first
        monkeypatch.undo()
        assert moved == state_digests(_StateOnly(source, source.state()))


class _StateOnly:
    """A source with no in-place read: its digest is that of ``state`` as ``state()`` returns it."""

    def __init__(self, source, state):
        self._source, self._state = source, state

    def state(self):
        return self._state

    def state_bytes(self, state):
        return self._source.state_bytes(state)

    def digest_input(self):
        return None
