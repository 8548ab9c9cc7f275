"""Exercise rngtrace's CUDA paths where a GPU is available; one PASS/FAIL line per check.

Run from the repository root: ``python scripts/gpu_check.py``. Exits 1 when any
check fails or no CUDA device is visible. The CPU-only test suite cannot reach
these paths; tests/test_torch.py's CUDA tests cover the same ground under pytest.
"""

from __future__ import annotations

import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

import torch
import torch.nn as nn

from rngtrace import GlobalRNGError, rng_isolate, rng_trace
from rngtrace._hub import HUB

CUDA0 = "torch.cuda:0"
_results: list[bool] = []


def check(name: str, test: Callable[[], Any]) -> None:
    """Run one check: it passes when ``test`` returns a true value without raising."""
    try:
        outcome = test()
        ok, why = (outcome, "") if isinstance(outcome, bool) else (bool(outcome[0]), outcome[1])
    except Exception:
        ok, why = False, traceback.format_exc(limit=3).strip().splitlines()[-1]
    _results.append(ok)
    print(f"{'PASS' if ok else 'FAIL'}  {name}" + (f"\n      {why}" if why and not ok else ""))


def trace(**kwargs: Any) -> Any:
    return rng_trace(streams="torch", print=False, **kwargs)


def workload() -> list[torch.Tensor]:
    """Seed, then draw on the GPU the ways a training script does."""
    torch.manual_seed(0)  # the CPU generator too: the layers are initialised there
    model = nn.Sequential(nn.Linear(16, 16), nn.Dropout(0.5), nn.Linear(16, 4)).cuda().train()
    x = torch.randn(8, 16, device="cuda")
    perm = torch.randperm(8, device="cuda")
    noise = torch.empty(8, 4, device="cuda").normal_()
    mask = torch.bernoulli(torch.full((8, 4), 0.3, device="cuda"))
    return [model(x[perm]) + noise * mask, perm, torch.rand_like(x)]


def namespaces() -> dict[str, dict[str, int]]:
    """Identity of every callable in each namespace the torch source patches."""
    names = [
        "torch",
        "torch.random",
        "torch.nn.functional",
        "torch.nn.init",
        "torch.cuda",
        "torch.cuda.random",
        "torch.utils.data.dataset",
    ]
    out = {n: {k: id(v) for k, v in vars(sys.modules[n]).items() if callable(v)} for n in names if n in sys.modules}
    out["torch.Tensor"] = {k: id(v) for k, v in vars(torch.Tensor).items() if callable(v)}
    return out


def left_behind(before: dict[str, dict[str, int]]) -> tuple[bool, str]:
    now = namespaces()
    changed = [f"{ns}.{k}" for ns, attrs in before.items() for k, v in attrs.items() if now[ns].get(k, v) != v]
    clean = not changed and HUB.hooked() == {} and sys.getprofile() is None
    return clean, f"changed={changed} hooked={HUB.hooked()} profile={sys.getprofile()}"


def bit_identical() -> tuple[bool, str]:
    untraced = workload()
    untraced_next = torch.randn(32, device="cuda")
    with trace():
        traced = workload()
    traced_next = torch.randn(32, device="cuda")
    same = all(torch.equal(a, b) for a, b in zip(untraced, traced)) and torch.equal(untraced_next, traced_next)
    return same, "traced values or the stream after the block differ"


def events_on_cuda0() -> tuple[bool, str]:
    with trace() as t:
        torch.randn(100, device="cuda")
        torch.empty(3, 3, device="cuda:0").uniform_()
        nn.functional.dropout(torch.ones(10, device="cuda"), 0.5, True)
        torch.rand(4)
    got = [(e.stream, e.api, e.count) for e in t.events if e.kind == "draw"]
    want = [
        (CUDA0, "torch.randn", 100),
        (CUDA0, "torch.Tensor.uniform_", 9),
        (CUDA0, "torch.nn.functional.dropout", 10),
        ("torch", "torch.rand", 4),
    ]
    return got == want, f"got {got}"


def explicit_generators() -> tuple[bool, str]:
    own = torch.Generator(device="cuda").manual_seed(1)
    with trace() as t:
        torch.randn(5, device="cuda", generator=own)
        torch.randn(6, device="cuda", generator=torch.cuda.default_generators[0])
    got = [(e.stream, e.count) for e in t.events]
    return got == [(CUDA0, 6)], f"got {got}"


def seed_all_recorded() -> tuple[bool, str]:
    with trace() as t:
        torch.cuda.manual_seed_all(7)
    got = [(e.stream, e.kind, e.api, e.detail) for e in t.events]
    return got == [(CUDA0, "seed", "torch.cuda.manual_seed_all", "7")], f"got {got}"


