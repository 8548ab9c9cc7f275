"""Raw memory reads: nothing is read in place before its type, size and layout are proved.

A look-alike bound where a stream's object was, a bit generator dressed up with
another's name, a singleton rebound after import: each gets no raw read, and
what can no longer be read in place is still recorded or reported.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from rngtrace import rng_trace
from rngtrace.sources import _inplace, _numpy_views
from rngtrace.sources import numpy as numpy_source


def run_script(tmp_path, source: str) -> list:
    """Run ``source`` in a fresh process (its patch sets are built there); the JSON it printed last."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(source))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"exit {done.returncode}\n{done.stderr[-3000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


EVENTS = "json.dumps([(e.stream, e.kind, e.api, e.count) for e in trace.events])"


# -- the in-place view itself ---------------------------------------------------------
def test_an_in_place_view_refuses_a_region_at_address_zero():
    with pytest.raises(ValueError, match="address"):
        _inplace.in_place([(0, 8)], None)


# -- torch ------------------------------------------------------------------------------
def test_a_lookalike_bound_to_torch_default_generator_is_never_dereferenced(tmp_path):
    pytest.importorskip("torch")
    events = run_script(
        tmp_path,
        f"""
        import ctypes, json
        import torch
        from rngtrace import rng_trace

        with rng_trace(print=False):
            torch.rand(1)  # proves the layout: it is cached from here on
        real = torch.default_generator

        class LookAlike(ctypes.c_void_p):
            # Where a torch generator keeps its C++ handle, this one keeps a pointer to an unmapped page.
            device = real.device
            def get_state(self):
                return real.get_state()
            def set_state(self, state):
                real.set_state(state)

        torch.default_generator = LookAlike.from_address(0x1000)
        with rng_trace(print=False) as trace:
            torch.rand(2)
        print({EVENTS})
        """,
    )
    assert events == [["torch", "draw", "torch.rand", 2]]


def test_an_object_that_is_not_a_torch_generator_gets_no_raw_read():
    pytest.importorskip("torch")
    from rngtrace.sources import _torch_state

    class LookAlike:
        __slots__ = ("handle",)  # an object pointer where a generator keeps its handle

        def __init__(self) -> None:
            self.handle = object()

    fake = LookAlike()
    assert _torch_state.impl_address(fake) == 0
    assert _torch_state.fingerprint(fake) is None


def test_a_torch_newer_than_the_headers_checked_is_not_dereferenced(monkeypatch):
    torch = pytest.importorskip("torch")
    from rngtrace.sources import _torch_state

    def no_read(generator):
        raise AssertionError("the generator's handle was read")

    monkeypatch.setattr(torch, "__version__", "99.0.0")
    monkeypatch.setattr(_torch_state, "_impl", no_read)
    assert _torch_state._prove() is None


def _tensors_of_every_kind(torch) -> dict:
    """Tensors a draw can return, made without drawing: dense, strided, empty, 0-d, every layout here."""
    import warnings

    with warnings.catch_warnings():  # beta/prototype/deprecation notices of the rarer layouts
        warnings.simplefilter("ignore")
        kinds = {
            "contiguous": torch.zeros(4, 5),
            "int32": torch.empty(7, dtype=torch.int32),
            "slice": torch.zeros(10)[2:7],
            "transposed": torch.zeros(3, 8).t(),
            "expanded": torch.zeros(3, 1).expand(3, 4),
            "0-d": torch.zeros(()),
            "empty": torch.empty(0, 3),
            "bool": torch.ones(6, dtype=torch.bool)[::2],
            "complex": torch.zeros(3, dtype=torch.complex64),
            "half": torch.zeros(3, dtype=torch.float16),
            "channels_last": torch.zeros(2, 3, 4, 5).to(memory_format=torch.channels_last),
            "requires_grad": torch.zeros(2, 3, requires_grad=True),
            "sparse_coo": torch.eye(3).to_sparse(),
            "sparse_csr": torch.eye(3).to_sparse_csr(),
            "quantized": torch.quantize_per_tensor(torch.zeros(4), 0.1, 0, torch.quint8),
            "meta": torch.empty(3, 5, device="meta"),
            "nested": torch.nested.nested_tensor([torch.zeros(2), torch.zeros(3)]),
        }
        with torch.inference_mode():
            kinds["inference_mode"] = torch.zeros(5)
    return kinds


def test_a_cpu_tensors_count_read_in_place_is_torchs_and_any_other_tensor_asks_torch():
    torch = pytest.importorskip("torch")
    from rngtrace.sources import _torch_tensor

    layout = _torch_tensor.tensor_layout()
    if _torch_tensor.torch_version() != (2, 13):
        assert layout is None  # only the release whose headers were read
        return
    assert layout is not None, "the pinned torch's TensorImpl layout was not proved"
    for name, tensor in _tensors_of_every_kind(torch).items():
        read = _torch_tensor.read_count(layout, tensor)
        if name in ("meta", "nested"):  # another device; custom sizes (numel_ is not its count)
            assert read is None, name
        else:
            assert tensor.is_cpu and read == tensor.numel(), name


def test_the_tensor_layout_is_proved_alike_inside_a_default_device_and_inference_mode():
    torch = pytest.importorskip("torch")
    from rngtrace.sources import _torch_tensor

    plain = _torch_tensor._prove()
    with torch.device("meta"):  # a first install inside the user's contexts makes its probes on the CPU still
        on_meta = _torch_tensor._prove()
    with torch.inference_mode():
        inferring = _torch_tensor._prove()
    assert on_meta == inferring == plain


def test_a_torch_whose_headers_were_not_read_gets_no_tensor_read_in_place(monkeypatch):
    torch = pytest.importorskip("torch")
    from rngtrace.sources import _torch_tensor

    def no_read(tensor):
        raise AssertionError("a tensor's TensorImpl was read")

    monkeypatch.setattr(torch, "__version__", "2.14.0")
    monkeypatch.setattr(_torch_tensor, "_impl", no_read)
    assert _torch_tensor._prove() is None


@pytest.mark.parametrize(
    "draw, values",
    [
        ("torch.rand(3, 4)", 12),
        ("torch.randint(0, 9, (2, 5))", 10),
        ("torch.randn((), dtype=torch.float64)", 1),
        ("torch.rand(0, 3)", 0),
        ("torch.randn(2, 3, dtype=torch.complex64)", 6),
        ("torch.bernoulli(torch.full((5, 2), 0.5).t())", 10),
        ("torch.nn.functional.dropout(torch.ones(4, 6).t(), 0.5)", 24),
        ("torch.nn.functional.dropout(torch.nested.nested_tensor([torch.ones(2), torch.ones(3)]), 0.5)", 5),
    ],
)
def test_a_torch_draw_counts_its_results_values_on_the_cpu_stream(draw, values):
    torch = pytest.importorskip("torch")
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # nested tensors' prototype notice
        with rng_trace(print=False) as trace:
            eval(draw, {"torch": torch})
    assert [(e.stream, e.count) for e in trace.events] == [("torch", values)]


def test_a_torch_draw_on_the_meta_device_records_nothing():
    torch = pytest.importorskip("torch")
    with rng_trace(print=False) as trace:
        torch.rand(3, 4, device="meta")
    assert trace.events == []


# -- numpy ------------------------------------------------------------------------------
def test_a_bit_generator_merely_named_mt19937_gets_no_in_place_view_and_its_moves_are_reported():
    class MT19937(np.random.PCG64):  # about 48 bytes of state where MT19937 keeps 2,500
        pass

    original = np.random.get_bit_generator()
    np.random.set_bit_generator(MT19937(1))
    try:
        assert numpy_source.NumpySource().fingerprint() is None
        with rng_trace(print=False) as trace:
            np.random.get_bit_generator().random_raw()  # no wrapper sees a bit generator's own draw
    finally:
        np.random.set_bit_generator(original)
    assert [(e.stream, e.kind) for e in trace.events] == [("numpy", "unattributed")]


def test_numpy_gets_no_in_place_view_that_would_miss_the_cached_normal(monkeypatch):
    # Without the has_gauss flag, a normal taken from the cached pair would move nothing the view reads.
    monkeypatch.setattr(_numpy_views, "_gauss_flag_offset", lambda: None)
    assert numpy_source.NumpySource().fingerprint() is None


def test_np_random_rand_is_recorded_after_mtrand_rand_is_rebound(tmp_path):
    events = run_script(
        tmp_path,
        f"""
        import json
        import numpy as np
        from rngtrace import rng_trace

        np.random.mtrand._rand = np.random.RandomState(1)  # np.random.rand still draws from the old one
        with rng_trace(print=False) as trace:
            np.random.rand(3)
            np.random.mtrand._rand.rand(2)
        print({EVENTS})
        """,
    )
    assert events == [["numpy", "draw", "numpy.random.rand", 3], ["numpy", "draw", "numpy.random.rand", 2]]


def test_a_move_of_the_singleton_np_random_rand_still_draws_from_is_reported(tmp_path):
    events = run_script(
        tmp_path,
        f"""
        import json
        import numpy as np
        from rngtrace import rng_trace

        old = np.random.mtrand._rand
        np.random.mtrand._rand = np.random.RandomState(1)
        with rng_trace(print=False) as trace:
            np.random.mtrand._rand.rand()
            old._bit_generator.random_raw()  # moves the stream np.random.rand draws from
        print({EVENTS})
        """,
    )
    assert [event[:2] for event in events] == [["numpy", "draw"], ["numpy", "unattributed"]]


def test_a_draw_from_a_singleton_rebound_inside_the_block_is_reported():
    original = np.random.mtrand._rand
    try:
        with rng_trace(print=False) as trace:
            np.random.mtrand._rand = np.random.RandomState(1)
            np.random.mtrand._rand.rand()  # the type's wrappers record the singleton they were made for
    finally:
        np.random.mtrand._rand = original
    assert [(e.stream, e.kind) for e in trace.events] == [("numpy", "unattributed")]


# -- random -----------------------------------------------------------------------------
def test_random_functions_are_recorded_after_random_inst_is_rebound(tmp_path):
    events = run_script(
        tmp_path,
        f"""
        import json, random
        from rngtrace import rng_trace

        random._inst = random.Random(5)  # random.random stays bound to the instance made at import
        with rng_trace(print=False) as trace:
            random.random()
        print({EVENTS})
        """,
    )
    assert events == [["random", "draw", "random.random", 1]]


def test_a_system_random_bound_to_random_inst_is_not_read_as_a_twister(tmp_path):
    events = run_script(
        tmp_path,
        f"""
        import json, random
        from rngtrace import rng_trace

        random._inst = random.SystemRandom()  # the twister's layout, and no state
        with rng_trace(print=False) as trace:
            random.random()
        print({EVENTS})
        """,
    )
    assert events == [["random", "draw", "random.random", 1]]


def test_with_torch_default_generator_rebound_the_generator_torch_draws_from_is_still_watched(monkeypatch):
    torch = pytest.importorskip("torch")

    class LookAlike:
        pass

    # torch.rand draws from torch._C.default_generator whatever the Python attribute names.
    monkeypatch.setattr(torch, "default_generator", LookAlike())
    with rng_trace(print=False) as trace:
        torch.rand(2)
        torch.ops.aten.normal_(torch.empty(3))  # nothing wraps this op: only the watch sees it
    assert [(e.api, e.kind) for e in trace.events] == [("torch.rand", "draw"), ("torch state", "unattributed")]


def test_a_proof_made_while_another_thread_draws_still_gives_a_view():
    # A failed proof leaves the stream with no in-place view for good (compared only at block
    # ends): another thread's draw landing between the two reads must not fail it.
    import random
    import threading

    from rngtrace.sources import random as random_source

    stop = threading.Event()

    def draw():
        while not stop.is_set():
            random.random()

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    thread = threading.Thread(target=draw)
    thread.start()
    try:
        views = [random_source._mt_view(random._inst) for _ in range(2000)]
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(switch)
    assert all(view is not None for view in views), f"{views.count(None)} of 2000 proofs failed"
