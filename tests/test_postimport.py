"""rngtrace's own post-import hooks (``_postimport``), and what a traced child imports before its first line."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

from rngtrace import _postimport, rng_trace


def _module_file(tmp_path, name: str) -> None:
    (tmp_path / f"{name}.py").write_text("VALUE = 41\n")


def test_a_hook_fires_once_when_its_module_is_imported_and_the_finder_leaves_with_it(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _module_file(tmp_path, "rngtrace_late_module")
    seen = []
    _postimport.register(seen.append, "rngtrace_late_module")
    try:
        assert _postimport.installed()
        import rngtrace_late_module

        assert seen == [rngtrace_late_module]
        assert not _postimport.installed() and _postimport.describe() == {}
        # The module keeps its own loader, not the hook's.
        assert type(rngtrace_late_module.__loader__).__name__ == "SourceFileLoader"
        assert rngtrace_late_module.__spec__.loader is rngtrace_late_module.__loader__
    finally:
        _postimport.unregister(seen.append, "rngtrace_late_module")
        sys.modules.pop("rngtrace_late_module", None)


def test_a_hook_taken_out_before_the_import_never_fires(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    _module_file(tmp_path, "rngtrace_unwatched_module")
    seen = []
    _postimport.register(seen.append, "rngtrace_unwatched_module")
    _postimport.unregister(seen.append, "rngtrace_unwatched_module")
    try:
        assert not _postimport.installed() and _postimport.describe() == {}
        import rngtrace_unwatched_module  # noqa: F401

        assert seen == []
    finally:
        sys.modules.pop("rngtrace_unwatched_module", None)


def test_a_hook_for_a_module_already_imported_fires_at_once_and_installs_nothing():
    seen = []
    _postimport.register(seen.append, "json")
    assert seen == [json] and not _postimport.installed()


def test_register_many_and_unregister_many_do_what_register_and_unregister_do_one_pair_at_a_time():
    # A lone trace's start and end register its watches in one pass (C where the accelerator is built).
    first, second, third = [], [], []
    pairs = [
        (first.append, "rngtrace_never_imported_a"),
        (second.append, "rngtrace_never_imported_b"),
        (third.append, "json"),  # imported already: called at once, nothing waits for it
        (first.append, "rngtrace_never_imported_a"),  # registered again: still once
    ]
    _postimport.register(second.append, "rngtrace_never_imported_a")  # another hook, waiting already
    try:
        _postimport.register_many(pairs)
        assert third == [json] and first == second == []
        assert _postimport.installed() and sys.meta_path.count(_postimport.FINDER) == 1
        assert _postimport.describe() == {
            "rngtrace_never_imported_a": [second.append, first.append],
            "rngtrace_never_imported_b": [second.append],
        }
        _postimport.unregister_many(pairs)
        assert _postimport.describe() == {"rngtrace_never_imported_a": [second.append]}
        assert _postimport.installed()  # a hook still waits: the finder stays
    finally:
        _postimport.unregister(second.append, "rngtrace_never_imported_a")
    assert not _postimport.installed() and _postimport.describe() == {}


# numpy imported inside the trace: the stream is installed by the post-import hook, and nothing is left.
_LATE_NUMPY = """
import json, sys
from rngtrace import _postimport, rng_trace
assert "numpy" not in sys.modules
with rng_trace(print=False) as trace:
    waiting = sorted(_postimport.describe())
    import numpy.random
    numpy.random.rand()
print(json.dumps([waiting, [e.api for e in trace.events], _postimport.describe() == {}, _postimport.installed()]))
"""


def test_a_library_imported_inside_a_trace_is_traced_and_no_post_import_hook_outlives_it():
    done = subprocess.run([sys.executable, "-c", _LATE_NUMPY], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    waiting, apis, none_left, finder_left = json.loads(done.stdout)
    assert "numpy.random" in waiting
    assert apis == ["numpy.random.rand"]
    assert none_left and not finder_left


# A Python child of a program run under ``rngtrace run``: what it has imported when its own first line runs.
_PARENT = """
import subprocess, sys
subprocess.run([sys.executable, "-c", {child!r}], check=True)
"""
_CHILD = """
import json, sys
first = sorted(m for m in sys.modules if m.split(".")[0] in ("wrapt", "asyncio", "importlib") or m == "hashlib")
import random
random.random()
print(json.dumps([first, "rngtrace._hub" in sys.modules]))
"""


def test_a_traced_child_imports_neither_wrapt_nor_asyncio_nor_the_entry_points_before_its_first_line(tmp_path):
    script = tmp_path / "parent.py"
    script.write_text(_PARENT.format(child=textwrap.dedent(_CHILD)))
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--quiet", str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    first, traced = json.loads(done.stdout.strip().splitlines()[-1])
    assert traced  # the child records: rngtrace started before its first line
    assert [m for m in first if m.split(".")[0] in ("wrapt", "asyncio")] == []
    assert "importlib.metadata" not in first and "hashlib" not in first


def test_a_trace_started_and_ended_leaves_no_post_import_hook():
    with rng_trace(print=False, streams=("random",)):
        pass
    assert _postimport.describe() == {} and not _postimport.installed()
