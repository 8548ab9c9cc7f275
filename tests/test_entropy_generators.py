"""Generators made from OS entropy (issue 24 item 1): recorded at the user's line, found, diffed and checked.

`np.random.default_rng()`, `np.random.RandomState()`, `np.random.Generator(np.random.PCG64())`,
`np.random.SeedSequence()`, `random.Random()` and `torch.Generator().seed()` each make a generator
whose numbers change every run: one event of kind `entropy` (the library's stream, the call as its
api) and an `unseeded` finding naming the line and the seeded form. A generator given a seed is no
event, nor is what the standard library makes for itself; the global streams are not moved by any.
"""

from __future__ import annotations

import importlib.util
import json
import os
import random
import re
import runpy
import secrets
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

from rngtrace import rng_trace
from rngtrace.render.html import render as render_html
from rngtrace.render.text import render

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")


@pytest.fixture
def traced(tmp_path, monkeypatch):
    """Run a source as prog.py, in its own directory, inside a trace: the finished trace."""
    monkeypatch.chdir(tmp_path)

    def run(source: str):
        path = tmp_path / "prog.py"
        path.write_text(textwrap.dedent(source))
        with rng_trace(print=False) as trace:
            runpy.run_path(str(path), run_name="__main__")
        return trace

    return run


def made(trace) -> list[tuple[str, str, str, int]]:
    """(stream, api, file, line) of each entropy event."""
    return [(e.stream, e.api, Path(e.frame.filename).name, e.frame.lineno) for e in trace.events if e.kind == "entropy"]


CONSTRUCTORS = [
    ("import numpy as np\nx = 1\nrng = np.random.default_rng()\n", "numpy", "numpy.random.default_rng"),
    ("import numpy as np\nx = 1\nrng = np.random.default_rng(None)\n", "numpy", "numpy.random.default_rng"),
    ("from numpy.random import default_rng\nx = 1\nrng = default_rng()\n", "numpy", "numpy.random.default_rng"),
    ("import numpy as np\nx = 1\nrs = np.random.RandomState()\n", "numpy", "numpy.random.RandomState"),
    ("import numpy as np\nx = 1\ng = np.random.Generator(np.random.PCG64())\n", "numpy", "numpy.random.Generator"),
    ("import numpy as np\nx = 1\nss = np.random.SeedSequence()\n", "numpy", "numpy.random.SeedSequence"),
    ("import random\nx = 1\nrng = random.Random()\n", "random", "random.Random"),
    ("import random\nx = 1\nrng = random.Random(None)\n", "random", "random.Random"),
    ("import random\nrng = random.Random(3)\nrng.seed()\n", "random", "random.Random.seed"),
    pytest.param("import torch\ng = torch.Generator()\ng.seed()\n", "torch", "torch.Generator.seed", marks=needs_torch),
]


@pytest.mark.parametrize(("source", "stream", "api"), CONSTRUCTORS, ids=[str(i) for i in range(len(CONSTRUCTORS))])
def test_each_generator_made_from_entropy_is_one_event_at_the_users_line_with_its_api(traced, source, stream, api):
    trace = traced(source)
    assert made(trace) == [(stream, api, "prog.py", 3)]
    assert [e.kind for e in trace.events] == ["entropy"]  # no draw, no seed of the global stream


def test_a_generator_made_with_a_seed_is_no_event(traced):
    trace = traced(
        """\
        import random
        import numpy as np

        seed = 4
        a = np.random.default_rng(0)
        b = np.random.RandomState(1)
        c = np.random.RandomState(seed=seed)
        d = np.random.Generator(np.random.PCG64(2))
        e = np.random.SeedSequence(3)
        f = random.Random(5)
        h = np.random.default_rng(np.random.SeedSequence(7))
        i = np.random.default_rng()
        """,
    )
    assert made(trace) == [("numpy", "numpy.random.default_rng", "prog.py", 12)]  # the one made with none


def test_what_the_standard_library_makes_for_itself_is_silent():
    with rng_trace(print=False) as trace:
        handle, name = tempfile.mkstemp()
        random.SystemRandom().random()
        secrets.token_hex(8)
        random.Random()  # the user's own: the one event
    Path(name).unlink()
    os.close(handle)
    assert [(e.kind, e.api, e.frame.function) for e in trace.events] == [
        ("entropy", "random.Random", "test_what_the_standard_library_makes_for_itself_is_silent")
    ]


@needs_torch
def test_a_torch_generator_given_a_seed_or_the_default_one_seeded_is_no_generator_from_entropy(traced):
    trace = traced(
        """\
        import torch
        g = torch.Generator().manual_seed(6)
        torch.default_generator.seed()
        h = torch.Generator()
        h.seed()
        """,
    )
    assert [(e.kind, e.api, e.frame.lineno) for e in trace.events] == [
        ("seed", "torch.default_generator.seed", 3),
        ("entropy", "torch.Generator.seed", 5),
    ]


@needs_torch
def test_the_seeds_of_the_global_streams_made_from_entropy_stay_seeds_not_generators(traced):
    trace = traced(
        """\
        import numpy as np
        import torch
        np.random.seed()
        torch.seed()
        rng = np.random.default_rng()
        """,
    )
    assert [(e.kind, e.api) for e in trace.events] == [
        ("seed", "numpy.random.seed"),
        ("seed", "torch.seed"),
        ("entropy", "numpy.random.default_rng"),
    ]


