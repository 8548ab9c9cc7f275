"""A program that hits the recursion limit inside a trace catches its RecursionError and goes on.

The catch-all's callbacks run on every call and every frame an exception leaves;
at the recursion limit they cannot always run themselves. Whatever they fail at
stays theirs: the program's handler runs as it would untraced, and the trace
records correctly afterwards. Each program runs in a child process, which plays
the recursion-limit games (and sees what is left behind) apart from pytest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rngtrace import _hotpath

TESTS = os.path.dirname(os.path.abspath(__file__))

PROGRAM = textwrap.dedent(
    """
    import json, random, sys, threading
    import numpy as np
    import numpy.random
    from random import random as bound  # bound before tracing: out of the patches' reach
    sys.path.insert(0, {tests!r})
    from conftest import _global_hooks, _namespaces
    from rngtrace import rng_trace

    def draw_random():
        random.random()

    def draw_numpy():
        np.random.rand()

    def draw_singleton():
        random._inst.random()  # the instance's method, patched on its class (a C Recorder, with the accelerator)

    def nothing():
        pass

    DRAW = {{"random.random": draw_random, "np.random.rand": draw_numpy,
             "through the singleton": draw_singleton, "no draw": nothing}}[sys.argv[1]]

    def deep(n):
        DRAW()
        return deep(n - 1)  # the recursion limit ends it, at depth 300 of the 400 asked

    def after():
        return random.random()

    def after_singleton():
        return random._inst.random()

    def outer():
        return inner()

    def inner():
        return np.random.rand()

    hooks, namespaces = _global_hooks(), _namespaces()
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)
    with rng_trace(print=False) as trace:
        bound()  # a move no patch saw: on 3.10/3.11 the next recorded call arms the profile hook
        random.random()
        try:
            deep(400)
        except RecursionError as error:
            tb = error.__traceback__
            while tb.tb_next is not None:
                tb = tb.tb_next
            raised_in = tb.tb_frame.f_code.co_filename
            print("caught")
            threading.Event()
            handled = True
        sys.setrecursionlimit(limit)
        random.random(); np.random.rand()  # notice a move made at the very limit, which no call recorded
        mark = len(trace.events)
        after(); outer(); after_singleton()
    changed = [f"{{name}}.{{key}}" for name, attrs in namespaces.items() for key, value in attrs.items()
               if callable(value) and _namespaces()[name].get(key) is not value]
    json.dump({{
        "handled": handled,
        "raised in": raised_in,
        "deep": [e.kind for e in trace.events[2:mark] if [f.function for f in e.stack[:2]] == [DRAW.__name__, "deep"]],
        "after": [(e.kind, e.api, [f.function for f in e.stack]) for e in trace.events[mark:]],
        "left behind": {{"hooks": _global_hooks() != hooks, "patched": changed}},
    }}, sys.stdout)
    """
).format(tests=TESTS)

MODES = [pytest.param(False, id="C"), pytest.param(True, id="pure")]
DRAWS = ["random.random", "np.random.rand", "through the singleton", "no draw"]


def run(draw: str, pure: bool) -> dict:
    env = dict(os.environ)
    env.pop("RNGTRACE_PURE", None)
    if pure:
        env["RNGTRACE_PURE"] = "1"
    out = subprocess.run([sys.executable, "-c", PROGRAM, draw], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    first, _, rest = out.stdout.partition("\n")
    assert first == "caught"
    return json.loads(rest)


@pytest.mark.parametrize("pure", MODES)
@pytest.mark.parametrize("draw", DRAWS)
def test_a_caught_recursion_error_lets_the_handler_run_and_the_program_go_on(draw, pure):
    if not pure and _hotpath.SPEEDUPS is None:
        pytest.skip("the C accelerator is not built or is turned off")
    result = run(draw, pure)
    assert result["handled"]
    if draw == "no draw" or (draw == "through the singleton" and not pure):
        # What it caught is its own RecursionError, raised in its own code: no callback raised one.
        # (A Python wrapper, without the accelerator, is a frame of the draw: the limit can fall in it.)
        assert result["raised in"] == "<string>"
    assert result["left behind"] == {"hooks": False, "patched": []}


@pytest.mark.parametrize("pure", MODES)
@pytest.mark.parametrize("draw", ["random.random", "through the singleton"])
def test_after_the_recursion_limit_every_draw_is_recorded_with_its_own_stack(draw, pure):
    if not pure and _hotpath.SPEEDUPS is None:
        pytest.skip("the C accelerator is not built or is turned off")
    result = run(draw, pure)
    # Draws down to the limit are recorded (one at the very limit may show as unattributed, never misplaced).
    assert len(result["deep"]) > 250 and set(result["deep"]) == {"draw"}
    singleton = ["draw", "random.random", ["after_singleton", "<module>"]]
    if sys.version_info < (3, 12) and result["after"][-1] != singleton:
        # Python takes a profile hook off where it gets no frame to run in, at the limit: later calls
        # through references the patches miss show as unattributed, never misplaced.
        singleton = ["unattributed", "random state", []]
    assert result["after"] == [
        ["draw", "random.random", ["after", "<module>"]],
        ["draw", "numpy.random.rand", ["inner", "outer", "<module>"]],
        singleton,
    ]
