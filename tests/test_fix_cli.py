"""`rngtrace fix` on the command line: the README's examples and two real third-party scripts fixed
and run again, bad inputs, and LibCST as an optional extra.

Each example is copied and traced, fixed with `--write` from its log, then traced twice more: the
fixed program still runs, shows none of the findings the fix addressed, and the two runs draw the
same (`rngtrace diff`, exit 0) and `rngtrace check` says reproducible.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("libcst")

from rngtrace.cli import main
from rngtrace.trace import Trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def rngtrace(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    run_env = {**os.environ, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "rngtrace", *args], cwd=cwd, capture_output=True, text=True, env=run_env
    )


def findings(log: Path) -> set[tuple[str, str]]:
    return {(f.kind, f.stream) for f in Trace.load(log).findings}


@pytest.fixture
def examples(tmp_path):
    shutil.copytree(EXAMPLES, tmp_path / "examples")
    return tmp_path / "examples"


_NEEDS = {"story": "numpy", "cluster": "sklearn", "train": "torch", "loader": "torch", "entropy": "numpy"}
#: the reseed examples: (folder, script, the environment they run in)
_RESEEDS = {
    "import_reseed": ("", "import_reseed.py", {"PYTHONPATH": "site-packages"}),
    "reseed/train": ("reseed", "train.py", {}),
}


def _example(examples: Path, name: str) -> tuple[Path, str, dict]:
    if name in _RESEEDS:
        folder, script, env = _RESEEDS[name]
        return examples / folder, script, env
    pytest.importorskip(_NEEDS[name])
    return examples, f"{name}.py", {}


_FIXED = ["story", "cluster", "train", "loader", "import_reseed", "reseed/train", "entropy"]


@pytest.mark.parametrize("name", _FIXED)
def test_a_fixed_example_runs_and_shows_none_of_the_findings_the_fix_addressed(examples, name):
    where, script, env = _example(examples, name)
    assert rngtrace("run", "--quiet", "--json", "before.json", script, cwd=where, env=env).returncode == 0
    before = findings(where / "before.json")
    assert before
    done = rngtrace("fix", "--write", "before.json", cwd=where, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# rngtrace fix: ") and f"+++ b/{script}" in done.stdout
    ran = rngtrace("run", "--quiet", "--json", "after.json", script, cwd=where, env=env)
    assert ran.returncode == 0, ran.stderr
    assert findings(where / "after.json") == set()


@pytest.mark.parametrize("name", _FIXED)
def test_a_fixed_example_is_reproducible_by_rngtrace_check(examples, name):
    where, script, env = _example(examples, name)
    done = rngtrace("fix", "--write", "--", script, cwd=where, env=env)
    assert done.returncode == 0, done.stderr
    checked = rngtrace("check", script, cwd=where, env=env)
    assert checked.returncode == 0, checked.stderr
    assert checked.stderr.splitlines()[-1].startswith("rngtrace check: reproducible — "), checked.stderr


def test_two_runs_of_a_fixed_example_draw_the_same(examples):
    pytest.importorskip("torch")
    done = rngtrace("fix", "--write", "--", "train.py", cwd=examples)
    assert done.returncode == 0, done.stderr
    for log in ("a.json", "b.json"):
        assert rngtrace("run", "--quiet", "--json", log, "train.py", cwd=examples).returncode == 0
    compared = rngtrace("diff", "a.json", "b.json", cwd=examples)
    assert compared.returncode == 0, compared.stdout


def test_fixing_from_a_script_prints_what_fixing_from_its_log_prints(examples):
    assert rngtrace("run", "--quiet", "--json", "story.json", "story.py", cwd=examples).returncode == 0
    from_log = rngtrace("fix", "story.json", cwd=examples)
    from_script = rngtrace("fix", "--", "story.py", cwd=examples)
    assert from_log.returncode == from_script.returncode == 0
    body = lambda out: out[out.index("--- a/") :]  # noqa: E731 - the header names its source
    assert body(from_script.stdout) == body(from_log.stdout)
    assert "+    rng = np.random.default_rng(666)\n" in from_log.stdout
    assert (examples / "story.py").read_text() == (EXAMPLES / "story.py").read_text()  # no --write: unchanged


# -- two real third-party scripts: statsmodels' data generators, installed with it -----------------

#: scripts statsmodels ships (BSD-3-Clause) that seed NumPy's legacy stream and draw from it; read
#: where pip installed them, never copied here
_STATSMODELS = ("regression/tests/results/generate_lasso.py", "duration/tests/results/phreg_gentests.py")


def _installed(relative: str) -> Path:
    spec = importlib.util.find_spec("statsmodels")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("statsmodels is not installed (the test extra installs it)")
    path = Path(spec.submodule_search_locations[0]) / relative
    if not path.is_file():
        pytest.skip(f"this statsmodels ships no {relative}")
    return path


@pytest.mark.parametrize("relative", _STATSMODELS, ids=lambda r: Path(r).stem)
def test_a_real_seeded_legacy_script_moves_to_a_generator_and_still_runs_reproducibly(tmp_path, relative):
    script = tmp_path / Path(relative).name
    shutil.copy(_installed(relative), script)
    (tmp_path / "results").mkdir()  # phreg_gentests writes there
    done = rngtrace("fix", "--all", "--write", "--", script.name, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    text = script.read_text()
    assert "rng = np.random.default_rng(" in text
    assert not re.search(r"np\.random\.(?!default_rng)", text)  # no legacy call left
    outputs = []
    for log in ("a.json", "b.json"):
        ran = rngtrace("run", "--quiet", "--json", log, script.name, cwd=tmp_path)
        assert ran.returncode == 0, ran.stderr
        assert Trace.load(tmp_path / log).events == []  # no global stream drawn any more
        outputs.append({p.name: p.read_bytes() for p in sorted(tmp_path.rglob("*.csv"))})
    assert outputs[0] and outputs[0] == outputs[1]  # the data it writes is the same run to run


# -- bad input: one line, exit 2, nothing written ---------------------------------------------------


def _one_error_line(capsys) -> str:
    out, err = capsys.readouterr()
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("rngtrace: error: ")
    return lines[0]


def test_a_missing_log_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["fix", "nowhere.json"]) == 2
    assert "nowhere.json" in _one_error_line(capsys)


def test_a_log_that_is_not_rngtraces_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "other.json").write_text(json.dumps({"format": "something else"}))
    assert main(["fix", "other.json"]) == 2
    assert "not an rngtrace log" in _one_error_line(capsys)


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["fix"], "give one log to fix from, or -- script.py"),
        (["fix", "prog.py"], "to run it traced first, put -- before it: rngtrace fix -- prog.py"),
        (["fix", "a.json", "--", "prog.py"], "give a log or -- and a script, not both"),
        (["fix", "--", "missing.py"], "no such script: 'missing.py'"),
    ],
)
def test_a_mistaken_command_line_says_what_to_do(tmp_path, monkeypatch, capsys, argv, says):
    monkeypatch.chdir(tmp_path)
    assert main(argv) == 2
    assert says in _one_error_line(capsys)


def test_a_script_that_fails_is_said_and_nothing_is_written(tmp_path):
    script = tmp_path / "boom.py"
    source = "import numpy as np\n\nx = np.random.rand()\nraise SystemExit(3)\n"
    script.write_text(source)
    done = rngtrace("fix", "--write", "--", "boom.py", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines()[-1] == (
        "rngtrace: error: boom.py exited with status 3 (its output is above); make it run, then fix"
    )
    assert script.read_text() == source


def test_without_libcst_it_says_what_to_install(tmp_path):
    code = (
        "import sys; sys.modules['libcst'] = None; from rngtrace.cli import main; "
        "raise SystemExit(main(['fix', 'run.json']))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr == (
        "rngtrace: error: rngtrace fix rewrites with LibCST, which is not installed: pip install 'rngtrace[fix]'\n"
    )


def test_deciding_what_to_change_imports_no_libcst():
    code = "import sys, rngtrace._fix_plan, rngtrace.cli, rngtrace.fix; print('libcst' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
