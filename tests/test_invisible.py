"""The program cannot tell it is traced, and no move of a stream goes unrecorded.

Warnings raised inside a traced draw point where they would untraced; a call
that draws and then raises is still an event; a finalizer, signal handler or
callback drawing in the middle of a recorded call is an event of its own.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import textwrap
import threading
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from rngtrace import rng_trace

np = pytest.importorskip("numpy")

HERE = Path(__file__).resolve()


def caught(fn: Callable[[], Any]) -> list[tuple[str, int, str]]:
    """(file name, line, category) of each warning ``fn`` raises."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn()
    return [
        (Path(w.filename).name, w.lineno, w.category.__name__)
        for w in seen
        if w.category.__module__ != "rngtrace._errors"
    ]


def shuffle_a_dict() -> None:
    np.random.shuffle({0: 0, 1: 1, 2: 2})  # NumPy warns: a dict is not a sequence


def shuffle_a_dict_with_an_instance() -> None:
    np.random.RandomState(0).shuffle({0: 0, 1: 1, 2: 2})  # not the singleton: passes through


WARNERS = [shuffle_a_dict, shuffle_a_dict_with_an_instance]
if sys.version_info < (3, 12):

    def randrange_of_a_float() -> None:
        random.randrange(10.0)  # DeprecationWarning in 3.10/3.11, pointing at the caller (stacklevel 2)

    WARNERS.append(randrange_of_a_float)


@pytest.mark.parametrize("on_draw", ["log", "warn"])
@pytest.mark.parametrize("warner", WARNERS, ids=lambda f: f.__name__)
def test_a_warning_raised_inside_a_traced_draw_points_where_it_does_untraced(warner: Callable, on_draw: str) -> None:
    untraced = caught(warner)
    assert untraced and untraced[0][0] == HERE.name

    def traced() -> None:
        with rng_trace(print=False, on_draw=on_draw):
            warner()

    assert caught(traced) == untraced


def test_a_warning_on_a_threads_first_draw_in_a_block_points_at_the_caller() -> None:
    # With the accelerator, a thread's first draw in a block takes the Python wrapper.
    found: list = []

    def worker() -> None:
        found.extend(caught(shuffle_a_dict))

    with rng_trace(print=False):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    assert found == caught(shuffle_a_dict)


def test_a_module_warning_filter_still_matches_a_traced_draw() -> None:
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*shuffling a 'dict'", module=__name__)
        with rng_trace(print=False), pytest.raises(UserWarning):
            shuffle_a_dict()


def test_torch_init_warnings_point_where_they_do_untraced() -> None:
    torch = pytest.importorskip("torch")

    def init() -> None:
        torch.nn.init.kaiming_uniform_(torch.empty(0, 3))  # "Initializing zero-element tensors is a no-op"

    untraced = caught(init)
    assert untraced

    def traced() -> None:
        with rng_trace(print=False):
            init()

    assert caught(traced) == untraced


