"""A restore is not a reseed (issue 24): a stream put back to a state a getter handed out earlier in the trace.

Lightning saves every stream's state and puts it back around its sanity check,
``torch.random.fork_rng`` and Lightning's ``isolate_rng`` do the same around a block:
each ``setstate``/``set_state``/``set_rng_state`` of a state handed out during the trace
is an event of kind ``restore``, shown as one, and never a ``reseeded`` finding. A state
never handed out is still a seed (``<state>``) with its finding. A library seeding with
the user's own value (transformers' ``set_seed(0)``) is the user's seed repeated.
"""

from __future__ import annotations

import importlib.util
import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from rngtrace import Trace, _hotpath, rng_trace
from rngtrace.render.html import render as render_html
from rngtrace.render.text import render

torch: Any
try:  # the suite runs without torch on the other Pythons: the random and NumPy tests still run there
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
needs_lightning = pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None, reason="lightning is not installed (the frameworks extra)"
)
needs_transformers = pytest.mark.skipif(
    importlib.util.find_spec("transformers") is None, reason="transformers is not installed (the frameworks extra)"
)

SAVER = """\
import random
import numpy as np
import torch

def save():
    return random.getstate(), np.random.get_state(), torch.get_rng_state()

def work():
    random.random(); np.random.rand(3); torch.rand(3)

def put_back(states):
    random.setstate(states[0]); np.random.set_state(states[1]); torch.set_rng_state(states[2])

def put_other():
    np.random.set_state(np.random.RandomState(7).get_state())  # a state no getter of the stream handed out
"""


def marked(tag: str) -> int:
    """The line of this file that ends with ``# tag``."""
    return next(i for i, line in enumerate(Path(__file__).read_text().splitlines(), 1) if line.endswith(f"# {tag}"))


def kinds(trace) -> list[str]:
    return [f.kind for f in trace.findings]


def seeds_and_restores(trace) -> list[tuple[str, str, str]]:
    return [(e.stream, e.kind, e.api) for e in trace.events if e.kind in ("seed", "restore")]


def draw_all() -> tuple:
    return random.random(), float(np.random.rand()), torch.rand(2).tolist()


@needs_torch
def test_a_state_a_getter_handed_out_put_back_is_a_restore_on_every_stream_and_values_are_unchanged():
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    saved = random.getstate(), np.random.get_state(), torch.get_rng_state()
    expected = draw_all()
    random.setstate(saved[0]), np.random.set_state(saved[1]), torch.set_rng_state(saved[2])
    with rng_trace(print=False) as trace:
        states = random.getstate(), np.random.get_state(legacy=False), torch.default_generator.get_state()  # GETTERS
        first = draw_all()
        random.setstate(states[0]), np.random.set_state(states[1]), torch.set_rng_state(states[2])
        again = draw_all()
    assert first == again == expected  # tracing changes no drawn value
    assert seeds_and_restores(trace) == [
        ("random", "restore", "random.setstate"),
        ("numpy", "restore", "numpy.random.set_state"),
        ("torch", "restore", "torch.set_rng_state"),
    ]
    # Each restore names the line that saved its state, and undid one draw of its stream.
    saved = [e.saved_at for e in trace.events if e.kind == "restore"]
    assert [(back, frame.filename, frame.lineno) for back, frame in saved] == [(1, __file__, marked("GETTERS"))] * 3  # type: ignore[misc]


def test_putting_back_the_state_numpy_holds_is_no_event_and_its_cached_normal_counts():
    np.random.seed(5)
    np.random.standard_normal()  # a cached normal: part of the state
    with rng_trace(print=False) as trace:
        held = np.random.get_state()
        np.random.set_state(held)  # moves nothing
        np.random.set_state(np.random.get_state(legacy=False))  # the same state, as a dict
        np.random.set_state((*held[:3], 0, 0.0))  # the same words without the cached normal: it moves
    assert [(e.kind, e.api) for e in trace.events] == [("seed", "numpy.random.set_state")]


