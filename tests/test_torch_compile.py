"""torch.compile under a trace: the same values before, during and after it, no recompile, compiled draws at your line.

torch.compile guards what it compiled on the identity of each builtin it read, and
reads its functions' tables by hash: rngtrace's torch builtins (and the aten ops compiled
code calls) record in place, through the C accelerator, so the compiled code in Dynamo's
cache stays valid inside a trace and a compile inside one sees torch as it is untraced.
Without the accelerator they are replaced, and compiled code recompiles (README).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")
import torch._dynamo  # noqa: E402,F811
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch._dynamo.utils import counters  # noqa: E402

from rngtrace import (
    _hotpath,  # noqa: E402
    rng_trace,  # noqa: E402
)
from rngtrace.render.text import render  # noqa: E402

HERE = os.path.abspath(__file__)
SRC = os.path.join(os.path.dirname(os.path.dirname(HERE)), "src")

pytestmark = pytest.mark.skipif(
    _hotpath.SPEEDUPS is None,
    reason="without the C accelerator torch's builtins are replaced, not hooked in place: compiled code recompiles",
)


def compile_counts() -> tuple[int, int, int]:
    """Dynamo's frames compiled, graph breaks and unique graphs so far."""
    return (counters["frames"]["total"], sum(counters["graph_break"].values()), counters["stats"]["unique_graphs"])


def same(a: list, b: list) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.Dropout(0.5), nn.Linear(8, 2)).train()


X = torch.randn(4, 8, generator=torch.Generator().manual_seed(5))


def three_steps(compiled) -> list:
    torch.manual_seed(1)
    return [compiled(X) for _ in range(3)]  # the compiled calls' line


CALL_LINE = three_steps.__code__.co_firstlineno + 2


def test_a_compiled_model_computes_the_same_before_during_and_after_a_trace_with_no_recompile():
    # Dynamo keeps compiling nn.Sequential.forward's one code object for every model earlier tests
    # compiled, and past its recompile limit runs it eagerly: start from an empty cache.
    torch._dynamo.reset()
    compiled = torch.compile(model())
    a, b = three_steps(compiled), three_steps(compiled)
    assert same(a, b)  # the compiled model is deterministic
    before = compile_counts()
    with rng_trace(print=False) as trace:
        c = three_steps(compiled)
    during = compile_counts()
    e = three_steps(compiled)
    assert same(a, c) and same(a, e)
    assert during == before == compile_counts(), "tracing made Dynamo compile or break a graph"
    # The compiled dropout's draws (Inductor's seeds) are events at the line that called the model.
    compiled_draws = [ev for ev in trace.events if ev.kind == "draw"]
    assert len(compiled_draws) == 3 and all(ev.compiled for ev in compiled_draws)
    assert all(ev.api.startswith("torch.ops.aten.") for ev in compiled_draws)
    mine = [f for f in compiled_draws[0].stack if f.filename == HERE]
    assert mine and mine[0].lineno == CALL_LINE
    assert [ev.kind for ev in trace.events] == ["seed", "draw", "draw", "draw"]
    log = render(trace)
    assert "torch.compile'd code: torch.ops.aten." in log and f"test_torch_compile.py:{CALL_LINE}" in log
    assert "pass generator=g to torch.ops" not in log  # compiled code takes no generator


def test_a_model_compiled_inside_a_trace_computes_what_it_computes_compiled_untraced():
    torch._dynamo.reset()
    counters.clear()  # graph breaks counted by earlier tests' compiles (an LSTM's)
    untraced = three_steps(torch.compile(model()))
    torch._dynamo.reset()
    with rng_trace(print=False) as trace:
        traced = three_steps(torch.compile(model()))
    assert same(untraced, traced)
    assert not counters["graph_break"], dict(counters["graph_break"])
    # Dynamo's save and restore of every stream around its compile moved nothing: no seed of anyone's.
    seeds = [ev for ev in trace.events if ev.kind == "seed"]
    assert [ev.api for ev in seeds] == ["torch.manual_seed", "torch.manual_seed"]
    assert all(ev.frame.filename == HERE for ev in seeds)
    assert not [ev for ev in trace.events if ev.kind == "unattributed"]
    assert sum(ev.compiled for ev in trace.events) == 3


class Jitter(nn.Module):
    """A model whose forward draws from Python's random: Dynamo draws an example value as it compiles."""

    def __init__(self):
        super().__init__()
        self.layer = nn.Linear(8, 2)

    def forward(self, x):
        return self.layer(x), random.uniform(0.5, 1.5)


def test_dynamos_restore_of_random_after_a_compile_that_drew_is_a_restore_and_no_finding():
    def run() -> tuple:
        torch.manual_seed(0), random.seed(0)
        compiled = torch.compile(Jitter())
        out = [compiled(X) for _ in range(2)]
        return [(y.tolist(), jitter) for y, jitter in out], random.random()

    torch._dynamo.reset()
    with rng_trace(print=False) as trace:  # first: a compile of Jitter before it would leave nothing to draw
        traced = run()
    torch._dynamo.reset()
    assert traced == run()
    # Compiling drew an example value of random.uniform, which Dynamo's preserve_global_state undid.
    (restore,) = [ev for ev in trace.events if ev.kind == "restore"]
    assert restore.api == "random.setstate" and restore.saved_at is not None and restore.saved_at[0] == 1
    assert [ev.api for ev in trace.events if ev.kind == "seed"] == ["torch.manual_seed", "random.seed"]
    # No reseed, and neither the undone draw nor the compiled function's own draws are another's.
    assert trace.findings == []


def scaled_noise(x):
    """A function drawing from Python's random.random() and torch, as a compiled augmentation might."""
    return x * random.random() + torch.rand(3)


