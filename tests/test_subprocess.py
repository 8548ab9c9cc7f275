"""Python children started with ``subprocess`` under ``rngtrace run`` trace into the parent's log."""

from __future__ import annotations

import glob
import os
import subprocess
import sys
import tempfile
import textwrap
import time

import pytest

from rngtrace import cli
from rngtrace.trace import Trace

CHILD = """\
import random, sys
import numpy as np
np.random.seed(0)
print(np.random.rand(), random.Random(5).random())
"""


def _write(folder, name: str, text: str):
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def _run(tmp_path, script, *options: str, env: dict | None = None) -> tuple[subprocess.CompletedProcess, Trace]:
    log = tmp_path / "log.json"
    result = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", str(log), *options, str(script)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    return result, Trace.load(log)


def _spool_folders(folder: str | None = None) -> set[str]:
    return set(glob.glob(os.path.join(folder or tempfile.gettempdir(), "rngtrace-spool-*")))


def _own_temp(tmp_path) -> str:
    """A temporary folder of the test's own: other processes' spool folders never come and go in it."""
    folder = tmp_path / "tmp"
    folder.mkdir(exist_ok=True)
    return str(folder)


def test_a_python_child_started_with_subprocess_is_traced_with_its_pid_and_command(tmp_path):
    _write(tmp_path, "child.py", CHILD)
    parent = _write(
        tmp_path,
        "parent.py",
        """\
        import random, subprocess, sys
        random.seed(1)
        random.random()
        out = subprocess.run([sys.executable, "child.py"], capture_output=True, text=True, check=True).stdout
        print("child:", out.strip())
    """,
    )
    untraced = subprocess.run([sys.executable, str(parent)], capture_output=True, text=True, cwd=tmp_path)
    result, trace = _run(tmp_path, parent)
    assert result.stdout == untraced.stdout  # the child drew what it draws untraced

    child = [p for p in trace.processes if p.start == "subprocess"]
    assert len(child) == 1, trace.processes
    assert child[0].ppid == trace.pid and child[0].role == "python child.py" and child[0].exit == "normal"
    events = [(e.pid, e.api, e.stack[0].filename, e.stack[0].lineno) for e in trace.events if e.pid == child[0].pid]
    assert [(api, os.path.basename(f), line) for _pid, api, f, line in events] == [
        ("numpy.random.seed", "child.py", 3),
        ("numpy.random.rand", "child.py", 4),
    ]
    assert [e.api for e in trace.events if e.pid == trace.pid] == ["random.seed", "random.random"]


def test_a_grandchild_started_by_a_child_is_traced_too(tmp_path):
    _write(tmp_path, "grandchild.py", "import random; random.seed(3); random.random()\n")
    _write(
        tmp_path, "child.py", "import subprocess, sys; subprocess.run([sys.executable, 'grandchild.py'], check=True)\n"
    )
    parent = _write(
        tmp_path, "parent.py", "import subprocess, sys; subprocess.run([sys.executable, 'child.py'], check=True)\n"
    )
    _result, trace = _run(tmp_path, parent)
    by_role = {p.role: p for p in trace.processes if p.start == "subprocess"}
    assert set(by_role) == {"python child.py", "python grandchild.py"}
    assert by_role["python grandchild.py"].ppid == by_role["python child.py"].pid
    assert [e.api for e in trace.events if e.pid == by_role["python grandchild.py"].pid] == [
        "random.seed",
        "random.random",
    ]


def test_children_seeded_alike_are_a_duplicate_finding(tmp_path):
    _write(tmp_path, "child.py", "import numpy as np; np.random.seed(0); np.random.rand()\n")
    parent = _write(
        tmp_path,
        "parent.py",
        """\
        import subprocess, sys
        for _ in range(2):
            subprocess.run([sys.executable, "child.py"], check=True)
    """,
    )
    _result, trace = _run(tmp_path, parent)
    duplicates = [f for f in trace.findings if f.kind == "duplicate"]
    assert len(duplicates) == 1 and duplicates[0].stream == "numpy" and len(duplicates[0].pids) == 2


def test_a_child_outliving_the_program_runs_on_untraced_and_leaves_no_folder(tmp_path):
    _write(
        tmp_path,
        "child.py",
        """\
        import os, random, sys, time
        time.sleep(1.0)
        random.seed(2)
        with open("done.txt", "w") as out:
            out.write(repr(random.random()))
    """,
    )
    parent = _write(tmp_path, "parent.py", "import subprocess, sys; subprocess.Popen([sys.executable, 'child.py'])\n")
    temp = _own_temp(tmp_path)
    before = _spool_folders(temp)
    _result, trace = _run(tmp_path, parent, env={**os.environ, "TMPDIR": temp})
    deadline = time.monotonic() + 30
    while not (tmp_path / "done.txt").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    import random

    random.seed(2)
    assert (tmp_path / "done.txt").read_text() == repr(random.random())
    assert not [e for e in trace.events if e.pid != trace.pid]  # it drew after the log was taken
    assert _spool_folders(temp) <= before


