"""rng_isolate: code inside cannot shift the caller's streams."""

from __future__ import annotations

import random

import numpy as np
import pytest

from rngtrace import rng_isolate


def test_streams_continue_as_if_the_isolated_block_never_ran():
    random.seed(1)
    np.random.seed(1)
    np.random.randn()  # a cached gaussian is part of the state too
    expected = (random.random(), np.random.randn(), np.random.rand())

    random.seed(1)
    np.random.seed(1)
    np.random.randn()
    with rng_isolate():
        random.random()
        np.random.seed(99)
        np.random.rand(100)
    assert (random.random(), np.random.randn(), np.random.rand()) == expected


def test_as_a_decorator_and_on_exception():
    @rng_isolate(streams=["numpy"])
    def noisy():
        np.random.rand(10)
        raise RuntimeError("inside")

    np.random.seed(5)
    expected = np.random.rand()
    np.random.seed(5)
    with pytest.raises(RuntimeError):
        noisy()
    assert np.random.rand() == expected


def test_only_the_named_streams_are_restored():
    random.seed(2)
    _, second = random.random(), random.random()
    random.seed(2)
    with rng_isolate(streams="numpy"):
        random.random()
    assert random.random() == second  # random was not isolated: it moved on


def test_unknown_stream_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown stream 'rand'"):
        rng_isolate(streams=["rand"])
