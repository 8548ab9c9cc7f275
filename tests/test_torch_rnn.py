"""Recurrent modules: dropout between layers, drawn inside torch's C++ (torch._VF.lstm ...), is a draw at their call."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
import torch._dynamo  # noqa: E402,F401,F811  (its import wraps torch.manual_seed: done here, before any test)
import torch.nn as nn  # noqa: E402
from torch.nn.utils.rnn import pack_padded_sequence  # noqa: E402
from torch_traces import next_line, summary, torch_trace  # noqa: E402

from rngtrace import GlobalRNGError, rng_trace  # noqa: E402

HERE = os.path.abspath(__file__)
needs_cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
RECURRENT = ("lstm", "gru", "rnn_tanh", "rnn_relu")
MODULES = (nn.LSTM, nn.GRU, nn.RNN)


def lines_here(event) -> list[int]:
    """The lines of this file on an event's stack, innermost first."""
    return [f.lineno for f in event.stack if f.filename == HERE]


def moves_the_stream(call) -> bool:
    before = torch.get_rng_state()
    call()
    return not torch.equal(before, torch.get_rng_state())


# -- attributed where the module is called --------------------------------------------------
def test_lstm_dropout_is_a_draw_at_the_line_that_calls_the_lstm_not_the_next_one():
    # word_language_model's shape: a two-layer LSTM with dropout, then self.drop on the next line.
    lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.3).train()
    drop = nn.Dropout(0.3)
    with torch_trace() as trace:
        line = next_line()
        output, _ = lstm(torch.ones(3, 2, 4))
        drop(output)
    assert summary(trace) == [
        ("torch", "draw", "torch.nn.LSTM (dropout)", 24),  # one layer's output of 3 x 2 x 4
        ("torch", "draw", "torch.dropout", 24),
    ]
    assert lines_here(trace.events[0])[0] == line
    assert lines_here(trace.events[1])[0] == line + 1


def test_the_modules_get_their_own_forward_back_after_the_trace():
    originals = [vars(module)["forward"] for module in MODULES]
    gru = nn.GRU(4, 4, num_layers=2, dropout=0.3)
    with torch_trace() as trace:
        gru(torch.ones(3, 1, 4))
        assert all(vars(module)["forward"] is not original for module, original in zip(MODULES, originals))
    assert [vars(module)["forward"] for module in MODULES] == originals
    assert summary(trace) == [("torch", "draw", "torch.nn.GRU (dropout)", 12)]


def test_values_drawn_are_every_layer_output_but_the_last():
    lstm = nn.LSTM(4, 3, num_layers=3, dropout=0.3, bidirectional=True).train()
    with torch_trace() as trace:
        lstm(torch.ones(5, 2, 4))
    # Two layers drop out, each on an output of 5 x 2 x (2 directions x 3).
    assert summary(trace) == [("torch", "draw", "torch.nn.LSTM (dropout)", 2 * 60)]


def _rnn(kind: str, **kwargs) -> nn.Module:
    if kind == "rnn_relu":
        return nn.RNN(4, 3, nonlinearity="relu", **kwargs)
    return {"lstm": nn.LSTM, "gru": nn.GRU, "rnn_tanh": nn.RNN}[kind](4, 3, **kwargs)


_SEQ = torch.ones(5, 2, 4)

# name: (module, training, input); every case's truth is read from the stream itself.
_CASES = {
    **{f"{kind} train": (lambda k=kind: _rnn(k, num_layers=2, dropout=0.3), True, _SEQ) for kind in RECURRENT},
    **{
        f"{kind} packed train": (lambda k=kind: _rnn(k, num_layers=2, dropout=0.3), True, "packed")
        for kind in RECURRENT
    },
    "lstm eval": (lambda: _rnn("lstm", num_layers=2, dropout=0.3), False, _SEQ),
    "lstm packed eval": (lambda: _rnn("lstm", num_layers=2, dropout=0.3), False, "packed"),
    "gru one layer": (lambda: _rnn("gru", num_layers=1), True, _SEQ),
    "lstm dropout 0": (lambda: _rnn("lstm", num_layers=2, dropout=0.0), True, _SEQ),
    "lstm dropout 1": (lambda: _rnn("lstm", num_layers=2, dropout=1.0), True, _SEQ),
    "lstm empty batch": (lambda: _rnn("lstm", num_layers=2, dropout=0.3), True, torch.ones(5, 0, 4)),
    "lstm unbatched": (lambda: _rnn("lstm", num_layers=2, dropout=0.3), True, torch.ones(5, 4)),
    "lstm projections": (lambda: _rnn("lstm", num_layers=2, dropout=0.3, proj_size=2), True, _SEQ),
    "gru batch first bidirectional": (
        lambda: _rnn("gru", num_layers=2, dropout=0.3, batch_first=True, bidirectional=True),
        True,
        _SEQ,
    ),
}


@pytest.mark.parametrize("name", sorted(_CASES))
def test_recurrent_call_is_a_draw_exactly_when_it_moves_the_stream_and_never_unattributed(name):
    make, training, given = _CASES[name]
    module = make().train(training)

    def call():
        return module(pack_padded_sequence(_SEQ, [5, 3]) if given == "packed" else given)

    moves = moves_the_stream(call)
    with torch_trace() as trace:
        call()
    assert [e.kind for e in trace.events] == (["draw"] if moves else [])
    if moves:
        assert trace.events[0].api.endswith(" (dropout)")