def test_the_childs_sitecustomize_still_runs_and_the_child_sees_no_rngtrace_path(tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import sys; sys.USER_SITECUSTOMIZE = True\n")
    _write(
        tmp_path,
        "child.py",
        """\
        import random, sys
        random.random()
        print(getattr(sys, "USER_SITECUSTOMIZE", False), any("rngtrace-spool" in p for p in sys.path))
    """,
    )
    parent = _write(
        tmp_path,
        "parent.py",
        """\
        import subprocess, sys
        print(subprocess.run([sys.executable, "child.py"], capture_output=True, text=True, check=True).stdout, end="")
    """,
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    result, trace = _run(tmp_path, parent, env=env)
    assert result.stdout == "True False\n"
    assert [p.role for p in trace.processes if p.start == "subprocess"] == ["python child.py"]


def test_an_isolated_child_runs_untraced_and_unharmed(tmp_path):
    _write(tmp_path, "child.py", CHILD)
    parent = _write(
        tmp_path,
        "parent.py",
        """\
        import subprocess, sys
        print(subprocess.run([sys.executable, "-I", "child.py"], capture_output=True, text=True, check=True).stdout)
    """,
    )
    result, trace = _run(tmp_path, parent)
    assert result.stdout.startswith("0.5488135039273248 ")
    assert [p.start for p in trace.processes if p.pid != trace.pid] == []


def test_a_spawned_worker_under_run_is_one_spawn_process_not_a_subprocess_too(tmp_path):
    parent = _write(
        tmp_path,
        "parent.py",
        """\
        import multiprocessing as mp
        import numpy as np

        def work():
            np.random.seed(4)
            np.random.rand()

        if __name__ == "__main__":
            p = mp.get_context("spawn").Process(target=work)
            p.start()
            p.join()
    """,
    )
    _result, trace = _run(tmp_path, parent)
    starts = sorted(p.start for p in trace.processes if p.pid != trace.pid)
    assert starts == ["spawn"]  # neither the worker twice nor the resource tracker


def test_run_puts_pythonpath_back_and_removes_the_boot_folder(tmp_path, monkeypatch, capsys):
    _write(tmp_path, "child.py", "import random; random.random()\n")
    script = _write(
        tmp_path,
        "parent.py",
        """\
        import os, subprocess, sys
        subprocess.run([sys.executable, "child.py"], check=True)
        SEEN = os.environ["PYTHONPATH"]
    """,
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTHONPATH", "/nowhere/else")
    temp = _own_temp(tmp_path)
    monkeypatch.setenv("TMPDIR", temp)
    monkeypatch.setattr(tempfile, "tempdir", temp)
    before = _spool_folders(temp)
    assert cli.main(["run", "--quiet", "--json", str(tmp_path / "log.json"), str(script)]) == 0
    assert os.environ["PYTHONPATH"] == "/nowhere/else"
    assert _spool_folders(temp) <= before
    trace = Trace.load(tmp_path / "log.json")
    assert [p.role for p in trace.processes if p.start == "subprocess"] == ["python child.py"]


@pytest.mark.parametrize("preset", [None, ""])
def test_run_leaves_no_pythonpath_where_there_was_none(tmp_path, monkeypatch, preset):
    script = _write(tmp_path, "parent.py", "import random; random.random()\n")
    monkeypatch.chdir(tmp_path)
    if preset is None:
        monkeypatch.delenv("PYTHONPATH", raising=False)
    else:
        monkeypatch.setenv("PYTHONPATH", preset)
    assert cli.main(["run", "--quiet", str(script)]) == 0
    assert os.environ.get("PYTHONPATH") == preset


def test_a_child_whose_rngtrace_writes_another_spool_format_runs_untraced(tmp_path):
    from rngtrace import __version__
    from rngtrace._hub import HUB
    from rngtrace._spool import SPOOL_FORMAT
    from rngtrace._subprocess import begin

    spec = (("numpy",), 16, 1000, (1,))
    begin(str(tmp_path), spec, __version__)  # a release without the format in its handshake
    begin(str(tmp_path), spec, f"{__version__}/{SPOOL_FORMAT - 1}")
    assert list(tmp_path.iterdir()) == [] and HUB._child is None and HUB.hooked() == {}
