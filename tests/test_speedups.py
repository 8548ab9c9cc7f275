"""The C accelerator: the same events as the Python wrappers, and wrappers that still look like functions."""

from __future__ import annotations

import ctypes
import gc
import inspect
import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
import threading
import time
import weakref
from collections.abc import Callable

import numpy as np
import pytest

from rngtrace import _hotpath, rng_trace
from rngtrace._catchall import PinningCatchAll
from rngtrace.sources import _base

accelerated = pytest.mark.skipif(_hotpath.SPEEDUPS is None, reason="the C accelerator is not built or is turned off")

# One program, every kind of call the fast path takes or hands on: module functions,
# the NumPy singleton through the module and through check_random_state, counts of
# arrays and lists, a nested call, a draw that raises, a move nobody recorded (which
# arms the profile hook on 3.10/3.11, so later draws run under it), a second thread, torch.
PROGRAM = textwrap.dedent(
    """
    import json, random, sys, threading
    import numpy as np
    from sklearn.utils import check_random_state
    from rngtrace import rng_trace

    import _random
    # The C base's method bound by hand: no patch reaches it, nor the in-place hook of random.getrandbits
    # (another object). Called from C below, nothing sees it.
    getrandbits = _random.Random.getrandbits.__get__(random._inst)

    def draws():
        random.seed(3)
        np.random.seed(3)
        out = [random.random(), random.randint(1, 6), random.sample(range(50), 4)]
        out += list(np.random.rand(3)) + [np.random.randn(), np.random.randn(), np.random.random()]
        out += list(check_random_state(None).randint(0, 9, size=4))
        out += list(np.random.choice(20, 3)) + list(np.random.permutation(5))
        try:
            np.random.normal(0, -1)  # raises: nothing drawn, nothing recorded
        except ValueError:
            pass
        out += list(map(getrandbits, [8]))  # noticed at the next draw (3.10/3.11: arms the profile hook)
        out += [random.random(), random.random()]
        t = threading.Thread(target=random.random, name="helper")
        t.start(); t.join()
        try:
            import torch
        except ImportError:
            pass
        else:
            torch.manual_seed(3)
            out += torch.rand(3).tolist() + torch.randn(1).tolist() + torch.rand(2, generator=None).tolist()
            out += torch.ones(4).uniform_().tolist()
        return out

    def loop():
        return [draws() for _ in range(3)]

    with rng_trace(print=False) as trace:
        values = loop()
    events = [(e.stream, e.kind, e.api, e.count, e.thread, [(f.function, f.lineno) for f in e.stack])
              for e in trace.events]
    json.dump({"values": values, "events": events, "notes": trace.notes}, sys.stdout, default=float)
    """
)


