"""Python's random module: every draw and reseed of random._inst is seen."""

from __future__ import annotations

import _random
import random
import secrets
import sys
import tempfile
import uuid

import pytest

from rngtrace import _hotpath, rng_trace

HERE = __file__

# Bound at import, before any trace: the patches cannot see calls through these.
prebound_random = random.random
prebound_randint = random.randint


def _lineno() -> int:
    import inspect

    return inspect.currentframe().f_back.f_lineno  # type: ignore[union-attr]


def test_module_functions_are_recorded_with_api_count_and_caller_line():
    with rng_trace(print=False) as trace:
        line = _lineno() + 1
        random.random()
        random.choices("abc", k=5)
        random.shuffle([1, 2, 3, 4])
    apis = [(e.api, e.count) for e in trace.draws]
    assert apis == [("random.random", 1), ("random.choices", 5), ("random.shuffle", 4)]
    assert [e.stack[0].lineno for e in trace.draws] == [line, line + 1, line + 2]
    assert all(e.stack[0].filename == HERE for e in trace.draws)


def test_one_randint_is_one_event_although_it_calls_getrandbits_inside():
    with rng_trace(print=False) as trace:
        for _ in range(3):
            random.randint(1, 10**30)  # several getrandbits calls each
    assert [e.api for e in trace.events] == ["random.randint"] * 3


def test_seed_and_setstate_are_seed_events_with_the_seed_value():
    state = random.getstate()
    with rng_trace(print=False) as trace:
        random.seed(1234)
        random.setstate(state)
    assert [(e.kind, e.api) for e in trace.events] == [("seed", "random.seed"), ("seed", "random.setstate")]
    assert trace.events[0].detail == "1234"


def test_references_bound_before_tracing_are_never_silent():
    with rng_trace(print=False) as trace:
        prebound_random()
        prebound_randint(1, 6)
    # randint is random.py's Python method: the instance's methods it calls record it, on every
    # Python. random() is C: it records in place (the accelerator), or the catch-all hook sees
    # it, or the next check notices its move.
    assert [(e.kind, e.api) for e in trace.events] in (
        [("draw", "random.random"), ("draw", "random.randint")],
        [("unattributed", "random state"), ("draw", "random.randint")],
    )
    assert trace.events[-1].stack[0].filename == HERE


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm the profile hook on demand")
def test_the_first_unattributed_move_arms_the_profile_hook_which_attributes_the_next_ones():
    # The C base's method bound by hand: no module holds it, and it is not random.random, which
    # records in place where the accelerator is built. A first notice learns (patches from then on)
    # the names this module holds, so the next finds none to patch and arms. The empty trace next: it saw no
    # such move, so the next one starts armed.
    draw = _random.Random.random.__get__(random._inst)  # no patch or in-place hook reaches it
    with rng_trace(print=False):
        draw()
        random.random()  # a move noticed: this module's names for random's originals are learned
    with rng_trace(print=False):
        pass
    with rng_trace(print=False) as trace:
        draw()  # unseen: no hook yet
        random.random()  # the fingerprint check notices the move before this call
        draw()  # the profile hook, armed by then, sees this one
    assert [(e.kind, e.api) for e in trace.events] == [
        ("unattributed", "random state"),
        ("draw", "random.random"),
        ("draw", "random.random"),
    ]
    assert trace.events[2].stack[0].filename == HERE
    assert any("armed" in note for note in trace.notes)


def test_a_draw_made_by_c_code_through_a_prebound_reference_is_never_silent():
    with rng_trace(print=False) as trace:
        list(map(prebound_randint, [1], [6]))  # map, in C, calls the reference
    assert len(trace.events) == 1
    event = trace.events[0]
    assert (event.kind, event.api) in {("draw", "random.randint"), ("unattributed", "random state")}
    assert event.stream == "random"


@pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="records in place with the C accelerator")
def test_a_module_function_bound_before_the_trace_records_in_place_as_the_same_object():
    with rng_trace(print=False) as trace:
        assert random.randint is prebound_randint and random.shuffle.__self__ is random._inst
        line = _lineno() + 1
        list(map(prebound_randint, [1], [6]))  # from C code, through a reference bound at import
        random.seed(5)
    assert [(e.kind, e.api, e.stack[0].filename, e.stack[0].lineno) for e in trace.events] == [
        ("draw", "random.randint", HERE, line),
        ("seed", "random.seed", HERE, line + 1),
    ]
    assert trace.events[1].detail == "5"
    assert random.randint.__func__ is random.Random.randint  # given back


def test_explicit_generators_and_os_entropy_record_nothing():
    rng = random.Random(7)
    with rng_trace(print=False) as trace:
        rng.random()
        rng.shuffle([1, 2, 3])
        random.SystemRandom().random()
        secrets.token_hex(8)
        uuid.uuid4()
        with tempfile.TemporaryDirectory():
            pass
    assert trace.events == []
