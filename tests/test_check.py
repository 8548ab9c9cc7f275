"""``rngtrace check``: its verdict on the first line, the cause it names, the exit status it gives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def check(
    tmp_path: Path,
    source: str,
    *options: str,
    stdin: str | None = None,
    env: dict | None = None,
    ignoring_interrupts: bool = False,
) -> tuple:
    """Write ``source`` as prog.py and run ``rngtrace check [options] prog.py``: (status, stdout, report).

    ``ignoring_interrupts``: check starts with SIGINT ignored, as from a background job or nohup.
    """
    (tmp_path / "prog.py").write_text(textwrap.dedent(source))
    run_env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
    run_env.update(env or {})
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "check", *options, "prog.py"],
        cwd=tmp_path,
        input=stdin,
        capture_output=True,
        text=True,
        env=run_env,
        timeout=240,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if ignoring_interrupts else None,
    )
    return done.returncode, done.stdout, done.stderr


def test_a_seeded_program_is_reproducible_and_the_verdict_is_the_first_line(tmp_path):
    status, out, report = check(
        tmp_path,
        """
        import random
        import numpy as np
        np.random.seed(0)
        random.seed(1)
        print(np.random.rand(3).round(3), random.random())
        """,
    )
    assert status == 0
    assert report.splitlines()[0] == (
        "rngtrace check: reproducible — 2 runs made the same 2 draws from random, numpy and ended in the same states"
    )
    assert out.count("[0.549 0.715 0.603]") == 1  # run 1's output passed through, run 2's kept


def test_an_unseeded_numpy_draw_is_not_reproducible_and_names_its_line_and_fix(tmp_path):
    status, _out, report = check(
        tmp_path,
        """
        import numpy as np

        def noise():
            return np.random.rand(3)

        print(noise())
        """,
    )
    assert status == 1
    lines = report.splitlines()
    assert lines[0] == (
        "rngtrace check: not reproducible — numpy is never seeded, so each run draws other numbers from it, "
        "first at prog.py:5"
    )
    assert "  run 1  #0  numpy.random.rand ×3  differs" in lines
    assert "             prog.py:7 in <module>" in lines  # both runs' stacks, down to the user's outermost line
    assert "Cause: unseeded — a stream drawn from before any seed, or seeded from OS entropy" in lines
    assert (
        "  fix: np.random.seed(0) at the program's start, or rng = np.random.default_rng(0); rng.random(...) at "
        "prog.py:5" in lines
    )


def test_a_seed_that_changes_each_run_is_named_with_both_values(tmp_path):
    status, _out, report = check(
        tmp_path,
        """
        import random, time
        random.seed(time.time_ns())
        print(random.random())
        """,
    )
    assert status == 1
    assert report.startswith("rngtrace check: not reproducible — random.seed at prog.py:3 seeds random with another")
    assert "Cause: seed-value — a seed that takes another value each run" in report
    assert "fix: seed with a constant at prog.py:3: random.seed(0)" in report


def test_a_library_reseeding_from_entropy_is_named_inside_the_library_and_at_the_users_call(tmp_path):
    lib = tmp_path / "site-packages" / "jitterlib"  # an installed package, not the user's code
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text("import numpy as np\n\ndef warm_up():\n    np.random.seed()\n    return 1\n")
    source = """
        import sys
        sys.path.insert(0, "site-packages")
        import numpy as np
        import jitterlib
        np.random.seed(0)
        jitterlib.warm_up()
        print(np.random.rand())
    """
    status, _out, report = check(tmp_path, source)
    assert status == 1
    first = report.splitlines()[0]
    assert first.startswith("rngtrace check: not reproducible — numpy.random.seed() inside ")
    assert "jitterlib/__init__.py:4, called at prog.py:7, reseeds numpy from OS entropy" in first
    assert "Cause: library-entropy" in report


IDLIB = "import random\n\n_ids = random.getrandbits(24)  # rich/style.py's id counter, drawn as it is imported\n"


def test_a_library_drawing_an_unseeded_stream_as_it_is_imported_is_no_cause_in_check_nor_diff(tmp_path):
    # scikit-learn imports rich where it is installed, and rich draws from random, which nothing seeds.
    lib = tmp_path / "site-packages" / "idlib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(IDLIB)
    source = """
        import sys
        sys.path.insert(0, "site-packages")
        import numpy as np
        import idlib
        np.random.seed(0)
        print(np.random.rand())
    """
    status, _out, report = check(tmp_path, source, "--json", "logs")
    assert status == 0, report
    assert report.startswith("rngtrace check: reproducible — 2 runs made the same 2 draws from random, numpy")
    logs = [str(tmp_path / "logs" / f"run-{n}.json") for n in (1, 2)]
    compared = subprocess.run([sys.executable, "-m", "rngtrace", "diff", *logs], capture_output=True, text=True)
    assert compared.returncode == 0, compared.stdout


def test_a_draw_after_a_library_drew_the_unseeded_stream_at_import_is_still_the_cause(tmp_path):
    lib = tmp_path / "site-packages" / "idlib"
    lib.mkdir(parents=True)
    (lib / "__init__.py").write_text(IDLIB)
    source = """
        import sys
        sys.path.insert(0, "site-packages")
        import random
        import idlib
        print(random.random())
    """
    status, _out, report = check(tmp_path, source)
    assert status == 1
    assert report.splitlines()[0] == (
        "rngtrace check: not reproducible — random is never seeded, so each run draws other numbers from it, "
        "first at prog.py:6"
    )


def test_another_number_of_draws_that_a_restore_undid_is_no_cause(tmp_path):
    status, out, report = check(
        tmp_path,
        """
        import pathlib, random
        random.seed(0)
        runs = pathlib.Path("runs.txt")
        n = int(runs.read_text()) + 1 if runs.exists() else 1
        runs.write_text(str(n))

        def sanity_check():  # as Lightning's: save the state, draw, put it back
            state = random.getstate()
            for _ in range(n):  # one more draw each run
                random.random()
            random.setstate(state)

        sanity_check()
        print(random.random())
        """,
        "--runs",
        "3",
    )
    assert status == 0, report
    assert report.startswith("rngtrace check: reproducible — ")


def test_another_number_of_draws_names_the_first_extra_draw(tmp_path):
    # Each run reads and bumps a counter: run 2 draws once more than run 1, at a line of its own.
    status, _out, report = check(
        tmp_path,
        """
        import pathlib
        import numpy as np
        counter = pathlib.Path("runs.txt")
        n = int(counter.read_text()) if counter.exists() else 0
        counter.write_text(str(n + 1))
        np.random.seed(0)
        x = np.random.rand()
        if n % 2:
            x += np.random.rand()
        print(round(x, 3))
        """,
    )
    assert status == 1
    first = report.splitlines()[0]
    assert first.startswith("rngtrace check: not reproducible — run 2 makes 1 more numpy draw than run 1, the first at")
    assert "prog.py:10" in first
    assert "Cause: draw-count" in report


def test_output_that_follows_a_sets_order_is_blamed_on_hash_randomisation(tmp_path):
    status, _out, report = check(
        tmp_path,
        """
        import numpy as np
        np.random.seed(0)
        words = {"apple", "banana", "cherry", "damson", "elder", "fig"}
        for word in words:
            print(word, round(float(np.random.rand()), 3))
        """,
    )
    assert status == 1
    assert "the order of a set or dict of strings decides the result" in report.splitlines()[0]
    assert "Cause: hash-order" in report
    assert "rerun twice with PYTHONHASHSEED=0: the runs agree" in report


def test_output_that_differs_with_a_fixed_hash_seed_lies_outside_the_streams(tmp_path):
    status, _out, report = check(
        tmp_path,
        """
        import time
        import numpy as np
        np.random.seed(0)
        print(np.random.rand(), time.time_ns())
        """,
    )
    assert status == 1
    first = report.splitlines()[0]
    assert "printed other output, also with PYTHONHASHSEED fixed" in first
    assert "rngtrace cannot see it" in first


def test_a_hash_seed_the_user_fixed_is_kept_and_not_rerun(tmp_path):
    status, _out, report = check(
        tmp_path,
        """
        import time
        print(time.time_ns())
        """,
        env={"PYTHONHASHSEED": "7"},
    )
    assert status == 1
    assert "Cause: outside" in report
    assert "rerun twice" not in report


def test_a_program_that_fails_gives_status_2_and_says_its_exit_status(tmp_path):
    status, out, report = check(tmp_path, "import sys\nprint('hi')\nsys.exit(3)\n")
    assert status == 2
    assert out == "hi\n"
    assert report.splitlines()[-1] == (
        "rngtrace check: run 1 of prog.py exited with status 3; check compares runs that succeed: fix the failure first"
    )


def test_a_run_past_the_timeout_is_stopped_with_status_2(tmp_path):
    status, _out, report = check(tmp_path, "import time\ntime.sleep(60)\n", "--timeout", "3")
    assert status == 2
    assert "rngtrace check: run 1 ran past --timeout 3 s and was stopped; raise --timeout" in report


def test_a_run_stopped_at_the_timeout_leaves_no_spool_folder_behind(tmp_path):
    temp = tmp_path / "tmp"
    temp.mkdir()
    source = "import numpy as np, time\nnp.random.seed(0)\nnp.random.rand()\ntime.sleep(60)\n"
    status, _out, report = check(tmp_path, source, "--timeout", "4", env={"TMPDIR": str(temp)})
    assert status == 2, report
    assert sorted(p.name for p in temp.iterdir()) == []


def test_a_run_stopped_at_the_timeout_leaves_no_spool_folder_behind_where_check_ignores_interrupts(tmp_path):
    # As from a background job or nohup: SIGINT ignored, which the runs would inherit.
    temp = tmp_path / "tmp"
    temp.mkdir()
    source = "import numpy as np, time\nnp.random.rand()\ntime.sleep(60)\n"
    status, _out, report = check(
        tmp_path, source, "--timeout", "4", env={"TMPDIR": str(temp)}, ignoring_interrupts=True
    )
    assert status == 2, report
    assert "ran past --timeout 4 s and was stopped" in report
    assert sorted(p.name for p in temp.iterdir()) == []


def test_json_keeps_each_runs_log_for_show_and_diff(tmp_path):
    status, _out, report = check(tmp_path, "import numpy as np\nnp.random.rand()\n", "--runs", "3", "--json", "logs")
    assert status == 1
    names = sorted(p.name for p in (tmp_path / "logs").iterdir())
    assert names == ["run-1.json", "run-2.json", "run-3.json"]
    assert json.loads((tmp_path / "logs" / "run-2.json").read_text())["format"] == "rngtrace"
    assert f"  rngtrace diff {tmp_path / 'logs' / 'run-1.json'} {tmp_path / 'logs' / 'run-2.json'}" in report


def test_every_run_reads_the_same_standard_input(tmp_path):
    source = """
        import sys
        import numpy as np
        np.random.seed(int(sys.stdin.read()))
        print(np.random.rand())
    """
    status, out, report = check(tmp_path, source, stdin="5\n")
    assert status == 0, report
    assert out.strip() == "0.22199317108973948"


def test_a_module_runs_as_python_m_runs_it(tmp_path):
    pkg = tmp_path / "tool"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text("import random\nrandom.seed(3)\nprint(random.random())\n")
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "check", "-m", "tool"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("rngtrace check: reproducible — 2 runs made the same 1 draw from random")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--runs", "1", "prog.py"], "argument --runs: expected a whole number of runs >= 2, got '1'"),
        (["missing.py"], "no such file: 'missing.py'; check the path"),
        ([], "nothing to run; give a script or -m module: rngtrace check script.py [args ...]"),
        (["--timeout", "-1", "prog.py"], "argument --timeout: expected a number of seconds > 0, got '-1'"),
    ],
)
def test_bad_input_is_one_line_and_status_2(tmp_path, args, said):
    (tmp_path / "prog.py").write_text("print(1)\n")
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "check", *args], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2
    assert said in done.stderr
    assert "Traceback" not in done.stderr


def test_a_json_folder_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "logs").write_text("not a folder")
    status, _out, report = check(tmp_path, "print(1)\n", "--json", "logs")
    assert status == 2
    assert report.strip() == "rngtrace: error: --json 'logs' is a file; give a folder to keep the runs' logs in"


def test_the_readmes_check_example_is_what_check_prints():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    block = readme.split("$ cd examples && rngtrace check shuffle.py\n", 1)[1].split("```", 1)[0]
    shown = block.split("\n", 1)[1]  # after the program's own output, which differs run to run
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "check", "shuffle.py"],
        cwd=ROOT / "examples",
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    assert done.stderr == shown
