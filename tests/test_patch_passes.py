"""Every stream's patches are applied and undone in one pass, reused while nothing they cover changed.

The joined list of a trace's patch sets is made once and reused by later
traces; these tests change which sets a trace joins (other stream sets, nested
traces) and check that each trace records its draws and gives back every
original. A reference learned between traces (which changes a set's entries)
is covered by tests/test_prebound.py.
"""

from __future__ import annotations

import random

import numpy as np

from rngtrace import _hotpath, rng_trace
from rngtrace._hub import HUB


def hooked_builtins() -> list:
    """The builtins recording in place now (the C accelerator's; none without it)."""
    return _hotpath.SPEEDUPS.hooked_builtins() if _hotpath.SPEEDUPS is not None else []


def _streams(trace) -> list[str]:
    """The stream of each recorded draw (np.random.rand's events are named as random_sample's)."""
    return [e.stream for e in trace.events]


def test_traces_of_different_stream_sets_in_turn_each_give_back_every_original():
    before = {name: getattr(random, name) for name in ("random", "seed", "shuffle")}
    before_np = {name: getattr(np.random, name) for name in ("rand", "seed", "normal")}
    for streams in [None, ("numpy",), ("random", "numpy"), None, ("random",), None]:
        with rng_trace(print=False, streams=streams) as trace:
            random.random()
            np.random.rand()
        assert _streams(trace) == [s for s in ("random", "numpy") if streams is None or s in streams]
        assert {name: getattr(random, name) for name in before} == before
        assert {name: getattr(np.random, name) for name in before_np} == before_np
    assert HUB.hooked() == {}


def test_nested_traces_wanting_other_streams_install_and_remove_them_in_turn():
    original = random.random
    with rng_trace(print=False, streams="numpy") as outer:
        assert random.random is original
        with rng_trace(print=False, streams=("random", "numpy")) as inner:
            random.random()
            np.random.rand()
        assert random.random is original  # the inner trace alone wanted it
        np.random.rand()
    assert _streams(inner) == ["random", "numpy"]
    assert _streams(outer) == ["numpy", "numpy"]
    assert HUB.hooked() == {}


def test_later_traces_apply_the_same_wrappers_again_and_never_leave_them():
    wrappers, hooked = [], []
    for _ in range(3):
        with rng_trace(print=False):
            wrappers.append((random.random, np.random.rand))
            hooked.append(hooked_builtins())
    assert all(w == wrappers[0] for w in wrappers)  # made once, applied again: nothing rebuilt
    # With the accelerator random.random records in place (the same object, hooked); else it is replaced.
    assert random.random is not wrappers[0][0] or any(fn is random.random for fn in hooked[0])
    # So does np.random.rand, a bound method (its function the wrapper while hooked); else it is replaced.
    assert np.random.rand is not wrappers[0][1] or any(fn is np.random.rand for fn in hooked[0])
    assert np.random.rand.__func__ is np.random.RandomState.rand and hooked_builtins() == []  # never left in place
