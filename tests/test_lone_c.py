"""A lone trace's install and undo in C (``_speedups.lone_install``, ``lone_uninstall``, ``swap_parts``) do what
``_lone`` does."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from rngtrace._hotpath import SPEEDUPS

# Lone traces in every situation the plan checks for, the hub's state read after each: the same
# program with the Python reference (REFERENCE=1) and with the C functions must tell the same story.
PROGRAM = textwrap.dedent(
    """
    import json, os, random, sys
    assert "numpy" not in sys.modules and "multiprocessing" not in sys.modules
    from rngtrace import _lone, _postimport, rng_trace
    from rngtrace._hub import HUB

    if os.environ.get("REFERENCE"):
        from rngtrace import _patches

        install, uninstall = _lone.install_alone_python, _lone.uninstall_alone_python
        _patches._SWAP_PARTS = None  # Patches.swap_in and swap_out's Python steps, not swap_parts
    else:  # the C functions, whichever of the two this Python calls by default
        install, uninstall = _lone.install_alone_c, _lone.uninstall_alone_c
        assert install is not None and uninstall is not None
    said = []
    _lone.install_alone = lambda hub, session: said.append(("install", install(hub, session))) or said[-1][1]
    _lone.uninstall_alone = lambda hub: said.append(("undo", uninstall(hub))) or said[-1][1]

    story = []

    def block(body):
        with rng_trace(print=False) as trace:
            body()
        story.append({
            "said": said[:],
            "events": [(e.stream, e.kind, e.api, e.count) for e in trace.events],
            "hooked": sorted(HUB.hooked()),
            "finder": _postimport.installed(),
            "rand": getattr(sys.modules.get("numpy.random"), "rand", None).__class__.__name__,
        })
        said.clear()

    for _ in range(3):
        block(lambda: random.random())  # numpy and multiprocessing watched for: the plan repeats
    def import_numpy():
        import numpy.random
        numpy.random.rand(2)
    block(import_numpy)  # a watched library imported inside: the general way
    for _ in range(3):
        block(lambda: (random.random(), sys.modules["numpy.random"].rand()))
    def import_multiprocessing():
        import multiprocessing
    block(import_multiprocessing)  # BaseProcess.start hooked at its import: the general way takes it off
    for _ in range(3):
        block(lambda: sys.modules["numpy.random"].rand())  # now swapped with the streams' patches
    def nested():
        with rng_trace(print=False):
            random.random()
    block(nested)  # two sessions: the general way
    def patch_over():
        import numpy.random
        random.seed(1)
        numpy.random.seed = lambda *a: None  # another tool's patch over ours: a stray
    block(patch_over)
    for _ in range(2):
        block(lambda: random.random())
    json.dump(story, sys.stdout)
    """
)


def run(reference: bool) -> list:
    env = dict(os.environ)
    env.pop("RNGTRACE_PURE", None)
    env.pop("REFERENCE", None)
    if reference:
        env["REFERENCE"] = "1"
    out = subprocess.run([sys.executable, "-c", PROGRAM], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.skipif(SPEEDUPS is None, reason="needs the C accelerator")
def test_the_lone_install_and_undo_in_c_answer_and_act_as_the_python_reference_does():
    fast, reference = run(reference=False), run(reference=True)
    assert fast == reference
    said = [tuple(step) for block in fast for step in block["said"]]
    assert ("install", True) in said and ("undo", True) in said  # the plan was repeated
    assert ("install", False) in said and ("undo", False) in said  # and refused where it must be
    assert all(block["hooked"] == [] and not block["finder"] for block in fast)  # nothing left behind
    assert [api for _s, kind, api, _c in fast[3]["events"] if kind == "draw"] == ["numpy.random.rand"]
