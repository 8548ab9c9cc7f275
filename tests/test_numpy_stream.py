"""NumPy's legacy np.random: every use of the singleton RandomState is seen."""

from __future__ import annotations

import functools
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

# Bound at import, before any trace: the module patches cannot see calls through these.
from numpy.random import rand as prebound_rand

from rngtrace import _hotpath, rng_trace

# Out of reach of the patches and of what rngtrace learns (once the catch-all sees a module's own
# name for a stream function used, it patches that module's names too): the singleton's methods
# taken from its type before any trace, called through C (np.random.random_sample itself, a bound
# method, records in place wherever it is held). These stay unseen, so only the next recorded call
# or the end of the block can notice their moves.
UNSEEN = SimpleNamespace(
    random_sample=functools.partial(np.random.RandomState.random_sample, np.random.mtrand._rand),
    standard_normal=functools.partial(np.random.RandomState.standard_normal, np.random.mtrand._rand),
)

HERE = __file__


def test_module_functions_are_recorded_with_api_and_value_count():
    with rng_trace(print=False) as trace:
        np.random.rand(2, 3)
        np.random.randn()
        np.random.shuffle(np.arange(5))
        np.random.choice(10, size=4)
    assert [(e.api, e.count) for e in trace.draws] == [
        ("numpy.random.rand", 6),
        ("numpy.random.randn", 1),
        ("numpy.random.shuffle", 5),
        ("numpy.random.choice", 4),
    ]
    assert {e.stack[0].filename for e in trace.draws} == {HERE}


def test_choice_is_one_event_although_it_calls_other_methods_inside():
    with rng_trace(print=False) as trace:
        np.random.choice(50, size=5, replace=False)  # calls self.permutation inside
    assert [e.api for e in trace.events] == ["numpy.random.choice"]


def test_methods_called_on_the_singleton_itself_are_recorded():
    singleton = np.random.mtrand._rand
    with rng_trace(print=False) as trace:
        singleton.standard_normal(4)
        singleton.permutation(3)
    assert [(e.api, e.count) for e in trace.draws] == [
        ("numpy.random.standard_normal", 4),
        ("numpy.random.permutation", 3),
    ]


def test_other_random_state_instances_and_generators_record_nothing():
    own = np.random.RandomState(0)
    gen = np.random.default_rng(0)
    with rng_trace(print=False) as trace:
        own.rand(3)
        own.permutation(4)
        gen.random(3)
        gen.permutation(4)
        np.random.Generator(np.random.PCG64(1)).normal()
    assert trace.events == []


def test_seed_and_set_state_are_seed_events_with_the_seed_value():
    state = np.random.get_state()
    with rng_trace(print=False) as trace:
        np.random.seed(666)
        np.random.set_state(state)
    assert [(e.kind, e.api, e.detail) for e in trace.events] == [
        ("seed", "numpy.random.seed", "666"),
        ("seed", "numpy.random.set_state", "<tuple>"),
    ]


def test_a_prebound_reference_is_attributed_to_the_line_that_called_it():
    with rng_trace(print=False) as trace:
        prebound_rand(2)
    # 3.12+: sys.monitoring sees the call itself. 3.10/3.11: rand() looks up
    # self.random_sample on the singleton, and that method is patched.
    assert [(e.kind, e.stream) for e in trace.events] == [("draw", "numpy")]
    assert trace.events[0].api in ("numpy.random.rand", "numpy.random.random_sample")
    assert trace.events[0].stack[0].filename == HERE


needs_accelerator = pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="records in place with the C accelerator")


