"""What a traced Python child's start costs: the modules rngtrace imports before the child's first line.

A specification, not a timing: a child started with ``subprocess`` under ``rngtrace run`` imports
only what recording its first draw needs. Its streams' declarations and sources come with their
libraries (NumPy's when the child imports NumPy), the spool's folder tools with the parent that
makes and removes the folder, the value classes with whoever reads the events.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import textwrap

import pytest

from rngtrace.sources import Stream, declared, module_of
from rngtrace.trace import Trace

#: modules a traced child's start must not import (each was imported by it once, or is heavy to import)
HEAVY = {
    "asyncio",  # wrapt imports it
    "wrapt",
    "numpy",
    "torch",
    "importlib.metadata",  # the entry points: the parent hands them in
    "importlib.util",
    "shutil",  # the spool folder's removal: the parent's
    "tempfile",  # the spool folder's making: the parent's
    "pickle",
    "rngtrace._model",  # the value classes (frozen dataclasses): built when a log is read
    "rngtrace.sources.numpy_stream",
    "rngtrace.sources.torch_stream",
    "rngtrace.sources.numpy",
    "rngtrace.sources.torch",
    "rngtrace.tracer",
    "rngtrace.trace",
    "dataclasses",  # Stream is written out: the dataclass machinery imports inspect, ast, dis, tokenize
    "inspect",
    "ast",  # the entropy wrappers parse a caller's line only when one makes a generator
    "tokenize",
}

# Writes the modules it has once its first draw is recorded; ``sys.argv[1]`` names the file.
CHILD = """\
import random, sys
random.random()
with open(sys.argv[1], "w") as out:
    out.write("\\n".join(sorted(sys.modules)))
"""


def _child_modules(tmp_path, child: str, traced: bool) -> tuple[set[str], Trace | None]:
    (tmp_path / "child.py").write_text(child)
    name = "traced.txt" if traced else "untraced.txt"
    parent = tmp_path / "parent.py"
    parent.write_text(f"import subprocess, sys\nsubprocess.run([sys.executable, 'child.py', {name!r}], check=True)\n")
    log = tmp_path / "log.json"
    command = ["-m", "rngtrace", "run", "--quiet", "--json", str(log)] if traced else []
    done = subprocess.run(
        [sys.executable, *command, str(parent)], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert done.returncode == 0, done.stderr
    modules = set((tmp_path / name).read_text().split())
    return modules, Trace.load(log) if traced else None


def _child_events(trace: Trace) -> list[str]:
    child = [p.pid for p in trace.processes if p.start == "subprocess"]
    assert len(child) == 1, trace.processes
    return [e.api for e in trace.events if e.pid == child[0]]


def test_a_traced_childs_start_imports_none_of_the_heavy_modules(tmp_path):
    untraced, _ = _child_modules(tmp_path, CHILD, traced=False)
    traced, trace = _child_modules(tmp_path, CHILD, traced=True)
    assert trace is not None and _child_events(trace) == ["random.random"]  # traced from its first line
    added = traced - untraced
    assert "rngtrace._hub" in added
    assert sorted(added & HEAVY) == []


def test_a_childs_numpy_declaration_and_source_come_with_numpy_and_its_draws_are_recorded(tmp_path):
    child = textwrap.dedent(
        """\
        import random, sys
        random.random()
        before = set(sys.modules)
        import numpy as np
        np.random.seed(3)
        np.random.rand()
        with open(sys.argv[1], "w") as out:
            out.write("\\n".join(sorted(m + ("" if m in before else ":later") for m in sys.modules)))
        """
    )
    modules, trace = _child_modules(tmp_path, child, traced=True)
    assert trace is not None
    assert _child_events(trace) == ["random.random", "numpy.random.seed", "numpy.random.rand"]
    assert {"rngtrace.sources.numpy_stream:later", "rngtrace.sources.numpy:later"} <= modules
    assert not {m for m in modules if m.startswith("rngtrace.sources.torch")}


def test_each_of_rngtraces_streams_is_watched_for_the_module_its_declaration_names():
    for name, stream in declared().items():
        assert module_of(name) == stream.module, name


def test_a_child_whose_first_import_is_numpy_records_its_draws_from_numpys_whole_import(tmp_path):
    # NumPy imports random (through secrets) from inside its own import, and random's stream arrives then:
    # numpy.random is in sys.modules half made, and installing its stream then would import the source
    # (and numpy.random.mtrand) inside that import. Its own hook installs it once the import ends.
    child = textwrap.dedent(
        """\
        import sys
        import numpy as np
        np.random.seed(0)
        x = np.random.rand()
        with open(sys.argv[1], "w") as out:
            out.write("\\n".join(sorted(sys.modules)))
        """
    )
    untraced_modules, _ = _child_modules(tmp_path, child, traced=False)
    assert "random" in untraced_modules  # numpy's own import brings random: the case this test is about
    _modules, trace = _child_modules(tmp_path, child, traced=True)
    assert trace is not None
    assert _child_events(trace) == ["numpy.random.seed", "numpy.random.rand"]


def test_a_stream_is_frozen_equal_by_its_fields_and_pickles_as_a_frozen_dataclass_did():
    toy = Stream("toy", "toylib", "toylib.rngtrace_source:ToySource", seed_call="toylib.seed(0)")
    assert toy == Stream("toy", "toylib", "toylib.rngtrace_source:ToySource", seed_call="toylib.seed(0)")
    assert toy != Stream("toy", "toylib", "toylib.rngtrace_source:ToySource")
    assert pickle.loads(pickle.dumps(toy)) == toy
    assert toy.renames == {} and toy.renames is not Stream("a", "b", "c").renames  # a fresh mapping each
    assert repr(toy).startswith("Stream(name='toy', module='toylib', source=")
    with pytest.raises(AttributeError):
        toy.name = "other"
