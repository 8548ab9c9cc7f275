"""Other tools' hooks: rngtrace chains to them, never clobbers them, never re-enables what they disabled."""

from __future__ import annotations

import _random
import random
import sys
import threading
import types
from _thread import get_ident

import pytest

from rngtrace import rng_trace

# The C base's methods bound by hand: no patch reaches them, nor the in-place hooks of random.random and
# random.getrandbits (other objects), so only a catch-all sees a call through them.
held = types.SimpleNamespace(
    random=_random.Random.random.__get__(random._inst), getrandbits=_random.Random.getrandbits.__get__(random._inst)
)

monitoring = pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring is 3.12+")
profile_hook = pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook")


def call(fn, *args):
    """One call site, reused with different callees."""
    return fn(*args)


def arm_the_profile_hook() -> None:
    """A move no call recorded (C code calls the reference), noticed at the next draw: the catch-all goes in."""
    list(map(held.getrandbits, [8]))
    random.random()


@monitoring
def test_another_tools_disabled_call_site_stays_disabled_through_a_trace():
    mon = sys.monitoring
    tool = mon.PROFILER_ID
    seen = []

    def on_call(code, offset, callee, arg0):
        if code is call.__code__:
            seen.append(callee)
        return mon.DISABLE  # once is enough, for this site and every other

    mon.use_tool_id(tool, "other-profiler")
    try:
        mon.register_callback(tool, mon.events.CALL, on_call)
        mon.set_events(tool, mon.events.CALL)
        call(len, "seen once")
        with rng_trace(print=False) as trace:
            random.random()
        call(len, "disabled by the other tool")
        assert seen == [len]
        assert [e.api for e in trace.events] == ["random.random"]
    finally:
        mon.set_events(tool, 0)
        mon.register_callback(tool, mon.events.CALL, None)
        mon.free_tool_id(tool)


@monitoring
def test_a_call_site_an_earlier_trace_disabled_is_seen_by_the_next_one():
    with rng_trace(print=False):
        arm_the_profile_hook()  # a move nobody recorded: the catch-all goes in
        held.random()  # attributed by it: the next trace has it from its start
    with rng_trace(print=False):
        held.random()  # (and the one after)
        call(len, "not a draw")  # the catch-all stops watching this site
    with rng_trace(print=False) as trace:
        call(held.random)
    assert [(e.kind, e.api, e.stack[0].function) for e in trace.events] == [("draw", "random.random", "call")]


@profile_hook
def test_a_threading_profile_hook_reaches_threads_started_after_rngtrace_arms_its_own():
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active: rngtrace would not arm its hook")
    events: dict[int, list[str]] = {}

    def user_hook(frame, event, arg):
        events.setdefault(get_ident(), []).append(event)

    def worker():
        held.random()
        idents.append(get_ident())

    idents: list[int] = []
    with rng_trace(print=False):
        pass  # met no pre-bound move: the next trace starts armed, not with the hook in
    threading.setprofile(user_hook)
    try:
        with rng_trace(print=False) as trace:
            arm_the_profile_hook()
            assert any("armed" in note for note in trace.notes)
            t = threading.Thread(target=worker, name="worker")
            t.start()
            t.join()
            assert threading.getprofile() is not None
    finally:
        threading.setprofile(None)
    assert "c_call" in events.get(idents[0], []), "the user's hook never ran in the thread"
    # rngtrace's hook runs there too: the call through the pre-bound reference is attributed.
    in_worker = [(e.kind, e.api) for e in trace.events if e.thread == "worker"]
    assert in_worker == [("draw", "random.random")]


def test_profile_hooks_the_user_sets_inside_the_block_survive_its_exit():
    def user_hook(frame, event, arg):
        pass

    try:
        with rng_trace(print=False):
            arm_the_profile_hook()  # 3.10/3.11: rngtrace's own hooks are in place from here
            threading.setprofile(user_hook)
            sys.setprofile(user_hook)
        hooks = (sys.getprofile(), threading.getprofile())
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    assert hooks == (user_hook, user_hook)
