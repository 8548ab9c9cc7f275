"""A seed made through torch's ``_disable_dynamo`` decorator is shown at the line that called it.

torch._dynamo, once imported, wraps ``torch.manual_seed`` in that decorator (torch/_compile.py's
``inner``, then Dynamo's ``DisableContext.__call__.<locals>._fn``); imported inside a trace, it wraps
rngtrace's own recorder, and transformers' ``set_seed`` was shown "called at
torch/_dynamo/eval_frame.py ... _fn" (issue 24). Run in a fresh interpreter: torch._dynamo must
not be imported before the trace starts.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

PROGRAM = textwrap.dedent(
    """
    import torch
    from rngtrace import rng_trace

    def set_seed(seed):
        torch.manual_seed(seed)

    with rng_trace(print=False) as first:
        import torch._dynamo  # wraps torch.manual_seed, rngtrace's recorder inside
        set_seed(1)
    with rng_trace(print=False) as second:
        set_seed(2)

    @torch._disable_dynamo
    def library_seed(seed):
        torch.manual_seed(seed)

    with rng_trace(print=False) as third:
        library_seed(3)
    for trace in (first, second, third):
        e = trace.events[0]
        print(e.kind, e.detail, e.frame.function, e.frame.lineno)
    """
)


def test_a_seed_through_torchs_disable_dynamo_wrapper_is_shown_at_the_line_that_called_it(tmp_path):
    script = tmp_path / "seeds.py"
    script.write_text(PROGRAM)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:3] == [
        "seed 1 set_seed 6",
        "seed 2 set_seed 6",
        "seed 3 library_seed 16",
    ]