def test_traced_lstm_output_is_bit_identical_and_the_stream_continues_the_same():
    def step():
        torch.manual_seed(3)
        lstm = nn.LSTM(4, 4, num_layers=3, dropout=0.4).train()
        output, (h, c) = lstm(torch.randn(6, 2, 4))
        packed, _ = lstm(pack_padded_sequence(torch.randn(6, 2, 4), [6, 4]))
        return [output, h, c, packed.data, torch.rand(5)]

    untraced = step()
    with torch_trace() as trace:
        traced = step()
    assert [e.api for e in trace.draws].count("torch.nn.LSTM (dropout)") == 2
    assert all(torch.equal(a, b) for a, b in zip(untraced, traced))


def test_a_compiled_lstm_runs_traced_draws_the_same_values_and_is_recorded_at_its_call():
    # torch.compile refuses recurrent modules and runs them eagerly, but compiles any Python
    # frame they enter: a wrapper around the bare op there would hand the op to inductor,
    # which cannot lower it (the traced call failed, in eval mode too). torch.compile also
    # reads the file of a module's forward, so the module is compiled inside the trace too.
    def run(traced: bool):
        torch.manual_seed(5)
        lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.3)
        x = torch.randn(3, 2, 4)
        compiled = torch.compile(lstm)
        if not traced:
            return [compiled(x)[0], compiled.eval()(x)[0], torch.compile(lstm.train())(x)[0]], None
        with torch_trace() as trace:
            line = next_line()
            outputs = [compiled(x)[0], compiled.eval()(x)[0], torch.compile(lstm.train())(x)[0]]
        return outputs, (trace, line)

    untraced, _ = run(False)
    traced, (trace, line) = run(True)
    assert all(torch.equal(a, b) for a, b in zip(untraced, traced))
    lstm_draws = [e for e in trace.events if e.api == "torch.nn.LSTM (dropout)"]
    assert [(e.kind, e.count, lines_here(e)[0]) for e in lstm_draws] == [("draw", 24, line)] * 2


def test_on_draw_raise_stops_lstm_dropout_before_the_stream_moves_and_lets_eval_run():
    lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.3)
    before = torch.get_rng_state()
    with torch_trace(on_draw="raise"):
        lstm.eval()(torch.ones(3, 1, 4))
        with pytest.raises(GlobalRNGError, match=r"torch\.nn\.LSTM \(dropout\) draws from the global torch stream"):
            lstm.train()(torch.ones(3, 1, 4))
    assert torch.equal(before, torch.get_rng_state())


# -- CUDA ------------------------------------------------------------------------------------
@needs_cuda
@pytest.mark.parametrize("cudnn", [True, False], ids=["cudnn", "native"])
def test_cuda_lstm_dropout_is_a_draw_exactly_when_the_device_generator_moves(cudnn):
    # cuDNN seeds its own dropout state from the device's generator on its first training call
    # (and the first after a reseed), then draws from that state: later calls move nothing.
    # Without cuDNN every call drops out through the device's generator.
    lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.3).cuda().train()
    x = torch.ones(3, 2, 4, device="cuda")
    generator = torch.cuda.default_generators[0]
    moved = []
    with torch.backends.cudnn.flags(enabled=cudnn), torch_trace() as trace:
        for seed in (4, None, 5, None):
            if seed is not None:
                torch.cuda.manual_seed(seed)
            offset = generator.get_offset()
            lstm(x)
            moved.append(generator.get_offset() != offset)
    draws = [e for e in trace.events if e.kind != "seed"]
    assert [(e.stream, e.kind, e.api) for e in draws] == [("torch.cuda:0", "draw", "torch.nn.LSTM (dropout)")] * sum(
        moved
    )
    assert moved == ([True, False, True, False] if cudnn and torch.backends.cudnn.is_available() else [True] * 4)


@needs_cuda
def test_cuda_lstm_output_is_bit_identical_traced_and_untraced():
    def step():
        torch.manual_seed(3)
        lstm = nn.LSTM(4, 4, num_layers=3, dropout=0.4).cuda().train()
        return [lstm(torch.randn(6, 2, 4, device="cuda"))[0], torch.rand(3, device="cuda")]

    untraced = step()
    with torch_trace() as trace:
        traced = step()
    assert [e.api for e in trace.draws].count("torch.nn.LSTM (dropout)") == 1  # cuDNN's seed, after the reseed
    assert all(torch.equal(a, b) for a, b in zip(untraced, traced))


@needs_cuda
def test_cuda_on_draw_raise_names_the_device_stream():
    lstm = nn.LSTM(4, 4, num_layers=2, dropout=0.3).cuda().train()
    with torch_trace(on_draw="raise"), pytest.raises(GlobalRNGError, match=r"global torch\.cuda:0 stream"):
        lstm(torch.ones(3, 2, 4, device="cuda"))


def test_the_hint_says_recurrent_dropout_takes_no_generator() -> None:
    from rngtrace.render import render

    lstm = torch.nn.LSTM(4, 8, num_layers=2, dropout=0.3)
    lstm.train()
    with rng_trace(print=False) as trace:
        lstm(torch.randn(5, 3, 4))
    log = render(trace, "text", color=False)
    assert "torch.nn.LSTM (dropout) takes no generator" in log
    assert "generator=g to torch.nn.LSTM" not in log