def test_numpys_own_untyped_shuffle_warning_test_passes_traced_per_test(tmp_path: Path) -> None:
    plugin = tmp_path / "trace_each_test.py"
    plugin.write_text(
        textwrap.dedent(
            """
            import pytest
            from rngtrace import rng_trace

            @pytest.hookimpl(hookwrapper=True)
            def pytest_runtest_call(item):
                with rng_trace(print=False):
                    yield
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "--noconftest",
            "-p",
            "trace_each_test",
            "--pyargs",
            "numpy.random.tests.test_random",
            "-k",
            "test_shuffle_untyped_warning",
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "3 passed" in done.stdout  # through np.random, a RandomState of its own, a Generator


# -- a call that draws and then raises -------------------------------------------------


class Breaks(list):
    """A sequence whose assignment fails after the shuffle has drawn (Ctrl-C landing inside it)."""

    def __init__(self, items: list, error: type[BaseException]) -> None:
        super().__init__(items)
        self.error = error

    def __setitem__(self, index: Any, value: Any) -> None:
        raise self.error("landed inside the shuffle")


@pytest.mark.parametrize("error", [TypeError, KeyboardInterrupt])
def test_a_call_that_draws_and_then_raises_is_recorded_with_its_exception(error: type[BaseException]) -> None:
    with rng_trace(print=False) as trace:
        random.random()
        with pytest.raises(error):
            random.shuffle(Breaks([1, 2, 3, 4], error))
    events = [(e.api, e.kind, e.detail) for e in trace.events]
    assert events == [
        ("random.random", "draw", None),
        ("random.shuffle", "draw", f"raised {error.__name__} after it moved the stream"),
    ]
    assert (
        trace.events[1].frame.lineno
        == test_a_call_that_draws_and_then_raises_is_recorded_with_its_exception.__code__.co_firstlineno + 5
    )


def test_shuffling_a_tuple_draws_then_raises_and_is_recorded() -> None:
    with rng_trace(print=False) as trace:
        random.random()
        with pytest.raises(TypeError):
            random.shuffle((1, 2, 3))
    assert [e.api for e in trace.events] == ["random.random", "random.shuffle"]
    assert "raised TypeError" in trace.events[1].detail


def test_a_numpy_call_that_draws_and_then_raises_is_recorded() -> None:
    with rng_trace(print=False) as trace:
        np.random.rand()
        with pytest.raises(KeyboardInterrupt):
            np.random.shuffle(Breaks([1, 2, 3, 4], KeyboardInterrupt))
    assert [(e.api, e.kind) for e in trace.events] == [("numpy.random.rand", "draw"), ("numpy.random.shuffle", "draw")]
    assert trace.events[1].detail == "raised KeyboardInterrupt after it moved the stream"


def test_a_call_that_raises_before_drawing_is_no_event() -> None:
    with rng_trace(print=False) as trace:
        np.random.rand()
        with pytest.raises(ValueError):
            np.random.choice([], 3)
        random.random()
        with pytest.raises(ValueError):
            random.sample([1, 2], 5)
    assert [e.api for e in trace.events] == ["numpy.random.rand", "random.random"]


# -- draws made by other code in the middle of a recorded call ---------------------------


class Finalized:
    """Draws from ``random`` when collected."""

    def __del__(self) -> None:
        random.random()  # FINALIZER LINE


class DropsOnWrite(list):
    """A sequence that lets go of a Finalized object at each assignment: its finalizer runs mid-shuffle."""

    def __init__(self, items: list) -> None:
        super().__init__(items)
        self.held = [Finalized() for _ in items]

    def __setitem__(self, index: Any, value: Any) -> None:
        super().__setitem__(index, value)
        if self.held:
            self.held.pop()


def finalizer_line() -> int:
    return next(i for i, line in enumerate(HERE.read_text().splitlines(), 1) if line.endswith("# FINALIZER LINE"))


@pytest.mark.parametrize("module", ["random", "numpy"])
def test_a_finalizer_drawing_inside_a_recorded_call_is_its_own_event(module: str) -> None:
    rounds = 50
    with rng_trace(print=False) as trace:
        for _ in range(rounds):
            seq = DropsOnWrite(list(range(6)))
            finalizers = len(seq.held)
            # Looked up inside the block: a reference taken before it is the untraced original.
            (random.shuffle if module == "random" else np.random.shuffle)(seq)
            finalizers -= len(seq.held)
            assert finalizers > 0
            del seq
    events = trace.events
    inner = [e for e in events if e.frame is not None and e.frame.lineno == finalizer_line()]
    outer = [e for e in events if e.api.endswith("shuffle")]
    assert len(outer) == rounds
    assert not [e for e in events if e.kind == "unattributed"]
    # Every finalizer that ran, inside the shuffles and when each sequence went: one event each.
    assert len(inner) == rounds * 6
    assert all(e.api == "random.random" for e in inner)


def test_each_signal_handler_draw_is_its_own_event() -> None:
    if not hasattr(signal, "setitimer"):
        pytest.skip("needs setitimer")
    handled = []

    def handler(signum: int, frame: Any) -> None:
        handled.append(random.random())  # HANDLER LINE

    line = next(i for i, text in enumerate(HERE.read_text().splitlines(), 1) if text.endswith("# HANDLER LINE"))
    previous = signal.signal(signal.SIGALRM, handler)
    try:
        with rng_trace(print=False) as trace:
            signal.setitimer(signal.ITIMER_REAL, 0.0005, 0.0005)
            data = list(range(200))
            while len(handled) < 200:
                random.shuffle(data)
                np.random.shuffle(data)
            signal.setitimer(signal.ITIMER_REAL, 0, 0)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, previous)
    from_handler = [e for e in trace.events if e.frame is not None and e.frame.lineno == line]
    assert len(from_handler) == len(handled)
    assert not [e for e in trace.events if e.kind == "unattributed"]


def test_the_printed_log_says_under_the_call_that_it_raised() -> None:
    from rngtrace.render import render

    with rng_trace(print=False) as trace:
        random.random()
        with pytest.raises(TypeError):
            random.shuffle((1, 2, 3))
    lines = render(trace, "text", color=False).splitlines()
    row = next(i for i, line in enumerate(lines) if "random.shuffle" in line)
    assert lines[row + 1].strip() == "raised TypeError after it moved the stream"
