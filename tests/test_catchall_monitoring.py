"""The 3.12+ catch-all: made once, armed by a move nobody recorded, its events on only while the user's block runs.

A trace starts with the catch-all armed, not in: the streams' builtins record in place and their
Python functions are patched, so it is needed only for a reference no patch reaches. The first move
nobody recorded puts it in (claims a tool id, turns its events on); a trace after one whose catch-all
attributed a call has it from its start.

"Nothing left behind" here means: once the last trace has ended, no ``sys.monitoring`` tool id is
rngtrace's, no global event of it is on, and no callback of it is registered; what is kept for the next
trace (its callbacks, its callee table, its set of rngtrace's own code) is Python objects only.
"""

from __future__ import annotations

import _random
import random
import subprocess
import sys
import textwrap
import threading

import pytest

from rngtrace import rng_trace
from rngtrace._hub import HUB

pytestmark = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")

# The C base's method bound by hand: no patch or in-place hook reaches it (random.random is another
# object), only the catch-all sees calls through it.
prebound_random = _random.Random.random.__get__(random._inst)


def wanting_the_catch_all() -> None:
    """A trace whose catch-all, armed by a move nobody recorded, attributed a call: the next has it from its start."""
    with rng_trace(print=False):
        prebound_random()
        random.random()  # notices the move: arms the catch-all
        prebound_random()  # attributed by it


def _rngtrace_tools() -> list[int]:
    return [tool for tool in range(6) if sys.monitoring.get_tool(tool) == "rngtrace"]


def test_a_trace_that_meets_no_move_unseen_claims_no_tool_id():
    with rng_trace(print=False):
        pass  # the next trace starts armed
    with rng_trace(print=False) as trace:
        random.random()
        tools = _rngtrace_tools()
        armed = HUB.catchall.describe()
    assert tools == [] and "armed" in armed
    assert [e.api for e in trace.events] == ["random.random"]


def test_consecutive_traces_reuse_one_catch_all_and_hold_no_tool_id_between_them():
    with rng_trace(print=False):
        pass  # the next trace starts armed
    seen, apis = [], []
    for _ in range(3):
        with rng_trace(print=False) as trace:
            prebound_random()
            random.random()  # notices the move before it (the first trace): the catch-all goes in
            prebound_random()
            seen.append(HUB.catchall)
        assert _rngtrace_tools() == []
        apis.append([(e.kind, e.api) for e in trace.events])
    assert apis[0] == [("unattributed", "random state"), ("draw", "random.random"), ("draw", "random.random")]
    assert apis[1] == apis[2] == [("draw", "random.random")] * 3  # in from the start: the trace before needed it
    assert seen[0] is seen[1] is seen[2]
    tool = seen[0].tool
    assert sys.monitoring.get_events(tool) == 0
    for event in ("CALL", "PY_RETURN", "PY_YIELD", "PY_UNWIND"):
        assert sys.monitoring.register_callback(tool, getattr(sys.monitoring.events, event), None) is None


def test_the_catch_alls_events_are_off_while_rngtraces_own_start_runs(monkeypatch):
    events_then = []
    put_catchall = HUB.put_catchall  # each way in puts the catch-all in, then goes on before the block

    def probe():
        put_catchall()
        events_then.append(sys.monitoring.get_events(HUB.catchall.tool))

    wanting_the_catch_all()
    monkeypatch.setattr(HUB, "put_catchall", probe)
    for _ in range(2):  # the first trace goes the general way, the next the lone way
        with rng_trace(print=False):
            in_block = sys.monitoring.get_events(HUB.catchall.tool)
            prebound_random()  # attributed: the next trace has the catch-all from its start too
        assert in_block == sys.monitoring.events.CALL | sys.monitoring.events.PY_UNWIND
    assert events_then == [0, 0]


def test_the_catch_alls_events_are_off_while_the_last_trace_undoes_its_patches(monkeypatch):
    events_then = []
    forget_streams = HUB.forget_streams  # the lone undo calls it before it takes the catch-all off

    def probe(names):
        tool = getattr(HUB.catchall, "tool", None)
        if tool is not None:
            events_then.append(sys.monitoring.get_events(tool))
        forget_streams(names)

    wanting_the_catch_all()
    monkeypatch.setattr(HUB, "forget_streams", probe)
    for _ in range(3):
        with rng_trace(print=False):
            prebound_random()  # attributed: the next trace has the catch-all from its start too
    assert events_then and set(events_then) == {0}