def run_program(pure: bool, program: str = PROGRAM) -> dict:
    env = dict(os.environ)
    env.pop("RNGTRACE_PURE", None)
    if pure:
        env["RNGTRACE_PURE"] = "1"
    out = subprocess.run([sys.executable, "-c", program], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@accelerated
def test_the_accelerator_records_exactly_what_the_python_wrappers_record():
    fast, pure = run_program(pure=False), run_program(pure=True)
    assert fast["values"] == pure["values"]
    assert fast["events"] == pure["events"] and fast["notes"] == pure["notes"]
    assert len(fast["events"]) > 30
    assert any(kind == "unattributed" for _s, kind, *_ in fast["events"])


@accelerated
def test_patched_callables_are_recorders_that_look_like_the_originals():
    original_uniform, original_sample = random.Random.uniform, np.random.mtrand.RandomState.random_sample
    with rng_trace(print=False):
        patched = random.Random.uniform
        assert type(patched).__name__ == "Recorder"
        assert patched.__name__ == "uniform" and patched.__wrapped__ is original_uniform
        assert patched.__doc__ == original_uniform.__doc__
        assert random.uniform.__func__ is patched  # the module's, bound to the hidden instance: in place
        assert weakref.ref(patched)() is patched  # caches keyed weakly by function accept it
        method = np.random.mtrand.RandomState.random_sample
        assert inspect.signature(method) == inspect.signature(original_sample)
        assert "recorder of numpy.random.random_sample" in repr(method)
        # On the class it binds like a function: other instances pass straight through.
        mine = np.random.RandomState(5)
        assert mine.random_sample(2).tolist() == np.random.RandomState(5).random_sample(2).tolist()


@accelerated
def test_a_recorder_pickles_as_the_function_it_stands_for():
    original = np.random.mtrand.RandomState.random_sample
    untraced = pickle.dumps(random.random)
    with rng_trace(print=False):
        assert pickle.dumps(random.random) == untraced
        method = pickle.loads(pickle.dumps(np.random.mtrand.RandomState.random_sample))
        assert method is np.random.mtrand.RandomState.random_sample  # by name: whatever is there
    assert method is not original


@accelerated
def test_a_seed_is_made_by_the_c_recorder_so_a_stack_the_seed_keeps_shows_no_frame_of_rngtraces():
    # torch keeps the stack of each CUDA seed it defers until CUDA starts (and prints it if that
    # fails): made through the Python wrapper, it showed rngtrace's own frames, at every seed.
    torch = pytest.importorskip("torch")
    tracker = getattr(torch.cuda, "_lazy_seed_tracker", None)
    if tracker is None or torch.cuda.is_initialized():
        pytest.skip("this torch keeps no deferred CUDA seed here")
    with rng_trace(print=False) as trace:
        assert type(torch.manual_seed).__name__ == "Recorder"
        torch.manual_seed(11)
        with pytest.raises(ValueError):
            np.random.seed(-1)  # refused before it moved anything: no event, no move
        np.random.seed(5)
        np.random.rand()
    package = os.path.dirname(_base.__file__).rsplit(os.sep, 1)[0]  # rngtrace's own folder
    kept = [line for call in tracker.get_calls() if call for line in call[1]]
    assert kept and not [line for line in kept if package in line]
    assert [(e.stream, e.kind, e.detail) for e in trace.events] == [
        ("torch", "seed", "11"),
        ("numpy", "seed", "5"),
        ("numpy", "draw", None),
    ]


def python_path_calls(draw: Callable[[], object], n: int) -> list[str]:
    """Call ``draw`` n times; the Python recording functions entered in the second half.

    The Python wrapper, or the hub's general path: the C Recorder hands a draw to either when
    it cannot read what it expects (a slot of _hotpath renamed, a cache never kept). The first
    half is left out: the thread's first draw, the stack cache filling.
    """
    calls: list[str] = []

    def tracer(frame, event, arg):
        if event == "call" and frame.f_code.co_name in ("rngtrace_wrapper", "record_call", "record", "capture"):
            calls.append(frame.f_code.co_name)

    try:
        for i in range(n):
            if i == n // 2:
                sys.settrace(tracer)  # a trace function, unlike a profiler, leaves the fast path alone
            draw()
    finally:
        sys.settrace(None)
    return calls


@accelerated
def test_draws_in_a_loop_take_the_fast_path_and_run_no_python_wrapper():
    def draws():
        random.random()
        np.random.rand()

    with rng_trace(print=False) as trace:
        wrapper_calls = python_path_calls(draws, 200)
    assert len(trace.events) == 400 and wrapper_calls == []


@accelerated
def test_a_decorated_function_drawing_a_few_times_is_recorded_in_c_before_any_frame_is_pinned():
    # Each call is a short trace: its draws walk the whole stack (frame mode WALK), and pinning
    # never starts. The C Recorder walks them itself, with no Python record() per draw.
    tracer = rng_trace(print=False)

    @tracer
    def draws():
        random.random()
        np.random.rand()
        np.random.rand(3)

    wrapper_calls = python_path_calls(draws, 40)
    events = tracer.last_trace.events
    assert wrapper_calls == []
    assert [(e.api, e.count) for e in events] == [
        ("random.random", 1),
        ("numpy.random.rand", 1),
        ("numpy.random.rand", 3),
    ]
    assert [e.stack[0].function.rsplit(".", 1)[-1] for e in events] == ["draws"] * 3


@accelerated
def test_a_loop_drawing_on_one_line_allocates_no_event_per_draw_for_the_collector_to_count():
    # Each allocation of a tracked object counts towards the collector's next pass, whether it is
    # untracked afterwards or not; in a program holding many objects those passes are the cost.
    def loop(n: int) -> int:
        gc.disable()
        try:
            before = gc.get_count()[0]
            for _ in range(n):
                random.random()
            return gc.get_count()[0] - before
        finally:
            gc.enable()

    # The first draws walk the whole stack and intern it, PIN_AFTER of them before pinning starts (with
    # its sweeper thread): how much they allocate depends on how deep the stack is (an xdist worker's is
    # deeper), so the count starts after them.
    warm = PinningCatchAll.PIN_AFTER + 10
    with rng_trace(print=False) as trace:
        loop(warm)
        counted = loop(1000)
    assert counted < 100
    # The same events as ever: one per draw, each equal to the last, the same stack.
    assert len(trace.events) == warm + 1000
    assert len({(e.api, e.kind, e.count, e.frame.lineno) for e in trace.events[10:]}) == 1


@accelerated
def test_a_call_the_fast_path_hands_on_is_recorded_by_the_python_wrapper():
    # Two traces at once: the fast path needs exactly one, so every draw goes to Python.
    with rng_trace(print=False) as outer, rng_trace(streams="random", print=False) as inner:
        random.random()
        np.random.rand()
    assert [e.api for e in outer.events] == ["random.random", "numpy.random.rand"]
    assert [e.api for e in inner.events] == ["random.random"]


def test_a_finalizer_that_draws_while_an_event_is_recorded_does_not_deadlock():
    # The collector runs at every allocation; a cycle's finalizer draws from the stream
    # whose lock the recording wrapper holds at that moment.
    code = textwrap.dedent(
        """
        import gc, random
        from rngtrace import rng_trace

        class Cycle:
            def __init__(self):
                self.me = self
            def __del__(self):
                random.random()

        gc.set_threshold(1)
        with rng_trace(print=False) as trace:
            for _ in range(200):
                Cycle()
                random.random()
        gc.set_threshold(700)
        print(sum(e.api == "random.random" for e in trace.events))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) >= 200


@pytest.mark.parametrize("accelerator", [True, False], ids=["C", "pure"])
def test_an_in_place_view_changes_exactly_when_its_regions_do(accelerator, monkeypatch):
    from rngtrace.sources import _inplace

    if accelerator and _hotpath.SPEEDUPS is None:
        pytest.skip("the C accelerator is not built or is turned off")
    if not accelerator:
        monkeypatch.setattr(_inplace, "_speedups", None)
    memory = ctypes.create_string_buffer(b"\x00" * 16, 16)
    start = ctypes.addressof(memory)
    view = _inplace.in_place([(start, 4), (start + 8, 4)], memory)
    before = view.value
    memory[5] = b"x"  # between the regions
    assert view.value == before
    memory[9] = b"\x00"  # written, not changed
    assert view.value == before
    memory[10] = b"y"
    assert view.value != before


@accelerated
def test_an_in_place_view_refuses_regions_it_cannot_read():
    with pytest.raises(ValueError, match="regions"):
        _hotpath.SPEEDUPS.InPlace((), None)
    with pytest.raises(ValueError, match="positive size"):
        _hotpath.SPEEDUPS.InPlace(((1024, 0),), None)


@accelerated
def test_draws_through_new_frames_are_walked_in_c_with_no_python_path():
    # A forward() or a per-sample helper: frames the stack cache has never seen, at every draw.
    def helper(k):
        return random.random() if k <= 1 else helper(k - 1)

    def draws():
        helper(6)
        np.random.rand()

    with rng_trace(print=False) as trace:
        wrapper_calls = python_path_calls(draws, 400)
    assert len(trace.events) == 800 and wrapper_calls == []
    here = [f.function.rsplit(".", 1)[-1] for f in trace.events[-2].stack]  # 3.10 names no class
    assert here[:7] == ["helper"] * 6 + ["draws"]


# The dropout family's conditions, called every way the C Recorder reads them: positionally, by
# keyword, defaults, floats, ints, a tensor p, and arguments the function rejects.
DROPOUT_PROGRAM = textwrap.dedent(
    """
    import json, sys, torch
    import torch.nn.functional as F
    from rngtrace import rng_trace

    x = torch.ones(4, 3, 2, 2)
    calls = [
        lambda: F.dropout(x, 0.5, True), lambda: F.dropout(x, 0.5, False), lambda: F.dropout(x),
        lambda: F.dropout(x, training=True), lambda: F.dropout(x, p=0.0, training=True),
        lambda: F.dropout(x, p=1.0, training=True), lambda: F.dropout(x, 1, True), lambda: F.dropout(x, 0, True),
        lambda: F.dropout(x, torch.tensor(0.3), True), lambda: F.dropout(x, training=1, p=0.2),
        lambda: F.dropout(x, 1.5, True), lambda: F.dropout(x, float("nan"), True),
        lambda: F.dropout2d(x, 0.5, True), lambda: F.dropout3d(x, 0.5, False),
        lambda: F.alpha_dropout(x, 0.5, True), lambda: F.feature_alpha_dropout(x, 0.2, training=True),
        lambda: torch.dropout(x, 0.5, True), lambda: torch.dropout(x, 0.5, False),
        lambda: torch.dropout(x, 0.5, train=True),
        lambda: torch.nn.Dropout(0.5).train()(x), lambda: torch.nn.Dropout(0.5).eval()(x),
        lambda: F.rrelu(x, training=True), lambda: F.rrelu(x),
        lambda: F.scaled_dot_product_attention(x, x, x, dropout_p=0.5), lambda: F.scaled_dot_product_attention(x, x, x),
    ]
    values, errors = [], []
    with rng_trace(print=False, streams="torch") as trace:
        torch.manual_seed(5)
        for _ in range(3):
            for call in calls:
                try:
                    values.append(call().sum().item())
                except Exception as error:
                    errors.append(type(error).__name__)
    events = [(e.kind, e.api, e.count, [f.lineno for f in e.stack]) for e in trace.events]
    json.dump({"values": values, "errors": errors, "events": events}, sys.stdout, default=float)
    """
)


@accelerated
def test_the_dropout_conditions_in_c_decide_as_the_python_ones_do():
    pytest.importorskip("torch")
    fast, pure = (run_program(pure, DROPOUT_PROGRAM) for pure in (False, True))
    assert fast == pure
    assert len(fast["events"]) > 20 and fast["errors"]  # p=1.5 is refused by dropout itself, and still a draw here
    assert any(kind == "draw" and api == "torch.dropout" for kind, api, *_ in fast["events"])


def test_a_condition_reads_positions_keywords_and_defaults_and_counts_what_it_cannot_judge_as_a_draw():
    dropout = _base.Condition("dropout", ((2, "training", False), (1, "p", 0.5)))
    assert dropout((None, 0.5, True), {}) and not dropout((None, 0.5, False), {}) and not dropout((None,), {})
    assert dropout((None,), {"training": True}) and not dropout((None, 1.0, True), {})
    assert not dropout((None, 0, True), {}) and dropout((None, object(), True), {})  # 0 < object() raises
    assert _base.Condition("positive", ((4, "dropout_p", 0.0),))((), {"dropout_p": 0.1})
    assert not _base.Condition("not_false", ((2, "train", None),))((None, 0.5, False), {})
    with pytest.raises(KeyError):
        _base.Condition("sometimes", ())


@accelerated
def test_a_recorder_refuses_a_condition_or_an_argument_it_does_not_know():
    from rngtrace._hub import HUB
    from rngtrace._threads import Fingerprint

    made = dict(hot=HUB.rec.hot, fingerprint=Fingerprint(), lock=threading.RLock())
    with pytest.raises(ValueError, match="unknown condition"):
        _hotpath.SPEEDUPS.Recorder(
            print,
            print,
            None,
            **made,
            stream="s",
            kind="draw",
            api="api",
            moved="moved",
            count_of=None,
            condition=("sometimes", ()),
        )
    recorder = _hotpath.SPEEDUPS.Recorder(
        print,
        len,
        None,
        **made,
        stream="s",
        kind="draw",
        api="api",
        moved="moved",
        count_of=None,
        condition=("truthy", ((0, "x", None),)),
    )
    assert recorder("abc") == 3  # no trace active: straight through
    named = dict(made, stream="s", kind="seed", api="api", moved="moved", count_of=None)
    with pytest.raises(TypeError, match="inside= is a tuple of file prefixes"):
        _hotpath.SPEEDUPS.Recorder(print, len, None, **named, inside=["/lib/"])
    with pytest.raises(TypeError, match="after= is a callable"):
        _hotpath.SPEEDUPS.Recorder(print, len, None, **named, after="record it")


@accelerated
def test_dropout_in_training_takes_the_fast_path_and_eval_draws_nothing():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = torch.ones(8)

    def draws():
        F.dropout(x, 0.5, True)  # draws (torch.dropout, in place): the C Recorder asks the condition itself
        F.dropout(x, 0.5, False)  # eval: no draw, no event

    with rng_trace(print=False, streams="torch") as trace:
        wrapper_calls = python_path_calls(draws, 200)
    assert [e.api for e in trace.events] == ["torch.dropout"] * 200
    assert wrapper_calls == []


@accelerated
def test_a_patch_list_swapped_again_after_its_entries_changed_swaps_the_entries_it_holds_now():
    # The C swap keeps each list it met as columns, for the next trace's pass: a list whose
    # entries changed since (the same list, as long) is swapped as it is now, never as it was.
    from rngtrace._patches import INHERITED

    swap = _hotpath.SPEEDUPS.swap
    ns = {"a": 1, "b": 2}
    entries = [(ns, "a", 1, "A", None)]
    for _ in range(2):  # the second pass reads the kept columns
        assert swap(entries, True, INHERITED, {}) is True and ns == {"a": "A", "b": 2}
        assert swap(entries, False, INHERITED, {}) == [] and ns == {"a": 1, "b": 2}
    entries[0] = (ns, "b", 2, "B", None)
    assert swap(entries, True, INHERITED, {}) is True and ns == {"a": 1, "b": "B"}
    assert swap(entries, False, INHERITED, {}) == [] and ns == {"a": 1, "b": 2}
    with pytest.raises(TypeError):  # a list with one entry more is checked whole again, and refused
        swap([*entries, ("not a dict", "b", 2, "B", None)], True, INHERITED, {})
    assert ns == {"a": 1, "b": 2}


@accelerated
def test_a_hook_list_passed_again_after_its_pairs_changed_hooks_the_builtins_it_holds_now():
    # The same for the builtins recorded in place: a list of (builtin, wrapper) pairs met before
    # is hooked from what was kept, unless its pairs changed.
    import _random

    hook = _hotpath.SPEEDUPS.hook_builtins
    first, second = _random.Random(1).random, _random.Random(2).random  # builtins nothing else calls
    pairs = [(first, lambda: "first hooked")]
    for _ in range(2):
        assert hook(pairs, True) is True and first() == "first hooked"
        assert hook(pairs, False) is True and isinstance(first(), float)
    pairs[0] = (second, lambda: "second hooked")
    assert hook(pairs, True) is True
    assert second() == "second hooked" and isinstance(first(), float)
    assert hook(pairs, False) is True and isinstance(second(), float)
    assert first not in _hotpath.SPEEDUPS.hooked_builtins() and second not in _hotpath.SPEEDUPS.hooked_builtins()


@accelerated
def test_a_stream_lock_is_reentrant_and_held_by_one_thread_at_a_time():
    lock = _hotpath.SPEEDUPS.StreamLock()
    with lock:
        assert lock.acquire() and lock._is_owned()  # again, on the same thread: a finalizer drawing
        lock.release()
        other = []
        thread = threading.Thread(target=lambda: other.append((lock.acquire(False), lock.acquire(timeout=0.01))))
        thread.start()
        thread.join()
        assert other == [(False, False)]
    assert not lock._is_owned()
    with pytest.raises(RuntimeError, match="un-acquired"):
        lock.release()
    lock.acquire()
    lock._at_fork_reinit()  # in a forked child, nobody holds it
    assert lock.acquire(False) and lock._is_owned()
    lock.release()


@accelerated
def test_a_stream_lock_taken_by_many_threads_at_once_lets_one_in_at_a_time_and_wakes_every_waiter():
    lock = _hotpath.SPEEDUPS.StreamLock()
    counter, inside, errors = [0], [0], []

    def work(n: int, timed: bool) -> None:
        for _ in range(n):
            if timed:
                while not lock.acquire(timeout=0.001):  # timed waits that give up, then come back
                    pass
            else:
                lock.acquire()
            try:
                inside[0] += 1
                if inside[0] != 1:
                    errors.append(inside[0])
                value = counter[0]
                time.sleep(0)  # hands the GIL over while holding the lock: the others queue up
                counter[0] = value + 1
                inside[0] -= 1
            finally:
                lock.release()

    threads = [threading.Thread(target=work, args=(300, i % 2 == 1), daemon=True) for i in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(thread.is_alive() for thread in threads), "a waiter was never woken"
    assert errors == [] and counter[0] == 6 * 300
    assert lock.acquire(False)  # free, and nobody left waiting
    lock.release()


@accelerated
def test_a_wait_for_a_stream_lock_is_interrupted_by_a_signal_handler_that_raises():
    import signal

    if not hasattr(signal, "setitimer"):
        pytest.skip("needs setitimer")
    lock = _hotpath.SPEEDUPS.StreamLock()
    holding, done = threading.Event(), threading.Event()

    def hold():
        with lock:
            holding.set()
            done.wait(5)

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    thread = threading.Thread(target=hold)
    thread.start()
    holding.wait(5)
    previous = signal.signal(signal.SIGALRM, interrupt)
    try:
        signal.setitimer(signal.ITIMER_REAL, 0.05)
        with pytest.raises(KeyboardInterrupt):
            lock.acquire()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        done.set()
        thread.join()
    assert lock.acquire(False)
    lock.release()


@accelerated
def test_the_stream_locks_are_the_ones_the_c_recorder_takes_without_a_method_call():
    from rngtrace._hub import HUB

    with rng_trace(print=False):
        random.random()
    assert type(HUB.rec.stream_lock("random")) is _hotpath.SPEEDUPS.StreamLock


# Seeds as pytest-randomly and programs make them, each argument form seed_detail describes, by
# the module functions and by the singletons' own methods (the instance left out of the detail),
# first while the stack cache walks (a short trace), then while it pins frames (after many draws).
SEEDS_PROGRAM = textwrap.dedent(
    """
    import json, random, sys
    import numpy as np
    from rngtrace import rng_trace

    def seeds(i):
        random.seed(i)
        np.random.seed(i)
        random.seed(a=2.5)
        np.random.seed(seed=7)
        random.seed("text")
        random.seed(b"bytes")
        random.seed(10 ** 60)  # its repr is cut at 40 characters
        random.seed()  # OS entropy: no value
        np.random.seed(None)
        np.random.seed(np.array([1, 2, 3], dtype=np.uint32))  # no repr: its type's name
        np.random.mtrand._rand.seed(4)
        random._inst.seed(9)
        random.setstate(random.getstate())  # the same state: no event
        random.setstate(((3, tuple(range(624)) + (624,), None)))

    def deep(n, i):
        return seeds(i) if n == 0 else deep(n - 1, i)

    with rng_trace(print=False) as trace:
        for i in range(3):
            deep(i * 7, i)
        for _ in range(200):
            random.random()  # enough draws to start pinning frames
        for i in range(3):
            deep(i * 7, i)
    events = [(e.stream, e.kind, e.api, e.count, e.detail, e.thread, [(f.function, f.lineno) for f in e.stack])
              for e in trace.events if e.kind != "draw"]
    json.dump({"values": [random.random(), float(np.random.rand())], "events": events, "notes": trace.notes},
              sys.stdout)
    """
)


@accelerated
def test_a_seed_the_accelerator_records_has_the_value_stack_and_kind_the_python_wrapper_gives_it():
    fast, pure = run_program(pure=False, program=SEEDS_PROGRAM), run_program(pure=True, program=SEEDS_PROGRAM)
    assert fast == pure
    details = [detail for _s, kind, _a, _c, detail, *_ in fast["events"] if kind == "seed"]
    assert len(details) == 6 * 13
    assert details[:13] == [
        "0", "0", "2.5", "7", "'text'", "b'bytes'", repr(10**60)[:37] + "...", None, "None", "<ndarray>", "4", "9",
        "<tuple>",
    ]  # fmt: skip