def test_a_function_compiled_inside_a_trace_that_calls_random_random_computes_what_it_does_untraced():
    # random.random is the hidden instance's builtin method: traced, it records in place, so Dynamo
    # sees the builtin it sees untraced. Replaced by a Python wrapper, it compiled another graph,
    # whose first call returned -8.99e34 for every element on torch 2.13's CPU Inductor.
    def run() -> tuple:
        torch._dynamo.reset()
        random.seed(0), torch.manual_seed(0)
        compiled = torch.compile(scaled_noise)
        return [compiled(torch.ones(3)).tolist() for _ in range(3)], random.random()

    untraced = run()
    with rng_trace(print=False) as trace:
        traced = run()
    assert traced == untraced
    draws = [(ev.api, ev.frame.filename == HERE) for ev in trace.events if ev.kind == "draw"]
    assert ("random.random", True) in draws
    assert [ev for ev in trace.events if ev.kind == "unattributed"] == []


def test_a_compiled_function_and_reduce_overhead_mode_compute_the_same_traced_with_no_recompile():
    def step(x):
        return torch.sin(x) + torch.rand_like(x) * F.dropout(x, 0.5)

    for compiled in (torch.compile(step), torch.compile(step, mode="reduce-overhead")):
        torch._dynamo.reset()
        torch.manual_seed(3)
        a = [compiled(X) for _ in range(2)]
        before = compile_counts()
        with rng_trace(print=False) as trace:
            torch.manual_seed(3)
            c = [compiled(X) for _ in range(2)]
        torch.manual_seed(3)
        e = [compiled(X) for _ in range(2)]
        assert same(a, c) and same(a, e)
        assert compile_counts() == before
        assert [ev.compiled for ev in trace.events if ev.kind == "draw"] == [True, True]


def test_vmap_with_different_randomness_draws_the_same_traced_at_the_users_line():
    def noisy(x):
        return F.dropout(x, 0.5) + torch.rand(())

    batched = torch.func.vmap(noisy, randomness="different")
    torch.manual_seed(4)
    untraced = batched(X)
    with rng_trace(print=False) as trace:
        torch.manual_seed(4)
        traced = batched(X)
        line = sys._getframe().f_lineno - 1
    assert torch.equal(untraced, traced)
    draws = [ev for ev in trace.events if ev.kind == "draw"]
    assert draws and all(any(f.filename == HERE and f.lineno == line for f in ev.stack) for ev in draws)
    assert not [ev for ev in trace.events if ev.kind == "unattributed"]


def test_torchs_builtins_keep_their_identity_and_hash_while_they_record():
    op = torch.ops.aten.native_dropout.default
    identity, hashed, rand = id(torch.rand), hash(op), torch.rand
    with rng_trace(print=False) as trace:
        assert torch.rand is rand and id(torch.rand) == identity and hash(op) == hashed
        assert torch._VF.dropout is torch.dropout
        rand(2)  # a reference taken before the trace: the same object, recording from its first call
        op(torch.ones(3), 0.5, True)
    assert [(ev.api, ev.count) for ev in trace.events] == [
        ("torch.rand", 2),
        ("torch.ops.aten.native_dropout.default", 3),
    ]
    assert _hotpath.SPEEDUPS.hooked_builtins() == []


def test_a_restore_of_the_state_a_stream_holds_is_no_event_and_one_that_changes_it_is():
    saved_random, saved_torch = random.getstate(), torch.get_rng_state()
    with rng_trace(print=False) as trace:
        random.setstate(random.getstate())
        torch.set_rng_state(torch.get_rng_state())
        torch.default_generator.set_state(torch.get_rng_state())
        random.random()
        torch.rand(2)
        random.setstate(saved_random)
        torch.set_rng_state(saved_torch)
    assert [(ev.kind, ev.api) for ev in trace.events] == [
        ("draw", "random.random"),
        ("draw", "torch.rand"),
        # The states the getters handed out at the block's start: put back, restores, not reseeds.
        ("restore", "random.setstate"),
        ("restore", "torch.set_rng_state"),
    ]


def test_a_move_nobody_recorded_is_still_reported_across_a_restore_that_changes_nothing():
    import _random

    with rng_trace(print=False) as trace:
        random.random()
        _random.Random.random(random._inst)  # the C base method: a move no wrapper sees
        random.setstate(random.getstate())  # a restore of the state held: no event, and no cover
    assert [ev.kind for ev in trace.events] == ["draw", "unattributed"]


PROGRAM = """
import sys, torch, torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
data = TensorDataset(torch.randn(32, 8), torch.randint(0, 2, (32,)))
loader = DataLoader(data, batch_size=8, shuffle=True)
model = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Dropout(0.3), nn.Linear(16, 2))
step = torch.compile(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(2):
    for x, y in loader:
        loss = nn.functional.cross_entropy(step(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
print("weights", repr(float(sum(p.double().sum() for p in model.parameters()))))
"""


def test_a_compiled_training_loop_under_rngtrace_run_trains_the_same_and_logs_the_compiled_draws(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(PROGRAM), encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [SRC, os.environ.get("PYTHONPATH")]))}

    def run(*prefix: str) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [sys.executable, *prefix, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-3000:]
        return done

    plain, traced = run(), run("-m", "rngtrace", "run")
    weights = [line for line in plain.stdout.splitlines() if line.startswith("weights")]
    assert weights and weights[0] in traced.stdout.splitlines()
    log = traced.stdout + traced.stderr
    assert "torch.compile'd code: torch.ops.aten." in log
    assert "train.py:13" in log  # the line that calls the compiled model
    assert "set_rng_state" not in log and "setstate" not in log  # Dynamo's restores moved nothing