def test_the_states_handed_out_are_forgotten_when_the_trace_ends_and_only_the_last_64_are_kept():
    random.seed(2)
    with rng_trace(print=False) as trace:
        first = random.getstate()
        later = []
        for _ in range(64):
            random.random()
            later.append(random.getstate())
        random.setstate(later[0])  # among the last 64 handed out
        random.setstate(first)  # the 65th from the end: forgotten
    assert [e.kind for e in trace.events if e.api == "random.setstate"] == ["restore", "seed"]
    with rng_trace(print=False) as trace:
        random.setstate(later[5])  # handed out in the trace before: a seed in this one
    assert [e.kind for e in trace.events] == ["seed"]


PREBOUND = """\
from random import getstate as python_get_rng_state  # bound at import, as Lightning's seed.py does
from random import setstate as python_set_rng_state
import random

def save():
    return python_get_rng_state()

def put_back(state):
    python_set_rng_state(state)

def put_other():
    python_set_rng_state(random.Random(7).getstate())
"""


def test_a_getter_and_setter_bound_before_the_trace_still_make_a_restore_and_a_new_state_a_seed(package):
    lib = package("prebound_saver", PREBOUND)  # imported before the trace: its names hold the originals
    with rng_trace(print=False) as trace:
        random.seed(0)
        state = lib.save()
        random.random()
        lib.put_back(state)
        random.random()
        lib.put_other()
        random.random()
    assert [e.kind for e in trace.events] == ["seed", "draw", "restore", "draw", "seed", "draw"]
    assert kinds(trace) == ["reseeded"]
    assert "restored the state saved at prebound_saver.py:6, undoing 1 event: no reseed" in render(trace, color=False)


NUMPY_PREBOUND = """\
import numpy as np

get_state = np.random.get_state  # the singleton's bound method, bound before the trace
set_state = np.random.set_state

def save():
    return get_state()

def put_back_through_the_module(state):
    np.random.set_state(state)

def put_back(state):
    set_state(state)
"""


def test_a_numpy_getter_bound_before_the_trace_is_seen_as_docs_limits_says(package):
    # docs/limits.md: with the accelerator NumPy's singleton methods bound before rng_trace() record in
    # place, so a state they hand out and put back is a restore, through the module or through them.
    # Without it they are the originals: such a state put back is a seed, and put back through a bound
    # set_state too, a move nobody recorded.
    lib = package("numpy_prebound", NUMPY_PREBOUND)
    with rng_trace(print=False):
        pass  # met no move unseen: the next trace starts with its catch-all armed, not in
    with rng_trace(print=False) as trace:
        np.random.seed(0)
        state = lib.save()
        np.random.rand()
        lib.put_back_through_the_module(state)
        np.random.rand()
        lib.put_back(state)
        np.random.rand()
    if _hotpath.SPEEDUPS is not None:
        assert [(e.kind, e.api) for e in trace.events] == [
            ("seed", "numpy.random.seed"),
            ("draw", "numpy.random.rand"),
            ("restore", "numpy.random.set_state"),
            ("draw", "numpy.random.rand"),
            ("restore", "numpy.random.set_state"),
            ("draw", "numpy.random.rand"),
        ]
        assert "reseeded" not in kinds(trace)
        return
    # The bound set_state: a move nobody recorded, noticed at the next draw (which arms the catch-all).
    bound = ("unattributed", "numpy state")
    assert [(e.kind, e.api) for e in trace.events] == [
        ("seed", "numpy.random.seed"),
        ("draw", "numpy.random.rand"),
        ("seed", "numpy.random.set_state"),
        ("draw", "numpy.random.rand"),
        bound,
        ("draw", "numpy.random.rand"),
    ]
    assert "reseeded" in kinds(trace)


@needs_torch
def test_torchs_getter_and_setter_bound_before_the_trace_still_make_a_restore(package):
    lib = package("torch_prebound", "from torch import get_rng_state, set_rng_state\n")
    with rng_trace(print=False) as trace:
        torch.manual_seed(0)
        state = lib.get_rng_state()  # torch/random.py's function: the generator's get_state it calls is watched
        torch.rand(2)
        lib.set_rng_state(state)
    assert [e.kind for e in trace.events] == ["seed", "draw", "restore"]
    assert trace.findings == []