@needs_torch
def test_each_line_is_an_unseeded_cause_naming_the_seeded_form_its_stream_declares(traced):
    trace = traced(
        """\
        import random
        import numpy as np
        import torch
        for _ in range(3):
            rng = np.random.default_rng()
        r = random.Random()
        g = torch.Generator()
        g.seed()
        """,
    )
    found = [(f.kind, f.stream, f.level, f.fix) for f in trace.findings]
    assert found == [
        ("unseeded", "numpy", "cause", "give it a seed: np.random.default_rng(0) at prog.py:5"),
        ("unseeded", "random", "cause", "give it a seed: random.Random(0) at prog.py:6"),
        ("unseeded", "torch", "cause", "give it a seed: torch.Generator().manual_seed(0) at prog.py:8"),
    ]
    assert len(trace.findings[0].events) == 3  # one finding per line, every event it rests on
    assert trace.findings[0].message == (
        "np.random.default_rng() at prog.py:5 makes a generator from OS entropy, so every run draws differently from it"
    )


def test_the_text_log_lists_the_event_and_counts_generators_not_draws(traced):
    trace = traced("import numpy as np\nx = 1\nrng = np.random.default_rng()\n")
    text = render(trace)
    assert text.splitlines()[0].startswith("rngtrace: 1 event — numpy: 1 generator from entropy — 1 cause found")
    assert "0  numpy   entropy  numpy.random.default_rng  prog.py:3 in <module>" in text


def test_the_html_report_marks_it_as_a_generator_from_entropy_not_a_draw(traced):
    trace = traced("import numpy as np\nx = 1\nrng = np.random.default_rng()\n")
    page = render_html(trace)
    data = json.loads(re.search(r'<script type="application/json" id="rngtrace-data">(.*?)</script>', page, re.S)[1])
    (site,) = data["site"]
    assert data["sites"][site][1:3] == [3, "numpy.random.default_rng"]  # its own kind code, not a draw's 0
    assert '<span class="shape entropy"></span>generator from entropy' in page
    assert "Seeds, unattributed moves and generators from entropy" in page  # listed among what moves numbers


@needs_torch
def test_drawn_values_are_the_same_traced_and_untraced(tmp_path):
    source = """\
        import random
        import numpy as np
        import torch
        out = [
            np.random.default_rng(1).random(3).tolist(),
            np.random.RandomState(2).rand(2).tolist(),
            np.random.Generator(np.random.PCG64(3)).integers(0, 100, 4).tolist(),
            random.Random(4).random(),
            torch.rand(2, generator=torch.Generator().manual_seed(5)).tolist(),
        ]
        unused = np.random.default_rng()
        """
    path = tmp_path / "prog.py"
    path.write_text(textwrap.dedent(source))
    untraced = runpy.run_path(str(path))["out"]
    with rng_trace(print=False) as trace:
        traced_out = runpy.run_path(str(path))["out"]
    assert traced_out == untraced
    assert [(e.kind, e.frame.lineno) for e in trace.events] == [("entropy", 11)]


def test_an_entropy_generator_leaves_the_global_streams_where_they_were(tmp_path):
    np.random.seed(0)
    expected = np.random.random()
    np.random.seed(0)
    with rng_trace(print=False) as trace:
        np.random.default_rng()
        random.Random()
        got = np.random.random()
    assert got == expected
    assert [e.kind for e in trace.events] == ["entropy", "entropy", "draw"]


def test_nothing_stays_hooked_after_the_trace():
    import numpy.random.bit_generator as bit_generator

    before = (bit_generator.randbits, random.Random.seed)
    with rng_trace(print=False):
        during = (bit_generator.randbits, random.Random.seed)
    assert during[0] is not before[0] and during[1] is not before[1]
    assert (bit_generator.randbits, random.Random.seed) == before


# -- diff and check ------------------------------------------------------------------------------

PROGRAM = """\
import numpy as np

np.random.seed(0)
noise = np.random.default_rng()
print(np.random.rand(), noise.random())
"""


def rngtrace(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rngtrace", *args], cwd=tmp_path, capture_output=True, text=True, timeout=240
    )


def test_diff_of_two_runs_that_made_generators_from_entropy_says_so_and_exits_1(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    for name in ("a", "b"):
        assert rngtrace(tmp_path, "run", "--quiet", "--json", f"{name}.json", "prog.py").returncode == 0
    done = rngtrace(tmp_path, "diff", "a.json", "b.json")
    assert done.returncode == 1
    assert done.stdout.splitlines()[0] == (
        "rngtrace diff: A = a.json and B = b.json made the same calls, but made generators from OS entropy at "
        "prog.py:4 in <module>: "
        "they draw other numbers in every run"
    )
    assert "drew the same" not in done.stdout


def test_check_names_the_generator_made_from_entropy_as_the_cause(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    done = rngtrace(tmp_path, "check", "prog.py")
    report = done.stderr
    assert done.returncode == 1, report
    assert report.splitlines()[0] == (
        "rngtrace check: not reproducible — numpy.random.default_rng() at prog.py:4 makes a generator from OS "
        "entropy, so each run draws other numbers from it"
    )
    assert "Cause: entropy — a generator made from entropy" in report
    assert "fix: give it a seed: np.random.default_rng(0) at prog.py:4" in report


def test_the_pytest_report_lists_a_test_that_made_one_apart_from_the_tests_that_drew(tmp_path):
    (tmp_path / "test_noise.py").write_text(
        "import numpy as np\n\n\ndef test_noise():\n    assert np.random.default_rng().random() < 1\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "--rng-trace", "-p", "no:randomly", "-p", "no:cacheprovider"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stdout
    assert "1 test traced: 0 drew from or reseeded a global random stream" in done.stdout
    assert "; 1 made a generator from OS entropy" in done.stdout
    assert "test_noise.py:5 in test_noise  numpy.random.default_rng() made a generator from OS entropy" in done.stdout