def default_generator_method() -> tuple[bool, str]:
    with trace() as t:
        torch.cuda.default_generators[0].manual_seed(5)
    got = [(e.stream, e.kind) for e in t.events]
    return got == [(CUDA0, "seed")], f"got {got}"


def manual_seed_explains_cuda() -> tuple[bool, str]:
    # One event on "torch" for a call that reseeds every device: the hub's end-of-block
    # check must count it as explaining "torch.cuda:N" too, or it adds an unattributed event.
    with trace() as t:
        torch.manual_seed(3)
    got = [(e.stream, e.kind, e.api) for e in t.events]
    return got == [("torch", "seed", "torch.manual_seed")], f"got {got}"


def raise_leaves_cuda_state() -> tuple[bool, str]:
    before = torch.cuda.get_rng_state()
    try:
        with trace(on_draw="raise"):
            torch.randn(3, device="cuda")
    except GlobalRNGError as error:
        unchanged = torch.equal(before, torch.cuda.get_rng_state())
        return unchanged and CUDA0 in str(error), f"state unchanged={unchanged}; message: {error}"
    return False, "no GlobalRNGError"


def isolate_restores_cuda() -> tuple[bool, str]:
    before_cuda, before_cpu = torch.cuda.get_rng_state(), torch.get_rng_state()
    with rng_isolate():
        torch.randn(1000, device="cuda")
        torch.cuda.manual_seed(99)
        torch.rand(3)
    cuda_ok = torch.equal(before_cuda, torch.cuda.get_rng_state())
    cpu_ok = torch.equal(before_cpu, torch.get_rng_state())
    return cuda_ok and cpu_ok, f"cuda restored={cuda_ok} cpu restored={cpu_ok}"


def fork_rng_restores_cuda() -> tuple[bool, str]:
    # fork_rng hands out each device's state and puts it back: restores, not seeds (issue 24).
    with trace() as t:
        with torch.random.fork_rng(device_type="cuda"):
            torch.randn(3, device="cuda")
            torch.rand(3)
        saved = torch.cuda.get_rng_state()
        torch.randn(3, device="cuda")
        torch.cuda.set_rng_state(saved)
    got = [(e.stream, e.kind) for e in t.events if e.kind in ("seed", "restore")]
    want = [("torch", "restore"), (CUDA0, "restore"), (CUDA0, "restore")]
    # Each restore names the line of this file that saved its state (past torch's and contextlib's frames).
    saved = [e.saved_at for e in t.events if e.kind == "restore"]
    named = all(s is not None and s[1].filename == __file__ for s in saved)
    return got == want and named and not t.findings, f"got {got}, saved at {saved}, findings {t.findings}"


def thread_on_cuda() -> tuple[bool, str]:
    with trace() as t:
        worker = threading.Thread(target=lambda: torch.rand(2, device="cuda"), name="gpu-worker")
        worker.start()
        worker.join()
    got = [(e.stream, e.thread) for e in t.events]
    return got == [(CUDA0, "gpu-worker")], f"got {got}"


def main() -> int:
    if not torch.cuda.is_available():
        print("FAIL  a CUDA device is visible (torch.cuda.is_available() is False)")
        return 1
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    torch.cuda.init()  # streams exist before each trace starts, as in a training script
    before = namespaces()
    check("traced CUDA draws are bit-identical to untraced, and the stream continues the same", bit_identical)
    check("CUDA draws are events on torch.cuda:0 with their counts", events_on_cuda0)
    check("generator=<own CUDA generator> is not recorded; the default one is", explicit_generators)
    check("torch.cuda.manual_seed_all is one seed event on torch.cuda:0", seed_all_recorded)
    check("torch.cuda.default_generators[0].manual_seed is seen by the catch-all", default_generator_method)
    check("torch.manual_seed is one event and explains the CUDA stream it reseeds", manual_seed_explains_cuda)
    check("on_draw='raise' names torch.cuda:0 and leaves the CUDA state unchanged", raise_leaves_cuda_state)
    check("rng_isolate restores the CUDA and CPU states", isolate_restores_cuda)
    check("fork_rng and torch.cuda.set_rng_state of a state handed out are restores", fork_rng_restores_cuda)
    check("a CUDA draw in another thread is recorded with that thread's name", thread_on_cuda)
    check("nothing is left patched or hooked afterwards", lambda: left_behind(before))
    failed = _results.count(False)
    print(f"{len(_results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