@needs_torch
def test_a_library_putting_back_a_saved_state_after_the_users_seed_is_no_reseed_and_a_new_state_is(package):
    lib = package("saverlib", SAVER)
    with rng_trace(print=False) as trace:
        random.seed(0), np.random.seed(0), torch.manual_seed(0)
        states = lib.save()
        lib.work()
        lib.put_back(states)
        draw_all()
        lib.put_other()
        np.random.rand()
    assert seeds_and_restores(trace)[3:] == [
        ("random", "restore", "random.setstate"),
        ("numpy", "restore", "numpy.random.set_state"),
        ("torch", "restore", "torch.set_rng_state"),
        ("numpy", "seed", "numpy.random.set_state"),  # never handed out: a seed, as before
    ]
    (finding,) = [f for f in trace.findings if f.kind == "reseeded"]
    assert "numpy.random.set_state(<tuple>) inside saverlib.py:15" in finding.message
    assert "unseeded" not in kinds(trace)


PEEK = """\
import random

def peek():
    state = random.getstate()
    random.random()  # a look ahead, undone below
    random.setstate(state)

def work():
    random.random()
"""


def test_a_draw_a_restore_undid_is_no_culprit_of_interleaved_and_a_draw_it_did_not_undo_still_is(package):
    lib = package("peeklib", PEEK)
    with rng_trace(print=False) as trace:
        random.seed(0)
        lib.peek()
        random.random()
    assert [e.kind for e in trace.events] == ["seed", "draw", "restore", "draw"]
    assert trace.events[2].saved_at[0] == 1  # type: ignore[index]
    assert trace.findings == []
    with rng_trace(print=False) as trace:
        random.seed(0)
        lib.work()
        lib.peek()
        random.random()
    (finding,) = trace.findings
    assert finding.kind == "interleaved" and finding.events == (0, 1, 4)  # the seed, work()'s draw, yours
    assert finding.message.startswith("1 random draw inside ")


@needs_torch
def test_a_librarys_draws_inside_fork_rng_between_your_seed_and_your_draw_are_no_finding(package):
    lib = package("forklib", "import torch\n\ndef look():\n    with torch.random.fork_rng():\n        torch.rand(3)\n")
    with rng_trace(print=False) as trace:
        torch.manual_seed(0)
        lib.look()
        torch.rand(2)
    assert [e.kind for e in trace.events] == ["seed", "draw", "restore", "draw"]
    assert trace.findings == []


@needs_torch
def test_fork_rng_puts_the_state_back_as_a_restore_and_no_finding():
    with rng_trace(print=False) as trace:
        torch.manual_seed(0)
        with torch.random.fork_rng():
            torch.rand(3)
        torch.rand(3)
    assert [(e.kind, e.api) for e in trace.events] == [
        ("seed", "torch.manual_seed"),
        ("draw", "torch.rand"),
        ("restore", "torch.set_rng_state"),
        ("draw", "torch.rand"),
    ]
    assert trace.findings == []


@needs_torch
def test_a_saved_log_round_trips_restores_and_the_text_log_and_html_show_them(tmp_path):
    with rng_trace(print=False) as trace:
        torch.manual_seed(0)
        with torch.random.fork_rng():  # FORK
            torch.rand(3)
    path = tmp_path / "log.json"
    trace.save(path)
    loaded = Trace.load(path)
    assert [(e.kind, e.api, e.detail) for e in loaded.events] == [(e.kind, e.api, e.detail) for e in trace.events]
    assert json.loads(path.read_text())["events"][2][1] == "restore"
    text = render(loaded, color=False)
    assert "torch: 1 seed, 1 restore, 1 draw" in text
    (row,) = [line for line in text.splitlines() if " restore " in line]
    assert "torch.set_rng_state" in row and "fork_rng" in row
    # Where the state was saved: the ``with`` line, past torch's and contextlib's frames; and what it undid.
    said = f"restored the state saved at tests/test_restores.py:{marked('FORK')}, undoing 1 event: no reseed"
    assert said in text
    assert '"restore"' in render_html(loaded) and said in render_html(loaded)
    shown = subprocess.run(
        [sys.executable, "-m", "rngtrace", "show", str(path)], capture_output=True, text=True, timeout=60
    )
    assert shown.returncode == 0, shown.stderr
    assert said in shown.stdout + shown.stderr


