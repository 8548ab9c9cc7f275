"""The hooks child processes need are the hub's: put on through the patch set and taken off with it.

``BaseProcess.start`` (or, before multiprocessing is imported, a post-import hook
waiting for it) while a trace records; in a child that records, ``os._exit``, an
``atexit`` handler and the ``put``/``get`` of multiprocessing's queues. ``HUB.hooked()``
names each, the hub's undo takes each off, and a Ctrl-C at any line of a child's start
leaves each as it was found.
"""

from __future__ import annotations

import ast
import json
import multiprocessing.process
import multiprocessing.queues
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from conftest import _process_hooks

from rngtrace import rng_trace
from rngtrace._hub import HUB

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")

#: each hook a recording child has, as ``HUB.hooked()["processes"]`` names it
CHILD_HOOKS = {
    "os._exit",
    "multiprocessing.process.BaseProcess.start",
    "multiprocessing.queues.SimpleQueue.put",
    "multiprocessing.queues.SimpleQueue.get",
    "multiprocessing.queues.Queue.put",
    "multiprocessing.queues.Queue.get",
    "atexit: the recording child's end",
}


def test_a_recording_child_has_each_process_hook_from_the_hub_and_the_parents_end_takes_each_off():
    found = _process_hooks()
    read, write = os.pipe()
    with rng_trace(print=False):
        assert HUB.hooked()["processes"] == ["multiprocessing.process.BaseProcess.start"]
        pid = os.fork()
        if pid == 0:
            os.close(read)
            np.random.rand()
            during = HUB.hooked().get("processes", [])
            replaced = sorted(key for key, value in _process_hooks().items() if value != found[key])
            time.sleep(0.5)  # the parent's block ends meanwhile: this child stops recording
            left = HUB.hooked()
            kept = _process_hooks() == found
            os.write(write, repr((sorted(during), replaced, left, kept)).encode())
            os._exit(0)
        time.sleep(0.1)
    os.close(write)
    said = os.read(read, 4000).decode()
    os.waitpid(pid, 0)
    os.close(read)
    during, replaced, left, kept = ast.literal_eval(said)
    assert set(during) == CHILD_HOOKS
    assert replaced == sorted(found)  # os._exit, atexit, BaseProcess.start and the four queue methods
    assert left == {} and kept


def test_the_process_hooks_are_no_streams_wrappers():
    # The catch-all takes a stream's wrappers for calls that record themselves: never these.
    with rng_trace(print=False):
        start = vars(multiprocessing.process.BaseProcess)["start"]
        assert start.__module__ == "rngtrace._hooks" and start.__wrapped__ is not None
        assert start not in HUB.wrappers()
        assert not [name for name in HUB.hooked()["patches"] if "BaseProcess" in repr(HUB.hooked()["patches"][name])]


def test_a_grandchild_writes_only_its_own_events_not_its_parents_again():
    # The grandchild inherits its parent's hooks: its way out is its own writer's alone.
    with rng_trace(print=False) as trace:
        pid = os.fork()
        if pid == 0:
            for _ in range(5):
                np.random.rand()  # not written yet when the grandchild is forked
            grandchild = os.fork()
            if grandchild == 0:
                np.random.rand(7)
                os._exit(0)
            os.waitpid(grandchild, 0)
            time.sleep(0.2)
            os._exit(4)
        os.waitpid(pid, 0)
    child = [e.count for e in trace.events if e.pid == pid]
    assert child == [1] * 5, child
    assert [e.count for e in trace.events if e.pid not in (pid, trace.pid)] == [7]
    assert {p.pid: p.exit for p in trace.processes[1:]}[pid] == "exit code 4"


# A fresh interpreter: the start of a spawned child's trace (what ``SpawnedTarget`` and
# ``_subprocess.begin`` call), interrupted at its n-th line run inside rngtrace, for every n,
# first before multiprocessing is imported (the post-import hook waits for it), then after.
_EVERY_LINE = """
import json, os, sys, tempfile
sys.path.insert(0, {tests!r})
from conftest import _process_hooks
import rngtrace
from rngtrace._hub import HUB

PACKAGE = os.path.dirname(rngtrace.__file__)


class Target:  # what a SpawnedTarget carries
    def __init__(self, folder):
        self.file = os.path.join(folder, f"{{os.getpid()}}-{{len(os.listdir(folder))}}.spool")
        os.close(os.open(self.file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
        self.spec, self.start = (("random",), 16, 1000, (1,)), "spawn"


class Interrupt:
    def __init__(self, at):
        self.at, self.seen = at, 0

    def __call__(self, frame, event, arg):
        return self.line if frame.f_code.co_filename.startswith(PACKAGE) else None

    def line(self, frame, event, arg):
        if event == "line":
            self.seen += 1
            if self.seen == self.at:
                raise KeyboardInterrupt
        return self.line


def left(found):
    out = {{}}
    if HUB.active or HUB.hooked():
        out["hub"] = (len(HUB.active), HUB.hooked())
    now = _process_hooks()
    out.update({{k: v for k, v in now.items() if v != found.get(k)}})
    from rngtrace import _postimport
    if _postimport.describe() or _postimport.installed():
        out["post-import hooks"] = (_postimport.describe(), _postimport.installed())
    return out


def every_line(folder):
    found = _process_hooks()
    for at in range(1, 5000):
        interrupt = Interrupt(at)
        sys.settrace(interrupt)
        try:
            HUB.start_spawned(Target(folder))
        except KeyboardInterrupt:
            pass
        finally:
            sys.settrace(None)
        if interrupt.seen < at:  # it ran to the end: the child records, with every hook on
            on = HUB.hooked()["processes"]
            HUB._child.stop_recording()  # the parent's trace ended: the hub's undo
            assert not left(found), ("after the whole start", left(found))
            return at, on
        assert not left(found), (at, left(found))
    raise AssertionError("the start never ran to its end")


with tempfile.TemporaryDirectory() as folder:
    assert "multiprocessing" not in sys.modules
    lines, before = every_line(folder)
    import multiprocessing.queues
    lines_after, after = every_line(folder)
print(json.dumps([lines, before, lines_after, after]))
"""


def test_a_ctrl_c_at_any_line_of_a_childs_start_leaves_every_process_hook_as_found(tmp_path):
    script = tmp_path / "every_line.py"
    script.write_text(textwrap.dedent(_EVERY_LINE.format(tests=os.path.dirname(__file__))))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    lines, before, lines_after, after = json.loads(result.stdout)
    # Before multiprocessing is imported: the ways out, and the import hook waiting for it.
    assert set(before) == {"os._exit", "atexit: the recording child's end", "import hook for multiprocessing.process"}
    assert set(after) == CHILD_HOOKS
    assert lines > 50 and lines_after > 50  # each start was cut short at every one of its lines