def test_an_inner_trace_ending_leaves_the_outer_ones_catch_all_watching():
    name = "test_an_inner_trace_ending_leaves_the_outer_ones_catch_all_watching"
    with rng_trace(print=False) as outer:
        prebound_random()
        random.random()  # notices the move: the catch-all goes in
        with rng_trace(print=False):
            pass
        prebound_random()
    assert [(e.api, e.stack[0].function) for e in outer.events if e.kind == "draw"][-1] == ("random.random", name)


def test_a_stream_imported_inside_a_trace_has_its_catch_all_watching_at_once():
    # A fresh process: numpy is imported inside the trace, so its catch-all is put in mid-block.
    code = textwrap.dedent(
        """
        from rngtrace import rng_trace
        with rng_trace(print=False, streams=["numpy"]) as trace:
            import numpy.random
            singleton = numpy.random.mtrand._rand  # reached through no patched attribute
            singleton.random_sample()
        print([(e.kind, e.api) for e in trace.events if e.kind == "draw"])
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[('draw', 'numpy.random.random_sample')]", out.stderr


def test_a_with_statements_exit_site_is_not_enabled_again_after_each_block(monkeypatch):
    # The exit call is the catch-all's to disable (it ends a block, never draws); enabling the site
    # again at each block's end re-instrumented the user's function twice per block.
    enabled_again = []
    set_local_events = sys.monitoring.set_local_events

    def spy(tool, code, events):
        enabled_again.append(code.co_name)
        return set_local_events(tool, code, events)

    monkeypatch.setattr(sys.monitoring, "set_local_events", spy)

    def a_block():
        with rng_trace(print=False):
            prebound_random()  # attributed: the next block has the catch-all from its start too

    wanting_the_catch_all()
    for _ in range(3):
        a_block()
    assert "a_block" not in enabled_again


#: the catch-all each of ``_traces``' traces had (its stack cache sees frame exits only where it is in)
hooks: list[str] = []

# Which functions a draw passed through, read from the frames themselves (the truth a trace's stack must match).
_truth: list[list[str]] = []


def _leaf() -> None:
    f, names = sys._getframe(), []
    while f is not None and f.f_code is not _traces.__code__:
        names.append(f.f_code.co_name)
        f = f.f_back
    _truth.append(names)
    random.random()


def _x() -> None:
    _leaf()


def _g1() -> None:
    _x()


def _g2() -> None:
    _x()


def _h1() -> None:
    _g1()
    _g2()


def _h2() -> None:
    _g2()
    _g1()


def _traces(mismatches: list) -> None:
    callers = random.Random(1)
    hooks.clear()
    wanting_the_catch_all()
    for _ in range(6):
        _truth.clear()
        with rng_trace(print=False) as trace:
            prebound_random()  # attributed by the catch-all: the next trace has it from its start too
            for _ in range(10):
                callers.choice([_h1, _h2, _g1, _g2, _x])()
            hooks.append(HUB.catchall.describe())
        got = [[f.function for f in e.stack][: len(want)] for e, want in zip(trace.draws[1:], _truth)]
        mismatches.extend((g, want) for g, want in zip(got, _truth) if g != want)


def test_later_traces_stacks_are_exact_where_an_earlier_trace_cached_the_same_code():
    # The stack cache asks for a code's exit events once; the catch-all takes them off at each trace's
    # end. A later trace caching a frame of that code again must ask again, or the frame leaves unseen
    # and a new frame at its address is taken for it: a draw under ``_g2`` was blamed on ``_g1``.
    # In a thread of its own: a short stack, so the cache reaches the frames of ``_x`` and its callers.
    mismatches: list = []
    thread = threading.Thread(target=_traces, args=(mismatches,))
    thread.start()
    thread.join()
    assert mismatches == []
    assert len(hooks) == 6 and all(hook.startswith("sys.monitoring tool") for hook in hooks)
