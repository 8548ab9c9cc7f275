"""A fix names a call that takes the argument it proposes, and puts the library's own remedy first.

An argument (``random_state=0``) is proposed only where the real callable's signature takes it: for a
method that does not, to the constructor of the object the user built, at the line that built it. The
alternatives come in the order to try them: seed the library call, draw from your own generator,
``torch.random.fork_rng()`` for torch, and ``rngtrace.rng_isolate()`` last.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from literal_traces import build, draw

from rngtrace import rng_trace
from rngtrace._paths import short_path

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples")
HERE = os.path.abspath(__file__)
ME = short_path(HERE)


def line_here(event) -> int:
    """The line of this file an event's stack passes through."""
    return next(f.lineno for f in event.stack if f.filename == HERE)


def rngtrace_run(cwd: str, script: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", script], cwd=cwd, capture_output=True, text=True, timeout=300
    )


# -- an argument only where the callable takes it ---------------------------------------------


def test_a_grid_search_is_seeded_at_the_forest_it_was_built_with_not_at_fit(tmp_path):
    # GridSearchCV(...).fit takes no random_state: the forest the user built for it does, at line 7.
    done = rngtrace_run(EXAMPLES, "grid.py")
    assert done.returncode == 0, done.stderr
    finding = done.stderr.split("  ! global-generator: ", 1)[1].splitlines()[:3]
    assert finding == [
        "GridSearchCV.fit at grid.py:8 draws from NumPy's global stream (no",
        "    random_state=): its result changes with every draw before it",
        "    fix: RandomForestClassifier(n_estimators=10, random_state=0) at grid.py:7",
    ]
    assert "<listcomp>" not in done.stderr and "fit(..., random_state=0)" not in done.stderr
    # Following the advice works: the fixed program runs, and no call draws from the global stream.
    source = open(os.path.join(EXAMPLES, "grid.py"), encoding="utf-8").read()
    fixed = source.replace(
        "RandomForestClassifier(n_estimators=10)", "RandomForestClassifier(n_estimators=10, random_state=0)"
    )
    (tmp_path / "grid.py").write_text(fixed)
    again = rngtrace_run(str(tmp_path), "grid.py")
    assert again.returncode == 0, again.stderr
    assert "global-generator" not in again.stderr and "sklearn/" not in again.stderr


def test_an_estimator_built_on_one_line_and_fitted_on_another_is_seeded_where_it_was_built():
    from sklearn.cluster import KMeans

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        model = KMeans(n_clusters=2, n_init=1)
        built = sys._getframe().f_lineno - 1
        model.fit(np.arange(40.0).reshape(20, 2))
        np.random.rand()
    (finding,) = trace.findings
    assert finding.fix.startswith(f"KMeans(n_clusters=2, n_init=1, random_state=0) at {ME}:{built}, or draw your own")


def test_a_random_state_given_as_none_is_set_not_given_twice():
    from sklearn.cluster import KMeans

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        KMeans(n_clusters=2, n_init=1, random_state=None).fit(np.arange(40.0).reshape(20, 2))
        np.random.rand()
    (finding,) = trace.findings
    assert finding.fix.startswith("KMeans(n_clusters=2, n_init=1, random_state=0) at ")


def test_a_method_that_takes_random_state_itself_is_given_it():
    # scipy's rvs(*args, **kwds) documents random_state as a parameter.
    import scipy.stats

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        scipy.stats.norm.rvs(size=3)
        np.random.rand()
    (finding,) = trace.findings
    line = line_here(trace.events[1])
    assert finding.fix.startswith(f"rvs(..., random_state=0) at {ME}:{line}, or draw your own")


def test_a_call_no_signature_can_be_read_for_is_given_no_argument(tmp_path):
    # A saved log's scikit-learn frame names a function its installed scikit-learn does not have.
    sklearn_file = os.path.join(os.path.dirname(np.__file__), os.pardir, "sklearn", "utils", "_indexing.py")
    user = (str(tmp_path / "s.py"), 2, "<module>")
    trace = build(draw("numpy.random.permutation", 64, (os.path.normpath(sklearn_file), 5, "no_such_function"), user))
    (finding,) = trace.findings
    assert finding.kind == "global-generator"
    assert finding.fix == f"np.random.seed(0) right before no_such_function() at {short_path(user[0])}:2"


# -- the order of the alternatives -----------------------------------------------------------


def test_a_library_drawing_torch_between_seed_and_draw_is_wrapped_in_fork_rng_never_rng_isolate(package):
    torch = pytest.importorskip("torch")
    warm = package("torchwarm", "import torch\n\ndef warm():\n    torch.rand(1)\n")
    with rng_trace(print=False, streams="torch") as trace:
        torch.manual_seed(0)
        warm.warm()
        called = sys._getframe().f_lineno - 1
        torch.randn(2)
    (finding,) = trace.findings
    assert finding.kind == "interleaved"
    assert finding.fix == (
        f"draw your own at {ME}:{called + 2}: g = torch.Generator().manual_seed(0), passed as "
        f"torch.randn(..., generator=g), or wrap warm() at {ME}:{called} in `with torch.random.fork_rng():`"
    )


def test_a_library_reseeding_torch_is_wrapped_in_fork_rng(package):
    torch = pytest.importorskip("torch")
    setup = package("torchsetup", "import torch\n\ndef setup():\n    torch.manual_seed(42)\n")
    with rng_trace(print=False, streams="torch") as trace:
        torch.manual_seed(0)
        setup.setup()
        called = sys._getframe().f_lineno - 1
        torch.randn(2)
    (finding,) = [f for f in trace.findings if f.kind == "reseeded"]
    assert finding.fix == (
        f"move your seed below {ME}:{called}, or wrap setup() at {ME}:{called} in `with torch.random.fork_rng():`"
    )


def test_a_library_seeded_by_its_argument_comes_before_your_own_generator():
    from sklearn.model_selection import train_test_split

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        train_test_split(np.arange(20.0))
        np.random.rand()
    (finding,) = trace.findings
    split, mine = line_here(trace.events[1]), line_here(trace.events[2])
    assert finding.fix == (
        f"train_test_split(..., random_state=0) at {ME}:{split}, "
        f"or draw your own at {ME}:{mine}: rng = np.random.default_rng(0); rng.random(...)"
    )