@needs_accelerator
def test_a_module_function_held_anywhere_records_in_place_as_the_same_object():
    original = np.random.rand
    held = SimpleNamespace(rand=np.random.rand)  # bound before the trace, where no patch looks
    normal = functools.partial(np.random.normal, 0.0, 1.0)
    np.random.seed(11)
    with rng_trace(print=False) as trace:
        # The very objects the modules hold: identity and equality checks see no wrapper.
        assert np.random.rand is original and np.random.mtrand.rand is original
        assert list(map(held.rand, [2]))  # called from C code: still recorded, at this line
        normal(3)
    after = np.random.rand(2)
    assert [(e.kind, e.api, e.count, e.frame.lineno) for e in trace.events] == [
        ("draw", "numpy.random.rand", 2, trace.events[0].frame.lineno),
        ("draw", "numpy.random.normal", 3, trace.events[0].frame.lineno + 1),
    ]
    assert trace.events[0].frame.filename == HERE
    assert np.random.rand.__func__ is np.random.RandomState.rand  # given back
    untraced = np.random.RandomState(11)
    untraced.rand(2), untraced.normal(0.0, 1.0, 3)
    assert after.tolist() == untraced.rand(2).tolist()  # the stream went on as it would untraced


@needs_accelerator
def test_a_thread_drawing_while_traces_start_and_end_draws_what_it_would_untraced():
    # Each start and end swaps the function of the bound method the thread is calling; threads
    # take turns every microsecond, so starts and ends land inside its calls.
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    np.random.seed(7)
    drawn: list[float] = []
    stop = threading.Event()

    def draw() -> None:
        while not stop.is_set():
            drawn.append(np.random.rand())

    thread = threading.Thread(target=draw)
    thread.start()
    try:
        for _ in range(500):
            with rng_trace(print=False):
                pass
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
    assert len(drawn) > 500
    assert drawn == np.random.RandomState(7).random_sample(len(drawn)).tolist()


def test_an_unseen_draw_between_events_is_reported_before_the_next_recorded_call():
    with rng_trace(print=False) as trace:
        np.random.rand(1)
        list(map(UNSEEN.random_sample, [2]))  # C code calls the reference: no hook sees it
        np.random.rand(1)
    assert [e.kind for e in trace.events] == ["draw", "unattributed", "draw"]
    noticed = trace.events[1]
    assert "before this numpy.random.rand call" in noticed.detail
    # Blamed on no line: the window it happened in ends at the call that noticed it.
    assert noticed.stack == () and noticed.window.noticed[0].filename == HERE


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook on demand")
def test_a_numpy_move_does_not_arm_a_profile_hook_that_could_not_see_it():
    with rng_trace(print=False) as trace:
        np.random.rand(1)
        list(map(UNSEEN.random_sample, [2]))
        np.random.rand(1)
        armed = sys.getprofile() is not None
    assert not armed
    assert not any("armed" in note for note in trace.notes)


def test_an_unseen_draw_after_the_last_event_is_noticed_when_the_block_ends():
    with rng_trace(print=False) as trace:
        np.random.rand(1)
        list(map(UNSEEN.random_sample, [2]))
    assert [e.kind for e in trace.events] == ["draw", "unattributed"]
    assert "block ended" in trace.events[-1].detail


def test_a_cached_gaussian_drawn_unseen_is_still_noticed():
    np.random.seed(3)
    np.random.standard_normal()  # leaves the second gaussian cached
    with rng_trace(print=False) as trace:
        list(map(UNSEEN.standard_normal, [None]))  # uses the cache: the twister does not move
    assert [e.kind for e in trace.events] == ["unattributed"]


def test_an_unseen_draw_of_the_cached_gaussian_is_noticed_before_the_next_recorded_call():
    with rng_trace(print=False) as trace:
        np.random.seed(3)
        np.random.standard_normal()  # draws a pair, keeps the second
        list(map(UNSEEN.standard_normal, [None]))  # takes it: no word of the twister moves
        np.random.rand(1)
    kinds = [(e.kind, e.api) for e in trace.events]
    assert kinds == [
        ("seed", "numpy.random.seed"),
        ("draw", "numpy.random.standard_normal"),
        ("unattributed", "numpy state"),
        ("draw", "numpy.random.rand"),
    ]
    assert "before this numpy.random.rand call" in trace.events[2].detail


@pytest.mark.parametrize("on_draw", ["log", "warn"])
def test_counts_and_apis_do_not_depend_on_the_on_draw_policy(on_draw, recwarn):
    with rng_trace(print=False, on_draw=on_draw) as trace:
        np.random.rand(3)
    assert [(e.api, e.count) for e in trace.draws] == [("numpy.random.rand", 3)]
