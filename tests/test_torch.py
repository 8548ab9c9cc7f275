"""The torch source: every draw and reseed of torch's default generators, where it happened."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading

import pytest

torch = pytest.importorskip("torch")
import torch._dynamo  # noqa: E402,F401,F811  (its import wraps torch.manual_seed: done here, before any test)
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import randn as prebound_randn  # noqa: E402  (bound before any trace starts)
from torch.utils.data import DataLoader, TensorDataset, random_split  # noqa: E402
from torch_traces import next_line, summary, torch_trace  # noqa: E402

from rngtrace import (  # noqa: E402
    GlobalRNGError,
    _hotpath,  # noqa: E402
    rng_isolate,
)
from rngtrace.render.text import render  # noqa: E402

HERE = os.path.abspath(__file__)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


def in_torch(frame, *parts: str) -> bool:
    return frame.filename.endswith(os.path.join("torch", *parts))


def tagged_names() -> set[str]:
    """aten operators tagged nondeterministic_seeded, found independently of the source."""
    names = set()
    for full in torch._C._dispatch_get_all_op_names():
        name, _, overload = full.removeprefix("aten::").partition(".")
        if not full.startswith("aten::") or not hasattr(torch, name):
            continue
        try:
            op = getattr(getattr(torch.ops.aten, name), overload or "default")
        except (AttributeError, RuntimeError):
            continue
        if torch.Tag.nondeterministic_seeded in op.tags:
            names.add(name)
    return names


# -- draws -------------------------------------------------------------------------------
def test_randn_and_rand_are_recorded_with_count_at_the_calling_line():
    with torch_trace() as trace:
        line = next_line()
        torch.randn(2, 3)
        torch.rand(5)
    assert summary(trace) == [("torch", "draw", "torch.randn", 6), ("torch", "draw", "torch.rand", 5)]
    first = trace.events[0].stack[0]
    assert (first.filename, first.lineno) == (HERE, line)


def test_in_place_tensor_method_counts_self():
    x = torch.empty(3, 4)
    with torch_trace() as trace:
        x.uniform_(-1, 1)
        x.bernoulli_(0.5)
    assert summary(trace) == [
        ("torch", "draw", "torch.Tensor.uniform_", 12),
        ("torch", "draw", "torch.Tensor.bernoulli_", 12),
    ]


def test_linear_init_draws_sit_in_linear_py_and_reach_the_test_line():
    with torch_trace() as trace:
        line = next_line()
        nn.Linear(4, 3)
    assert summary(trace) == [
        ("torch", "draw", "torch.nn.init.kaiming_uniform_", 12),
        ("torch", "draw", "torch.nn.init.uniform_", 3),
    ]
    for event in trace.events:
        assert in_torch(event.stack[0], "nn", "modules", "linear.py")
        assert (HERE, line) in [(f.filename, f.lineno) for f in event.stack]


def test_init_function_is_one_event_though_it_calls_uniform_inside():
    w = torch.empty(5, 5)
    with torch_trace() as trace:
        nn.init.kaiming_uniform_(w)
    assert summary(trace) == [("torch", "draw", "torch.nn.init.kaiming_uniform_", 25)]


def test_meta_tensors_draw_nothing_and_are_not_recorded():
    with torch_trace() as trace:
        nn.Linear(4, 3, device="meta")
        torch.rand(3, device="meta")
        torch.rand(2)
    assert summary(trace) == [("torch", "draw", "torch.rand", 2)]


def test_fake_tensors_draw_nothing_and_are_not_recorded():
    import torch._dynamo  # noqa: F401  (imported on first use, it wraps torch.manual_seed: not in the block)
    from torch._subclasses.fake_tensor import FakeTensorMode

    before = torch.get_rng_state()
    with torch_trace() as trace:
        with FakeTensorMode():  # what torch.compile traces with
            torch.rand(3)
            torch.ones(4).uniform_()
    assert trace.events == []
    assert torch.equal(before, torch.get_rng_state())


def test_compiled_code_draws_the_same_values_traced_and_untraced():
    def step(x):
        y = torch.sin(x) + torch.rand(3)
        return y * torch.randn(3) + F.dropout(y, 0.5)

    compiled = torch.compile(step, backend="aot_eager")  # the graph's own ops draw (Inductor: test_torch_compile.py)
    torch.manual_seed(0)
    untraced = (compiled(torch.ones(3)), torch.rand(2))
    with torch_trace() as trace:
        torch.manual_seed(0)
        traced = (compiled(torch.ones(3)), torch.rand(2))
    assert all(torch.equal(a, b) for a, b in zip(untraced, traced))
    drawn = [e.api for e in trace.events if e.kind == "draw"]
    # The graph's aten ops (hooked in place), or without the accelerator torch's functions (a graph break).
    ops = [api.removeprefix("torch.ops.aten.").removeprefix("torch.").split(".")[0] for api in drawn]
    assert ops[:2] == ["rand", "randn"] and drawn[-1] == "torch.rand"


def test_meta_tensors_do_not_raise_under_on_draw_raise():
    with torch_trace(on_draw="raise") as trace:
        nn.Linear(4, 3, device="meta")
        with torch.device("meta"):
            torch.randn(3)
    assert trace.events == []


def test_default_device_context_still_applies_after_a_trace_that_first_used_it():
    import torch.utils._device

    torch.utils._device._device_constructors.cache_clear()  # as in a fresh process
    with torch_trace():
        with torch.device("meta"):
            during = torch.rand(2)
    with torch.device("meta"):
        after = torch.rand(2)
    assert (during.device.type, after.device.type) == ("meta", "meta")


def test_dropout_is_recorded_in_train_mode_and_not_in_eval_mode():
    model = nn.Dropout(0.5)
    x = torch.ones(2, 3)
    with torch_trace() as trace:
        model.train()
        model(x)
        model.eval()
        model(x)
    # The op that draws, reached from nn.functional.dropout through torch._VF, called by the module.
    assert summary(trace) == [("torch", "draw", "torch.dropout", 6)]
    assert in_torch(trace.events[0].stack[0], "nn", "functional.py")
    assert in_torch(trace.events[0].stack[1], "nn", "modules", "dropout.py")


_X = torch.ones(4, 4)
_Q = torch.ones(1, 4, 4)
# name -> (call, whether torch really draws from the stream for it)
_CALLS = {
    "F.dropout train": (lambda: F.dropout(_X, 0.5, True), True),
    "F.dropout eval": (lambda: F.dropout(_X, 0.5, False), False),
    "F.dropout p=0": (lambda: F.dropout(_X, 0.0), False),
    "F.dropout p=1": (lambda: F.dropout(_X, 1.0), False),
    "F.dropout2d": (lambda: F.dropout2d(torch.ones(2, 3, 4, 4)), True),
    "F.alpha_dropout default eval": (lambda: F.alpha_dropout(_X), False),
    "F.alpha_dropout train": (lambda: F.alpha_dropout(_X, 0.5, True), True),
    "F.feature_alpha_dropout train": (lambda: F.feature_alpha_dropout(torch.ones(2, 3, 4), training=True), True),
    "F.rrelu train": (lambda: F.rrelu(-_X, training=True), True),
    "F.rrelu eval": (lambda: F.rrelu(-_X), False),
    "torch.dropout train": (lambda: torch.dropout(_X, 0.5, True), True),
    "torch.dropout eval": (lambda: torch.dropout(_X, 0.5, train=False), False),
    "torch.native_dropout p=0": (lambda: torch.native_dropout(_X, 0.0, True), True),
    "torch.native_dropout eval": (lambda: torch.native_dropout(_X, 0.5, False), False),
    "attention dropout": (lambda: F.scaled_dot_product_attention(_Q, _Q, _Q, dropout_p=0.5), True),
    "attention no dropout": (lambda: F.scaled_dot_product_attention(_Q, _Q, _Q), False),
    "gumbel_softmax": (lambda: F.gumbel_softmax(_X), True),
    "bernoulli": (lambda: torch.bernoulli(_X / 2), True),
    "multinomial": (lambda: torch.multinomial(torch.ones(5), 2), True),
    "poisson": (lambda: torch.poisson(_X), True),
    "binomial": (lambda: torch.binomial(_X * 5, _X / 2), True),
    "randint_like": (lambda: torch.randint_like(_X, 10), True),
    "normal(mean, std)": (lambda: torch.normal(_X, _X), True),
    "Tensor.random_": (lambda: torch.empty(3).random_(), True),
    "Tensor.exponential_": (lambda: torch.empty(3).exponential_(), True),
    "Tensor.geometric_": (lambda: torch.empty(3).geometric_(0.5), True),
    "Tensor.cauchy_": (lambda: torch.empty(3).cauchy_(), True),
    "Tensor.log_normal_": (lambda: torch.empty(3).log_normal_(), True),
    "Tensor.multinomial": (lambda: torch.ones(5).multinomial(2), True),
    "generator=default_generator": (lambda: torch.rand(3, generator=torch.default_generator), True),
    "generator=own": (lambda: torch.rand(3, generator=torch.Generator()), False),
    "generator passed positionally": (lambda: torch.poisson(_X, torch.Generator()), False),
    "init with own generator": (lambda: nn.init.normal_(_X.clone(), 0, 1, torch.Generator()), False),
}


@pytest.mark.parametrize("name", list(_CALLS))
def test_call_is_recorded_exactly_when_it_moves_the_stream(name):
    call, draws = _CALLS[name]
    before = torch.get_rng_state()
    with torch_trace() as trace:
        call()
    moved = not torch.equal(before, torch.get_rng_state())
    assert moved == draws, "torch's own behaviour changed: update the table"
    assert [e.kind for e in trace.events] == (["draw"] if draws else [])


def test_every_tagged_public_function_is_wrapped_while_tracing():
    left_to_state_check = {"lstm", "gru", "rnn_tanh", "rnn_relu"}
    names = sorted(
        n
        for n in tagged_names() - left_to_state_check
        if not n.startswith("_") and type(getattr(torch, n)) is type(torch.rand)
    )
    tensor_methods = [
        "uniform_",
        "normal_",
        "random_",
        "bernoulli_",
        "bernoulli",
        "exponential_",
        "geometric_",
        "log_normal_",
        "cauchy_",
        "multinomial",
    ]
    # nn.functional's dropout family is left as it is: its ops (torch.dropout through torch._VF) record.
    functional = ["dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout", "rrelu"]
    left_alone = [getattr(F, n) for n in functional]
    init = [
        "uniform_",
        "normal_",
        "trunc_normal_",
        "kaiming_uniform_",
        "kaiming_normal_",
        "xavier_uniform_",
        "xavier_normal_",
        "orthogonal_",
        "sparse_",
    ]
    expected = [(torch, n) for n in names] + [(torch.Tensor, n) for n in tensor_methods] + [(nn.init, n) for n in init]
    assert {"rand", "randn", "randint", "randperm", "normal", "bernoulli", "dropout"} <= set(names)
    originals = [getattr(parent, n) for parent, n in expected]
    with torch_trace():
        # A builtin records in place (the C accelerator): the same object, its calls reaching a wrapper.
        hooked = _hotpath.SPEEDUPS.hooked_builtins() if _hotpath.SPEEDUPS is not None else []
        unwrapped = [
            f"{getattr(p, '__name__', p)}.{n}"
            for (p, n), o in zip(expected, originals)
            if getattr(p, n) is o and not any(o is h for h in hooked)
        ]
        assert [getattr(F, n) for n in functional] == left_alone
    assert unwrapped == []
    assert [getattr(p, n) for p, n in expected] == originals


def test_distribution_sample_is_recorded():
    with torch_trace() as trace:
        torch.distributions.Normal(0.0, 1.0).sample((3,))
    assert summary(trace) == [("torch", "draw", "torch.normal", 3)]
    assert in_torch(trace.events[0].stack[0], "distributions", "normal.py")


def test_dataloader_shuffle_records_base_seed_and_sampler_draws():
    loader = DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, shuffle=True)
    with torch_trace() as trace:
        batches = list(loader)
    assert len(batches) == 2
    sites = [(e.api, os.path.basename(e.stack[0].filename)) for e in trace.events]
    assert ("torch.Tensor.random_", "dataloader.py") in sites
    assert ("torch.Tensor.random_", "sampler.py") in sites
    assert all(in_torch(e.stack[0], "utils", "data", os.path.basename(e.stack[0].filename)) for e in trace.events)


def test_random_split_draws_only_without_its_own_generator():
    with torch_trace() as trace:
        random_split(range(10), [3, 7], generator=torch.Generator().manual_seed(1))
        random_split(range(10), [3, 7])
    assert summary(trace) == [("torch", "draw", "torch.randperm", 10)]
    assert in_torch(trace.events[0].stack[0], "utils", "data", "dataset.py")


def test_explicit_generator_records_nothing():
    with torch_trace() as trace:
        g = torch.Generator().manual_seed(0)
        torch.randn(3, generator=g)
        torch.empty(3).uniform_(generator=g)
        nn.init.kaiming_normal_(torch.empty(3, 3), generator=g)
    assert trace.events == []


def test_draw_in_another_thread_is_recorded_with_its_name():
    with torch_trace() as trace:
        worker = threading.Thread(target=torch.rand, args=(7,), name="drawer")
        worker.start()
        worker.join()
    assert [(e.api, e.count, e.thread) for e in trace.events] == [("torch.rand", 7, "drawer")]


@pytest.mark.skipif(sys.version_info < (3, 12), reason="sys.monitoring sees the call on 3.12+")
def test_reference_bound_before_tracing_is_attributed():
    with torch_trace() as trace:
        line = next_line()
        prebound_randn(2)
    assert [(e.api, e.stack[0].lineno) for e in trace.events] == [("torch.randn", line)]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.10/3.11 without the profile hook armed")
def test_reference_bound_before_tracing_is_noticed_when_the_block_ends():
    # In a process of its own: once an earlier move armed the profile hook, later traces in the
    # process start with it, and it attributes the call instead (what the test above shows on 3.12+).
    code = (
        "import torch\n"
        "from torch import randn as prebound_randn\n"
        "from rngtrace import rng_trace\n"
        "with rng_trace(streams='torch', print=False) as trace:\n"
        "    prebound_randn(2)\n"
        "print([(e.kind, e.stream, 'block ended' in (e.detail or '')) for e in trace.events])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # With the C accelerator the builtin itself records: the reference is a draw from its first call.
    expected = "[('draw', 'torch', False)]" if _hotpath.SPEEDUPS is not None else "[('unattributed', 'torch', True)]"
    assert out.stdout.strip() == expected


# -- seeds -------------------------------------------------------------------------------
def test_manual_seed_is_one_seed_event_though_it_seeds_cuda_too():
    with torch_trace() as trace:
        torch.manual_seed(3)
    assert [(e.stream, e.kind, e.api, e.detail) for e in trace.events] == [("torch", "seed", "torch.manual_seed", "3")]


def test_every_namespace_holding_a_seed_function_gets_the_same_wrapper():
    original = torch.manual_seed
    # One object before (until torch._dynamo's import wraps torch.manual_seed): one wrapper.
    shared = torch.random.manual_seed is torch.manual_seed
    with torch_trace() as trace:
        assert (torch.random.manual_seed is torch.manual_seed) == shared and torch.manual_seed is not original
        assert torch.cuda.random.manual_seed_all is torch.cuda.manual_seed_all
        saved = torch.get_rng_state()
        torch.random.manual_seed(5)
        torch.set_rng_state(saved)
        torch.seed()
    assert [(e.kind, e.api) for e in trace.events] == [
        ("seed", "torch.manual_seed"),
        ("restore", "torch.set_rng_state"),  # the state torch.get_rng_state() handed out above
        ("seed", "torch.seed"),
    ]


def test_default_generator_methods_are_recorded_from_the_first_call_with_their_values():
    state = torch.default_generator.get_state()
    torch.manual_seed(0)  # so that seeding with 3 moves the generator
    with torch_trace() as trace:
        torch.default_generator.manual_seed(3)
        torch.rand(2)
        torch.default_generator.set_state(state)
        torch.rand(1)
        torch.default_generator.seed()
    assert [(e.stream, e.kind, e.api, e.detail) for e in trace.events] == [
        ("torch", "seed", "torch.default_generator.manual_seed", "3"),
        ("torch", "draw", "torch.rand", None),
        ("torch", "seed", "torch.default_generator.set_state", "<Tensor>"),
        ("torch", "draw", "torch.rand", None),
        ("torch", "seed", "torch.default_generator.seed", None),
    ]
    first = trace.events[0].frame
    assert first.filename == __file__ and trace.events[2].frame.lineno == first.lineno + 2
    # Only the true entropy seed is called one: the restore is deterministic.
    unseeded = [f for f in trace.findings if f.kind == "unseeded"]
    assert [trace.events[i].api for f in unseeded for i in f.events] == ["torch.default_generator.seed"]


def test_a_default_generator_restore_is_no_entropy_seed_in_the_log():
    state = torch.default_generator.get_state()
    with torch_trace() as trace:
        torch.default_generator.set_state(state)
    assert not trace.findings
    assert "OS entropy" not in render(trace)


def test_a_state_setter_the_cpu_generator_refuses_raises_as_untraced_and_blames_no_line():
    calls = (lambda g: g.set_offset(3), lambda g: g.graphsafe_set_state(g.clone_state()))
    untraced = []
    for call in calls:
        with pytest.raises(RuntimeError) as error:  # the CPU generator has no offset nor graph-safe state
            call(torch.default_generator)
        untraced.append(str(error.value))
    with torch_trace() as trace:
        for call, message in zip(calls, untraced):
            with pytest.raises(RuntimeError, match=message):
                call(torch.default_generator)
    assert trace.events == []  # refused: the generator did not move


def test_a_generator_of_the_programs_own_is_not_recorded_and_draws_the_same():
    def run():
        g = torch.Generator()
        g.manual_seed(5)
        g.set_state(g.get_state())
        return torch.rand(4, generator=g)

    expected = run()
    with torch_trace() as trace:
        got = run()
    assert torch.equal(got, expected) and trace.events == []


def test_default_generator_method_values_are_unchanged_by_tracing():
    def run():
        torch.default_generator.manual_seed(11)
        first = torch.rand(3)
        state = torch.default_generator.get_state()
        torch.rand(5)
        torch.default_generator.set_state(state)
        return first, torch.rand(3)

    expected = run()
    with torch_trace():
        got = run()
    assert all(torch.equal(a, b) for a, b in zip(got, expected))


def test_cuda_seed_is_recorded_without_initialising_cuda_and_only_where_a_device_exists():
    was_initialised = torch.cuda.is_initialized()
    with torch_trace() as trace:
        torch.cuda.manual_seed_all(4)
        torch.cuda.set_rng_state_all([])
    expected = [("torch.cuda:0", "seed", "torch.cuda.manual_seed_all", "4")] if torch.cuda.device_count() else []
    assert [(e.stream, e.kind, e.api, e.detail) for e in trace.events][:1] == expected
    assert torch.cuda.is_initialized() == was_initialised
    if not torch.cuda.device_count():  # issue 24: no torch.cuda:0 stream on a machine with no GPU
        assert not any(s.startswith("torch.cuda") for s in {e.stream for e in trace.events})


# -- values and state ----------------------------------------------------------------------
def _train_step() -> list:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2)).train()
    x = torch.randn(4, 8)
    perm = torch.randperm(4)
    noise = torch.empty(4, 2).normal_()
    return [model(x[perm]) + noise, perm, *model.parameters()]


def test_traced_values_are_bit_identical_and_the_stream_continues_the_same():
    untraced = _train_step()
    untraced_next = torch.rand(5)
    with torch_trace() as trace:
        traced = _train_step()
    traced_next = torch.rand(5)
    assert len(trace.draws) == 8  # 2 Linear x 2 inits, randn, dropout, randperm, normal_
    assert all(torch.equal(a, b) for a, b in zip(untraced, traced))
    assert torch.equal(untraced_next, traced_next)


def test_on_draw_raise_stops_the_draw_before_the_stream_moves():
    before = torch.get_rng_state()
    with pytest.raises(GlobalRNGError, match=r"torch\.randn .*generator="):
        with torch_trace(on_draw="raise"):
            torch.randn(3)
    assert torch.equal(before, torch.get_rng_state())


def test_rng_isolate_restores_the_torch_stream():
    torch.manual_seed(11)
    before = torch.get_rng_state()
    with rng_isolate(streams="torch"):
        torch.rand(100)
        torch.manual_seed(1)
    assert torch.equal(before, torch.get_rng_state())


def test_a_move_nothing_recorded_after_a_recorded_draw_is_still_noticed():
    with torch_trace() as trace:
        torch.rand(2)
        torch.ops.aten.normal_(torch.empty(3))  # an op packet: not wrapped
    assert [(e.api, e.kind) for e in trace.events] == [("torch.rand", "draw"), ("torch state", "unattributed")]
    assert "block ended" in trace.events[1].detail


def test_a_move_nothing_recorded_between_draws_is_noticed_before_the_next_draw():
    with torch_trace() as trace:
        torch.rand(2)
        torch.ops.aten.normal_(torch.empty(3))
        line = next_line()
        torch.rand(2)
    kinds = [(e.api, e.kind) for e in trace.events]
    assert kinds == [("torch.rand", "draw"), ("torch state", "unattributed"), ("torch.rand", "draw")]
    noticed = trace.events[1]
    assert "before this torch.rand call" in noticed.detail
    # No line is blamed: the window it happened in ends at the call that noticed it.
    assert noticed.stack == () and noticed.window.noticed[0].lineno == line


def engine_and_cached_normal(state) -> tuple[bytes, int]:
    """The Mersenne Twister part of a CPU state, and whether a normal sample is cached."""
    raw = state.numpy().tobytes()
    words = 24 + 624 * 8
    return raw[:words], struct.unpack_from("<i", raw, words + 24)[0]


def test_the_cpu_generator_is_read_in_place_and_agrees_with_get_state():
    from rngtrace.sources import _torch_state

    view = _torch_state.fingerprint(torch.default_generator)
    assert not isinstance(view, _torch_state.CPUStateCopy), "this torch's layout should be proved"
    span = _torch_state._span(torch.default_generator, _torch_state._layout())
    seen = {view.value}
    for move in (
        lambda: torch.rand(3),
        lambda: torch.randn(1, dtype=torch.float64),  # a pair of normals: one is cached
        lambda: torch.randn(1, dtype=torch.float64),  # the cached one, the engine stays
        lambda: torch.randint(10, (700,)),  # past 624 words: the state is regenerated
        lambda: torch.manual_seed(7),
    ):
        move()
        assert _torch_state._matches(span.value, _torch_state._legacy(torch.default_generator))
        seen.add(view.value)
    assert len(seen) == 6


def test_a_draw_that_only_takes_the_cached_normal_sample_is_noticed():
    torch.manual_seed(0)  # no normal sample cached by an earlier test
    with torch_trace() as trace:
        torch.randn(1, dtype=torch.float64)  # draws a pair, keeps the second
        engine, cached = engine_and_cached_normal(torch.get_rng_state())
        torch.ops.aten.normal_(torch.empty(1, dtype=torch.float64))  # an op packet: not wrapped
        assert engine_and_cached_normal(torch.get_rng_state()) == (engine, 0) and cached == 1
        torch.rand(1)
    kinds = [(e.api, e.kind) for e in trace.events]
    assert kinds == [("torch.randn", "draw"), ("torch state", "unattributed"), ("torch.rand", "draw")]


def test_where_the_layout_is_not_proved_the_state_is_copied_and_moves_still_noticed(monkeypatch):
    from rngtrace.sources import _torch_state

    monkeypatch.setattr(_torch_state, "_layout", lambda: None)
    assert isinstance(_torch_state.fingerprint(torch.default_generator), _torch_state.CPUStateCopy)
    with torch_trace() as trace:
        torch.rand(2)
        torch.ops.aten.normal_(torch.empty(3))
        torch.rand(2)
    kinds = [(e.api, e.kind) for e in trace.events]
    assert kinds == [("torch.rand", "draw"), ("torch state", "unattributed"), ("torch.rand", "draw")]


# -- CUDA ------------------------------------------------------------------------------------
@needs_cuda
def test_cuda_draws_land_on_the_device_stream():
    with torch_trace() as trace:
        torch.randn(3, device="cuda:0")
        torch.empty(2, 2, device="cuda:0").uniform_()
        torch.rand(4)
    assert summary(trace) == [
        ("torch.cuda:0", "draw", "torch.randn", 3),
        ("torch.cuda:0", "draw", "torch.Tensor.uniform_", 4),
        ("torch", "draw", "torch.rand", 4),
    ]


@needs_cuda
def test_cuda_seed_names_the_device():
    torch.cuda.init()
    with torch_trace() as trace:
        torch.cuda.manual_seed(2)
        torch.cuda.set_rng_state(torch.cuda.get_rng_state(0), 0)
    assert [(e.stream, e.api, e.detail) for e in trace.events] == [
        ("torch.cuda:0", "torch.cuda.manual_seed", "2"),
        ("torch.cuda:0", "torch.cuda.set_rng_state", "<Tensor>"),
    ]


@needs_cuda
def test_cuda_values_are_bit_identical_when_traced():
    torch.cuda.manual_seed(0)
    untraced = torch.randn(100, device="cuda")
    torch.cuda.manual_seed(0)
    with torch_trace():
        traced = torch.randn(100, device="cuda")
    assert torch.equal(untraced, traced)


@needs_cuda
def test_a_cuda_default_generators_own_methods_are_recorded_on_its_device_stream():
    torch.cuda.init()
    generator = torch.cuda.default_generators[0]
    state = generator.get_state()
    with torch_trace() as trace:
        generator.manual_seed(7)
        generator.set_state(state)
        generator.set_offset(4)
        generator.seed()
    assert [(e.stream, e.kind, e.api, e.detail) for e in trace.events] == [
        ("torch.cuda:0", "seed", "torch.cuda.default_generators[i].manual_seed", "7"),
        ("torch.cuda:0", "seed", "torch.cuda.default_generators[i].set_state", "<Tensor>"),
        ("torch.cuda:0", "seed", "torch.cuda.default_generators[i].set_offset", "4"),
        ("torch.cuda:0", "seed", "torch.cuda.default_generators[i].seed", None),
    ]
    assert [trace.events[i].api for f in trace.findings if f.kind == "unseeded" for i in f.events] == [
        "torch.cuda.default_generators[i].seed"
    ]


@needs_cuda
def test_rng_isolate_restores_cuda_state():
    torch.cuda.init()
    before = torch.cuda.get_rng_state()
    with rng_isolate(streams="torch"):
        torch.randn(100, device="cuda")
    assert torch.equal(before, torch.cuda.get_rng_state())


def test_torch_overrides_tables_first_built_inside_a_trace_keep_the_real_functions():
    # A fresh process: torch.overrides' cached tables are still empty, so the first
    # call inside the trace would build them from whatever torch.rand is right then.
    code = """
import torch, torch.overrides as o
from rngtrace import rng_trace
with rng_trace(streams="torch", print=False):
    o.get_overridable_functions()
print(o.resolve_name(torch.rand), o.is_tensor_method_or_property(torch.Tensor.uniform_),
      torch.rand in o.get_ignored_functions(), torch.Tensor.uniform_ in o.get_testing_overrides())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["torch.rand", "True", "True", "True"]
