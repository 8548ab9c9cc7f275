"""The C accelerator's contract: _speedups.pyi declares exactly what the built module exports, and
every Python module that has a C path takes it while the accelerator is on.

Where an entry point is added to the C (src/rngtrace/_speedups/) without its stub, or a module
stops asking ``_hotpath.SPEEDUPS`` for its C path (a rename, a fallback taken by mistake), a test
here fails; tests/test_speedups.py checks that the paths taken record what Python would.
"""

from __future__ import annotations

import _random
import ast
import pathlib
import random
import sys
import threading
import types

import numpy as np
import pytest

import rngtrace
from rngtrace import _hotpath, rng_trace

SPEEDUPS = _hotpath.SPEEDUPS
pytestmark = pytest.mark.skipif(SPEEDUPS is None, reason="the C accelerator is not built or is turned off")

STUB = pathlib.Path(rngtrace.__file__).with_name("_speedups.pyi")
# What every C type has, declared or not.
GENERIC = {"__doc__", "__new__", "__init__", "__repr__", "__dict__", "__weakref__", "__module__"}


def _stub() -> ast.Module:
    return ast.parse(STUB.read_text(), filename=str(STUB))


def _declared(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The names a stub's body (the module's, or a class's) declares, each with its declaration."""
    names: dict[str, ast.stmt] = {}
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names[node.target.id] = node
        elif isinstance(node, ast.Assign):
            names.update((t.id, node) for t in node.targets if isinstance(t, ast.Name))
    return names


def test_the_stub_declares_every_name_the_module_exports_and_no_other():
    exported = {name for name in dir(SPEEDUPS) if not name.startswith("_")}
    assert set(_declared(_stub().body)) == exported


def test_each_declaration_is_what_the_module_holds():
    for name, node in _declared(_stub().body).items():
        value = getattr(SPEEDUPS, name)
        if isinstance(node, ast.ClassDef):
            assert isinstance(value, type), name
        elif isinstance(node, ast.FunctionDef):
            assert isinstance(value, types.BuiltinFunctionType), name
        else:  # a constant: its annotation names its type
            assert isinstance(node, ast.AnnAssign) and isinstance(node.annotation, ast.Name), name
            assert type(value).__name__ == node.annotation.id, name


def test_the_stub_declares_every_method_and_attribute_of_each_type():
    classes = {name: node for name, node in _declared(_stub().body).items() if isinstance(node, ast.ClassDef)}
    assert classes  # Recorder, InPlace, StreamLock, Shielded
    for name, node in classes.items():
        kind = getattr(SPEEDUPS, name)
        assert set(vars(kind)) - GENERIC == set(_declared(node.body)) - GENERIC, name


def test_internal_frames_says_whether_the_walk_reads_the_interpreters_own_frames():
    assert SPEEDUPS.internal_frames in (True, False)


# -- each Python module takes its C path ---------------------------------------------------------


def test_every_module_with_a_c_path_takes_the_accelerator_from_hotpath():
    from rngtrace import _catchall_common, _hublock, _patches, _processes, _record, _stack
    from rngtrace.sources import _inplace, _recorder

    for module in (_catchall_common, _hublock, _patches, _processes, _record, _recorder, _inplace):
        assert module._speedups is SPEEDUPS, module.__name__
    assert _stack.SPEEDUPS is SPEEDUPS


def test_the_stack_table_walks_and_keys_frames_in_c():
    from rngtrace import _codes, _stack

    assert _stack._c_capture is SPEEDUPS.capture
    assert _stack._c_walk_memo is SPEEDUPS.walk_memo
    assert _stack._c_flat_key is SPEEDUPS.flat_key
    assert _stack._c_site_key is SPEEDUPS.site_key
    assert _codes._c_lineno_at is SPEEDUPS.lineno_at
    assert _stack.StackTable().accelerated is SPEEDUPS.capture


def test_patch_sets_are_swapped_in_c():
    from rngtrace import _patches

    assert _patches._swapper() is SPEEDUPS.swap
    assert _patches._SWAP_PARTS is SPEEDUPS.swap_parts


def test_a_lone_traces_watches_are_registered_in_c_and_its_install_runs_in_c_on_3_10():
    from rngtrace import _lone, _postimport

    assert _postimport._REGISTER_MANY.func is SPEEDUPS.watch_many
    assert _postimport._UNREGISTER_MANY.func is SPEEDUPS.watch_many
    assert _lone.install_alone_c.func is SPEEDUPS.lone_install
    assert _lone.uninstall_alone_c.func is SPEEDUPS.lone_uninstall
    # The C install and undo only where they are the faster (3.10); the Python reference on 3.11+.
    on_310 = sys.version_info < (3, 11)
    assert (_lone.install_alone is _lone.install_alone_c) is on_310
    assert (_lone.uninstall_alone is _lone.uninstall_alone_c) is on_310


def test_the_hub_takes_its_locks_in_c():
    from rngtrace import _hublock

    assert _hublock.call_if_free is SPEEDUPS.call_if_free
    assert _hublock.call_when_free is SPEEDUPS.call_if_free
    assert _hublock.call_locked is SPEEDUPS.call_locked


def test_a_monitoring_callback_is_shielded_in_c():
    from rngtrace import _catchall_common

    def callback(*args):
        return None

    assert type(_catchall_common.shielded(callback, threading.main_thread().ident)) is SPEEDUPS.Shielded


def test_draws_and_seeds_of_random_and_numpy_are_c_recorders():
    with rng_trace(print=False):
        recorders = {
            "random.uniform": random.uniform.__func__,  # bound to the hidden instance, recording in place
            "random.seed": random.seed.__func__,
            "numpy.random.seed": np.random.seed,
            "RandomState.random_sample": vars(np.random.mtrand.RandomState)["random_sample"],
            "numpy.random.rand": np.random.rand.__func__,  # bound to the singleton
        }
        kinds = {name: type(fn) for name, fn in recorders.items()}
    assert kinds == dict.fromkeys(recorders, SPEEDUPS.Recorder)


@pytest.mark.parametrize("stream", ["random", "numpy", "torch"])
def test_each_streams_lock_is_taken_and_its_fingerprint_read_in_c(stream):
    from rngtrace._hub import HUB

    draw = {"random": lambda: random.random(), "numpy": lambda: np.random.rand()}.get(stream)
    if draw is None:
        torch = pytest.importorskip("torch")
        draw = lambda: torch.rand(1)  # noqa: E731
    with rng_trace(print=False):
        draw()
        lock, fingerprint = HUB.rec.stream_lock(stream), HUB.rec.fingerprint(stream)
        assert type(lock) is SPEEDUPS.StreamLock
        assert type(fingerprint.view) is SPEEDUPS.InPlace


def test_randoms_builtins_record_in_place_every_call_even_where_the_interpreter_specialised_it():
    # random.random (METH_NOARGS) and random.getrandbits (METH_O) are the hidden instance's builtin
    # methods. 3.11+ specialises a call of a METH_O builtin to call its C function directly, not the
    # object: the hook must make such a call fall back, or a loop warmed up before the trace is unseen.
    held = types.SimpleNamespace(random=random.random, getrandbits=random.getrandbits)

    def looks() -> list:
        builtins = (random.random, random.getrandbits)
        return [(fn.__name__, fn.__doc__, hash(fn), fn.__reduce__()[1][1]) for fn in builtins]

    before = looks()

    def loop(n: int) -> None:
        for _ in range(n):
            held.random()
            held.getrandbits(8)

    loop(200)  # specialised now
    with rng_trace(print=False) as trace:
        hooked = SPEEDUPS.hooked_builtins()
        inside = looks()
        loop(100)
    assert any(fn is random.random for fn in hooked) and any(fn is random.getrandbits for fn in hooked)
    assert inside == before  # the same object: its name, doc, hash and pickling (by name) are its own
    apis = [(e.api, e.count) for e in trace.events]
    assert apis == [("random.random", 100), ("random.getrandbits", 100)] or len(apis) == 200
    assert all(e.stack[0].function.endswith("loop") for e in trace.events)  # (3.11+ names it by its qualname)
    assert SPEEDUPS.hooked_builtins() == []


def test_torchs_builtins_record_in_place_and_its_seed_is_a_c_recorder():
    torch = pytest.importorskip("torch")
    from rngtrace.sources import _base

    with rng_trace(print=False, streams="torch"):
        hooked = SPEEDUPS.hooked_builtins()
        seed = type(torch.manual_seed)
        twin = _base.twin_of(torch.rand)
    assert any(fn is torch.rand for fn in hooked) and any(fn is torch.randn for fn in hooked)
    assert seed is SPEEDUPS.Recorder
    # The twin the wrapper calls: a new builtin with torch.rand's definition, made in C.
    assert type(twin) is types.BuiltinFunctionType and twin is not torch.rand and twin.__name__ == "rand"
    assert SPEEDUPS.hooked_builtins() == []


def test_a_seed_of_random_or_numpy_is_recorded_in_c_its_event_with_no_python_call():
    # pytest-randomly seeds both six times per test: each seed's detail and event are made in C,
    # and the one Python call left (re-keying the fingerprint) is made from C, not from a wrapper.
    import sys

    from rngtrace._hub import HUB

    hot = HUB.rec.hot
    record, seeded = hot.record, hot.seeded
    seen = []

    def spy_record(*args):
        seen.append(("record", args[0]))
        return record(*args)

    def spy_seeded(stream, where=None):
        seen.append(("seeded", stream, sys._getframe(1).f_code.co_name))
        return seeded(stream, where)

    with rng_trace(print=False) as trace:
        random.random()  # the thread's first event (where a frame cache is kept, Python makes it)
        hot.record, hot.seeded = spy_record, spy_seeded
        try:
            random.seed(1)
            np.random.seed(2)
        finally:
            hot.record, hot.seeded = record, seeded
    name = "test_a_seed_of_random_or_numpy_is_recorded_in_c_its_event_with_no_python_call"
    assert seen == [("seeded", "random", name), ("seeded", "numpy", name)]
    assert [(e.stream, e.kind, e.detail, e.stack[0].function) for e in trace.events[1:]] == [
        ("random", "seed", "1", name),
        ("numpy", "seed", "2", name),
    ]


# The C base's methods bound by hand, held in an object: no patch reaches them, nor the in-place hooks of
# random.random and random.getrandbits (other objects), so only the profile hook sees calls through them.
held = types.SimpleNamespace(
    random=_random.Random.random.__get__(random._inst), getrandbits=_random.Random.getrandbits.__get__(random._inst)
)


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook")
def test_the_armed_profile_hook_is_a_c_function_on_every_thread_and_attributes_a_prebound_draw():
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active: rngtrace would not arm its hook")
    in_thread = []

    def worker():
        hook = sys.getprofile()
        in_thread.append((type(hook), hook.installed()))

    with rng_trace(print=False) as trace:
        list(map(held.getrandbits, [8]))  # a move no call recorded (C code calls the reference)...
        random.random()  # ...noticed here: the hook arms
        hook = sys.getprofile()
        # Installed as a C profile function, not through sys.setprofile's Python trampoline.
        assert type(hook) is SPEEDUPS.ProfileHook and hook.installed()
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        held.random()
    assert in_thread == [(SPEEDUPS.ProfileHook, True)]
    name = "test_the_armed_profile_hook_is_a_c_function_on_every_thread_and_attributes_a_prebound_draw"
    assert [(e.kind, e.api, e.stack[0].function if e.stack else None) for e in trace.events][1:] == [
        ("draw", "random.random", name),
        ("draw", "random.random", name),
    ]


def _draw(n: int) -> None:
    for _ in range(n):
        random.random()


def test_a_draw_past_max_events_is_counted_in_c_under_its_call_site_form():
    from rngtrace._hotpath import FrameMode
    from rngtrace._hub import HUB

    hot = HUB.rec.hot
    record = hot.record
    seen = []

    def spy_record(*args):
        seen.append(args[0])
        return record(*args)

    with rng_trace(print=False, max_events=5) as trace:
        _draw(200)  # past max_events from the first few; Python interns the line's form once, then frames are kept
        assert HUB.rec.mode is not FrameMode.WALK
        hot.record = spy_record
        try:
            _draw(100)
        finally:
            hot.record = record
    assert seen == []
    assert trace.dropped == 295
    assert [calls for calls, _values in trace.overflow.values()] == [295]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 arm a profile hook")
def test_a_profile_hook_taken_off_installs_no_more_on_a_thread_that_starts_late():
    if sys.getprofile() is not None:
        pytest.skip("another profiler is active: rngtrace would not arm its hook")
    with rng_trace(print=False):
        list(map(held.getrandbits, [8]))
        random.random()  # arms the hook
        hook = sys.getprofile()
    # A thread started as the trace ended calls install() at its first event: it must not raise there.
    assert hook.install() is False
    assert sys.getprofile() is None
