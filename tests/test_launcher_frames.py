"""Recorded stacks hold the program's frames only: never rngtrace's, runpy's or the launcher's."""

from __future__ import annotations

import json
import os
import random
import runpy
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rngtrace import _codes, _stack, rng_trace
from rngtrace._caller import call_as
from rngtrace.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"
PROGRAM = """\
import random

def draw():
    return random.random()

draw()
exec("random.random()")
"""
# The console script pip made for this interpreter, if rngtrace is installed in it.
CONSOLE_SCRIPT = shutil.which("rngtrace", path=os.path.dirname(sys.executable))


@pytest.fixture
def program(tmp_path: Path) -> Path:
    path = tmp_path / "prog.py"
    path.write_text(PROGRAM, encoding="utf-8")
    return path


def run(command: list[str], cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def saved_stacks(path: Path) -> list[list[tuple[str, int, str]]]:
    return [[tuple(frame) for frame in stack] for stack in json.loads(path.read_text(encoding="utf-8"))["stacks"]]


def assert_only_the_programs_frames(stacks: list, program: Path) -> None:
    assert stacks, "nothing was recorded"
    for stack in stacks:
        files = [filename for filename, _line, _function in stack]
        assert all(f in (str(program), "<string>") for f in files), files
        assert stack[-1][::2] == (str(program), "<module>"), stack  # the outermost frame is the program's


# -- rngtrace run --------------------------------------------------------------------


def test_rngtrace_run_stacks_end_at_the_scripts_module_frame(program):
    done = run([sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", "log.json", "prog.py"], program.parent)
    assert done.returncode == 0, done.stderr
    stacks = saved_stacks(program.parent / "log.json")
    assert_only_the_programs_frames(stacks, program)
    assert [(program.name, 4, "draw"), (program.name, 6, "<module>")] in [
        [(os.path.basename(f), line, fn) for f, line, fn in stack] for stack in stacks
    ]


@pytest.mark.skipif(CONSOLE_SCRIPT is None, reason="rngtrace is not installed with its console script here")
def test_the_console_script_leaves_no_frame_in_saved_stacks(program):
    done = run([CONSOLE_SCRIPT, "run", "--quiet", "--json", "log.json", "prog.py"], program.parent)
    assert done.returncode == 0, done.stderr
    assert_only_the_programs_frames(saved_stacks(program.parent / "log.json"), program)


def test_rngtrace_run_m_stacks_end_at_the_modules_frame(program):
    done = run([sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", "log.json", "-m", "prog"], program.parent)
    assert done.returncode == 0, done.stderr
    assert_only_the_programs_frames(saved_stacks(program.parent / "log.json"), program)


def test_cli_main_called_in_process_keeps_none_of_its_callers_frames(program, tmp_path):
    log = tmp_path / "log.json"
    assert main(["run", "--quiet", "--json", str(log), str(program)]) == 0
    assert_only_the_programs_frames(saved_stacks(log), program)  # not this test, not pytest


# -- runpy anywhere, and the end marker in every capture mode -------------------------


def test_runpy_frames_are_left_out_and_the_callers_frames_kept(program):
    with rng_trace(print=False) as trace:
        runpy.run_path(str(program))
    stack = trace.draws[0].stack
    # runpy's three frames sat between the program's <module> and this test's.
    assert [(f.filename, f.function) for f in stack[:3]] == [
        (str(program), "draw"),
        (str(program), "<module>"),
        (__file__, "test_runpy_frames_are_left_out_and_the_callers_frames_kept"),
    ]
    assert not [f for f in stack if f.filename in ("<frozen runpy>", runpy.__file__)]


def innermost() -> object:
    return sys._getframe()


def between() -> object:
    return innermost()


def runner() -> object:
    return between()


def launcher() -> object:
    return runner()


@pytest.mark.parametrize("mode", ["walk", "cached", "pinned"])
def test_every_capture_mode_ends_a_stack_at_a_program_entry(mode):
    _codes.program_entry(runner)
    table = _stack.StackTable()
    known = None if mode == "walk" else {}
    for _ in range(2):  # the second capture starts from what the first one cached
        frame = launcher()
        sid = table.capture(frame, 16, known, pin=mode == "pinned")
        assert [f.function for f in table.resolve(sid, 16)] == ["innermost", "between"]
    del frame


# -- the stand-in a wrapper calls an original through -----------------------------------


class DrawsWhenCollected:
    def __del__(self) -> None:
        random.random()


class DropsOneOnEachWrite(list):
    """A list whose every item assignment lets go of a DrawsWhenCollected: it draws inside a shuffle."""

    def __init__(self, n: int) -> None:
        super().__init__(range(n))
        self.held = [DrawsWhenCollected() for _ in range(n)]

    def __setitem__(self, index: object, value: object) -> None:
        super().__setitem__(index, value)
        if self.held:
            self.held.pop()


def test_the_stand_in_that_calls_an_original_is_never_in_a_stack():
    table = _stack.StackTable()
    captured = []

    def original() -> None:  # what a wrapper calls through the stand-in: here, a capture
        captured.append(table.capture(sys._getframe(), 16))

    call_as(sys._getframe(), original, (), {})
    names = [f.function for f in table.resolve(captured[0], 16)]
    # The stand-in is named as this test, at this line: seen, it would be this frame twice.
    assert names[0].endswith("original")
    assert names.count("test_the_stand_in_that_calls_an_original_is_never_in_a_stack") == 1, names


def test_a_draw_from_inside_a_recorded_call_shows_its_callers_line_once():
    with rng_trace(print=False) as trace:
        random.shuffle(DropsOneOnEachWrite(4))
    inner = [e for e in trace.draws if e.stack[0].function.endswith("__del__")]
    assert inner
    me = "test_a_draw_from_inside_a_recorded_call_shows_its_callers_line_once"
    for event in inner:
        # Once, not twice: the stand-in that called random.shuffle is named as this frame.
        assert [f.function for f in event.stack].count(me) == 1, event.stack