def test_a_restore_from_a_log_that_names_no_saving_line_says_so_plainly():
    from rngtrace._model import Event, Frame
    from rngtrace.render.base import restore_note

    at = (Frame("lib.py", 3, "put_back"),)
    for detail in (None, "saved:x:1:f:a.py", "anything else"):
        event = Event(0, "random", "restore", "random.setstate", None, at, "MainThread", 1, detail)
        assert event.saved_at is None
        assert restore_note(event, "/") == "restored a state saved earlier in the trace: no reseed"


ISOLATE = """\
import random
import numpy as np
import torch
from lightning.pytorch.utilities.seed import isolate_rng

torch.manual_seed(0), np.random.seed(0), random.seed(0)
with isolate_rng():
    random.random(), np.random.rand(), torch.rand(2)
random.random(), np.random.rand(), torch.rand(2)
"""


def traced_run(tmp_path, source: str) -> tuple[Trace, subprocess.CompletedProcess]:
    """Run ``source`` under ``rngtrace run`` in a fresh process (a framework's import stays there): its log."""
    script, log = tmp_path / "prog.py", tmp_path / "prog.json"
    script.write_text(source)
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", str(log), str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Trace.load(log), done


@needs_torch
@needs_lightning
def test_isolate_rng_is_a_restore(tmp_path):
    trace, _ = traced_run(tmp_path, ISOLATE)
    assert seeds_and_restores(trace)[3:] == [
        ("torch", "restore", "torch.set_rng_state"),
        ("numpy", "restore", "numpy.random.set_state"),
        ("random", "restore", "random.setstate"),
    ]
    assert trace.findings == []


LIGHTNING = """\
import sys
import lightning as L
import torch
from torch.utils.data import DataLoader, TensorDataset


class Tiny(L.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, _):
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch, _):
        x, y = batch
        self.log("val", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


L.seed_everything(42, workers=True, verbose=False)
data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
train = DataLoader(data, batch_size=8, shuffle=True, num_workers=2)
val = DataLoader(data, batch_size=8, num_workers=2)
trainer = L.Trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=2, accelerator="cpu", deterministic=True,
                    enable_progress_bar=False, logger=False, enable_checkpointing=False, enable_model_summary=False)
model = Tiny()
trainer.fit(model, train, val)
print("weights", model.layer.weight.detach().tolist(), file=sys.stderr)
"""


@needs_torch
@needs_lightning
def test_lightning_seed_everything_then_fit_restores_every_stream_and_finds_no_reseed(tmp_path):
    plain = subprocess.run([sys.executable, "-c", LIGHTNING], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert plain.returncode == 0, plain.stderr[-3000:]
    trace, traced = traced_run(tmp_path, LIGHTNING)
    weights = [line for line in plain.stderr.splitlines() if line.startswith("weights")]
    assert weights and weights == [line for line in traced.stderr.splitlines() if line.startswith("weights")]
    restores = [e for e in trace.events if e.kind == "restore"]
    assert restores and all("lightning/fabric/utilities/seed.py" in str(e.frame) for e in restores)
    # Saved in Lightning's _collect_rng_states, and the sanity check's draws it undid blame nobody.
    assert all(e.saved_at is not None and e.saved_at[1].function == "_collect_rng_states" for e in restores)
    assert "restored the state saved at lightning/fabric/utilities/seed.py:" in render(trace, color=False)
    assert not {"reseeded", "unseeded", "at-import", "interleaved"} & set(kinds(trace))


@needs_torch
@needs_transformers
def test_transformers_set_seed_with_the_users_seed_is_the_users_seed_repeated():
    from transformers import set_seed

    with rng_trace(print=False) as trace:
        torch.manual_seed(0), np.random.seed(0), random.seed(0)
        set_seed(0)
        draw_all()
    seeds = [e for e in trace.events if e.kind == "seed"]
    assert any("transformers/trainer_utils.py" in str(e.frame) for e in seeds)
    assert trace.findings == []
    assert Path(seeds[-1].frame.filename).name == "trainer_utils.py"
