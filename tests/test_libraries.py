"""Real libraries that draw from the global streams, attributed to the right file."""

from __future__ import annotations

import os

import numpy as np
import scipy.stats
from sklearn.model_selection import train_test_split
from sklearn.utils import shuffle as sk_shuffle

from rngtrace import rng_trace

HERE = __file__


def _path_of(frame) -> str:
    return frame.filename.replace(os.sep, "/")


def test_sklearn_train_test_split_without_random_state_is_attributed_to_sklearn():
    X = np.arange(20).reshape(10, 2)
    with rng_trace(print=False) as trace:
        train_test_split(X, test_size=0.3)
    (draw,) = trace.draws
    assert (draw.stream, draw.api, draw.count) == ("numpy", "numpy.random.permutation", 10)
    assert _path_of(draw.stack[0]).endswith("sklearn/model_selection/_split.py")
    assert any(f.filename == HERE for f in draw.stack), "the user's call site is in the stack"


def test_sklearn_with_a_random_state_records_nothing():
    X = np.arange(20).reshape(10, 2)
    with rng_trace(print=False) as trace:
        train_test_split(X, random_state=0)
        sk_shuffle(X, random_state=np.random.RandomState(1))
    assert trace.events == []


def test_scipy_rvs_without_random_state_uses_the_reference_stored_at_import():
    with rng_trace(print=False) as trace:
        scipy.stats.norm.rvs(size=5)
    (draw,) = trace.draws
    assert (draw.api, draw.count) == ("numpy.random.standard_normal", 5)
    assert "scipy/stats/" in _path_of(draw.stack[0])
    assert any(f.filename == HERE for f in draw.stack)


def test_scipy_with_an_explicit_generator_records_nothing():
    with rng_trace(print=False) as trace:
        scipy.stats.norm.rvs(size=5, random_state=np.random.default_rng(0))
        scipy.stats.uniform(0, 1).rvs(3, random_state=7)
    assert trace.events == []
