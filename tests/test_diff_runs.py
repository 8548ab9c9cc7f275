"""``rngtrace diff`` of two real runs saved with ``rngtrace run --json``: the headline names the user's line.

The programs are examples/train_val.py (a validation pass, dropout) and examples/wlm/ (word_language_model's
shape: an LSTM with dropout in another file of the user's). Each headline names the first frame in the
user's code, then the library line that drew.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytest.importorskip("torch")

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
LOADER = "torch/utils/data/dataloader.py:692 in _BaseDataLoaderIter.__init__"


def run(folder, log: str, *args: str) -> str:
    """Run an example under ``rngtrace run --quiet --json``; return the log's path."""
    path = str(folder / log)
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", path, *args],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return path


def diff(a: str, b: str) -> list[str]:
    """``rngtrace diff a b`` from the examples folder, as lines (exit 1: they differ)."""
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "diff", a, b], cwd=EXAMPLES, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    return done.stdout.splitlines()


def line_of(path: str, text: str) -> int:
    """The number of the first line of an example holding ``text``."""
    with open(os.path.join(EXAMPLES, path), encoding="utf-8") as f:
        return next(n for n, line in enumerate(f, 1) if text in line)


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    """The examples' runs, once: train_val plain, with --validate, with --dropout 0.2; wlm plain and with --eval."""
    folder = tmp_path_factory.mktemp("runs")
    return {
        "plain": run(folder, "plain.json", "train_val.py"),
        "validate": run(folder, "validate.json", "train_val.py", "--validate"),
        "dropout": run(folder, "dropout.json", "train_val.py", "--dropout", "0.2"),
        "wlm": run(folder, "wlm.json", "wlm/main.py"),
        "wlm-eval": run(folder, "wlm-eval.json", "wlm/main.py", "--eval"),
    }


def test_a_validation_pass_is_named_at_the_users_line_in_validate_then_the_loaders(logs):
    # The same loader line is reached from validate() and from the training loop: they are not paired crosswise.
    report = diff(logs["plain"], logs["validate"])
    validate = line_of("train_val.py", "for xb, yb in val:")
    train = line_of("train_val.py", "for xb, yb in train:")
    assert report[2] == (
        f"First divergence: B has 2 extra torch draws at train_val.py:{validate} in validate "
        f"(starting in {LOADER}), before the draw both runs make at train_val.py:{train} in <module>"
    )
    rows = line_of("train_val.py", "rows = torch.randint")
    assert report[report.index("Then 1 more place where the runs part:") + 1] == (
        f"  - B has 2 extra torch draws at train_val.py:{validate} in validate (starting in {LOADER}), "
        f"before the draw both runs make at train_val.py:{rows} in <module>"
    )


def test_an_lstm_evaluated_in_training_mode_is_named_at_evaluate_not_at_module_call_impl(logs):
    report = diff(logs["wlm"], logs["wlm-eval"])
    evaluate = line_of("wlm/main.py", "return model(data)")
    forward = line_of("wlm/model.py", "emb = self.drop(")
    assert report[2] == (
        f"First divergence: B has 3 extra torch draws at wlm/main.py:{evaluate} in evaluate "
        "(starting in torch/nn/functional.py:1491 in dropout), "
        f"before the draw both runs make at wlm/model.py:{forward} in RNNModel.forward"
    )
    # The LSTM's own dropout, between its layers, is shown with the user's lines under torch's.
    lstm = report.index("     #14  torch.nn.LSTM (dropout) ×4,480  only in B")
    assert report[lstm + 1 : lstm + 4] == [
        "          torch/nn/modules/module.py:1789 in Module._call_impl",
        "          torch/nn/modules/module.py:1778 in Module._wrapped_call_impl",
        f"          wlm/model.py:{forward + 1} in RNNModel.forward",
    ]


def test_dropout_only_b_draws_is_named_at_the_users_line_and_the_finding_both_share_is_in_neither_only(logs):
    report = diff(logs["plain"], logs["dropout"])
    step = line_of("train_val.py", "loss = nn.functional.cross_entropy")
    train = line_of("train_val.py", "for xb, yb in train:")
    assert report[2] == (
        f"First divergence: B has 3 extra torch draws at train_val.py:{step} in <module> "
        "(in torch/nn/functional.py:1491 in dropout), "
        f"before the draw both runs make at train_val.py:{train} in <module>"
    )
    # Both runs have the interleaved finding for the loader between the seed and the rows drawn at the end;
    # B's also counts the dropout's draws. It is one finding, in both runs.
    assert not [line for line in report if line.startswith("Only in")]
