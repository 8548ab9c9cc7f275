"""What a traced state getter costs: ``getstate()`` and friends remember a digest of each state they hand out.

Frameworks read the global streams' states often (Lightning around its sanity check,
Dynamo at every compiled frame), so each getter is timed untraced and traced, side by
side in alternating rounds, with the medians and their ratio printed; and the same for
putting a handed-out state back (a restore). ``python benchmarks/state_getters.py``.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable

import numpy as np

from rngtrace import rng_trace

CALLS = 2_000
ROUNDS = 9


def per_call(fn: Callable[[], object]) -> float:
    """Microseconds per call of ``fn``, over CALLS calls."""
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    return (time.perf_counter() - start) / CALLS * 1e6


def side_by_side(name: str, fn: Callable[[], object]) -> None:
    """Alternate untraced and traced rounds; print the medians and the added cost per call."""
    plain, traced = [], []
    for _ in range(ROUNDS):
        plain.append(per_call(fn))
        with rng_trace(print=False):
            traced.append(per_call(fn))
    a, b = statistics.median(plain), statistics.median(traced)
    print(f"{name:<44} untraced {a:7.2f} µs   traced {b:7.2f} µs   +{b - a:6.2f} µs   ×{b / a:5.2f}")


def main() -> int:
    random.seed(0), np.random.seed(0)
    saved_random, saved_numpy = random.getstate(), np.random.get_state()
    # Looked up at each call, as a framework does: a reference taken before the trace is the original.
    side_by_side("random.getstate()", lambda: random.getstate())
    side_by_side("np.random.get_state()", lambda: np.random.get_state())
    # Put back while the stream holds it already: the check that it changes nothing, no event.
    side_by_side("random.setstate(a state handed out)", lambda: random.setstate(saved_random))
    side_by_side("np.random.set_state(a state handed out)", lambda: np.random.set_state(saved_numpy))
    try:
        import torch
    except ImportError:
        print("torch is not installed: its getters are not timed")
        return 0
    torch.manual_seed(0)
    saved_torch = torch.get_rng_state()
    side_by_side("torch.get_rng_state()", lambda: torch.get_rng_state())
    side_by_side("torch.set_rng_state(a state handed out)", lambda: torch.set_rng_state(saved_torch))
    return 0


if __name__ == "__main__":
    sys.exit(main())
