"""The command line, run for real: `python -m rngtrace run | show | diff`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from rngtrace import cli, rng_trace
from rngtrace.trace import Trace

SRC = Path(__file__).resolve().parents[1] / "src"

DRAWS = """\
import random
import sys

print("argv", sys.argv[1:])
random.seed(1)
random.random()
if sys.argv[1:2] == ["exit"]:
    sys.exit(int(sys.argv[2]))
if sys.argv[1:2] == ["fail"]:
    {}["missing"]
"""


def rngtrace(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    """Run ``python -m rngtrace ARGS`` in ``cwd``; stdout and stderr as text."""
    env = {**os.environ, "PYTHONIOENCODING": "utf-8"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SRC), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "rngtrace", *map(str, args)],
        cwd=cwd,
        env=env,
        check=False,
        capture_output=True,
        text=True,
        encoding="utf-8",
        timeout=120,
    )


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def draws(tmp_path: Path) -> Path:
    return write(tmp_path / "draws.py", DRAWS)


# -- rngtrace run --------------------------------------------------------------------


def test_run_leaves_the_programs_stdout_alone_and_prints_the_log_to_stderr(draws):
    done = rngtrace("run", "draws.py", cwd=draws.parent)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "argv []\n"
    assert done.stderr.startswith("rngtrace: 2 events — random: 1 seed, 1 draw\n")
    assert "random.random ×1  draws.py:6 in <module>" in done.stderr
    assert "\x1b[" not in done.stderr  # not a terminal: no colour


def test_run_gives_the_program_its_arguments_name_and_sys_path_as_python_would(tmp_path):
    write(tmp_path / "app" / "helper.py", "VALUE = 'found next to the script'\n")
    write(
        tmp_path / "app" / "main.py",
        """\
        import sys
        import helper
        print(__name__, sys.argv[1:], helper.VALUE)
    """,
    )
    done = rngtrace("run", "--quiet", "app/main.py", "--depth", "-x", "one", cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "__main__ ['--depth', '-x', 'one'] found next to the script\n"


def test_run_keeps_the_exit_status_of_sys_exit_and_still_prints_the_log(draws):
    done = rngtrace("run", "draws.py", "exit", "3", cwd=draws.parent)
    assert done.returncode == 3
    assert done.stderr.startswith("rngtrace: 2 events")


def test_an_uncaught_exception_prints_its_traceback_exits_1_and_still_prints_the_log(draws):
    done = rngtrace("run", "draws.py", "fail", cwd=draws.parent)
    assert done.returncode == 1
    traceback, log = done.stderr.split("rngtrace: 2 events")
    assert traceback.startswith("Traceback (most recent call last):\n")
    assert 'draws.py", line 10, in <module>' in traceback and traceback.endswith("KeyError: 'missing'\n")
    assert "runpy" not in traceback and "cli.py" not in traceback  # the runner's frames are left out
    assert "random.random" in log


def test_run_m_runs_a_module_as_main_with_its_arguments(tmp_path):
    write(tmp_path / "pkg" / "__init__.py", "")
    write(
        tmp_path / "pkg" / "tool.py",
        """\
        import random
        import sys
        print(__name__, sys.argv[1:])
        random.getrandbits(8)
    """,
    )
    done = rngtrace("run", "-m", "pkg.tool", "--quiet", "x", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "__main__ ['--quiet', 'x']\n"  # options after -m are the module's
    assert "random.getrandbits ×1  pkg/tool.py:4 in <module>" in done.stderr


LEAVES_ITS_DIRECTORY = """\
import os
import random
import tempfile

random.random()
gone = tempfile.mkdtemp()
os.chdir(gone)
os.rmdir(gone)  # as leaving a TemporaryDirectory one chdir'ed into does
random.random()
exec("random.random()")  # code named "<string>", a relative name
print("done")
"""


def test_run_survives_a_program_that_deletes_its_working_directory_and_saves_where_asked(tmp_path):
    write(tmp_path / "prog.py", LEAVES_ITS_DIRECTORY)
    done = rngtrace("run", "--json", "log.json", "--html", "log.html", "prog.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
    assert done.stderr.startswith("rngtrace: 3 events — random: 3 draws — 1 cause found\n")
    assert done.stderr.endswith("rngtrace: log saved to log.json\nrngtrace: HTML report saved to log.html\n")
    saved = json.loads((tmp_path / "log.json").read_text(encoding="utf-8"))
    assert len(saved["events"]) == 3 and (tmp_path / "log.html").exists()


def test_run_started_in_a_deleted_directory_asks_for_an_absolute_output_path(tmp_path):
    program = write(tmp_path / "prog.py", "import random\nrandom.random()\n")
    gone = tmp_path / "gone"
    gone.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")]))}
    shell = 'cd "$1" && rmdir "$1" && exec "$0" -m rngtrace run --json log.json "$2"'
    done = subprocess.run(
        ["sh", "-c", shell, sys.executable, str(gone), str(program)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "rngtrace: error: the working directory no longer exists; give an absolute path for 'log.json'\n"
    )


def test_json_saves_the_log_and_show_prints_it(draws):
    done = rngtrace("run", "--json", "run.json", "draws.py", cwd=draws.parent)
    assert done.stderr.endswith("rngtrace: log saved to run.json\n")
    assert json.loads((draws.parent / "run.json").read_text(encoding="utf-8"))["format"] == "rngtrace"
    shown = rngtrace("show", "run.json", cwd=draws.parent)
    assert (shown.returncode, shown.stderr) == (0, "")
    assert shown.stdout == done.stderr.split("rngtrace: log saved")[0]


def test_html_saves_the_html_report_from_run_and_from_show(draws):
    done = rngtrace("run", "--quiet", "--html", "run.html", "--json", "run.json", "draws.py", cwd=draws.parent)
    assert (done.returncode, done.stderr) == (0, "")
    assert "random.random" in (draws.parent / "run.html").read_text(encoding="utf-8")
    shown = rngtrace("show", "run.json", "--html", "again.html", cwd=draws.parent)
    assert shown.returncode == 0 and "random.random" in (draws.parent / "again.html").read_text(encoding="utf-8")


def test_quiet_prints_no_log(draws):
    done = rngtrace("run", "--quiet", "draws.py", cwd=draws.parent)
    assert (done.returncode, done.stdout, done.stderr) == (0, "argv []\n", "")


def test_run_imports_no_wrapt_for_the_program_it_traces(tmp_path):
    # A block needs none: wrapt (and asyncio, which it imports) would lengthen every traced start.
    write(
        tmp_path / "modules.py",
        "import random, sys\nrandom.random()\nprint(sorted({'wrapt', 'asyncio'} & set(sys.modules)))\n",
    )
    done = rngtrace("run", "--quiet", "modules.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "[]\n"), done.stderr


def test_streams_limits_what_is_traced(draws):
    done = rngtrace("run", "--streams", "numpy,torch", "draws.py", cwd=draws.parent)
    assert done.stderr == "rngtrace: no draws or reseeds of global random streams (watched: numpy, torch)\n"


def test_on_draw_raise_stops_the_first_draw_with_global_rng_error_and_exits_1(draws):
    done = rngtrace("run", "--on-draw", "raise", "draws.py", cwd=draws.parent)
    assert done.returncode == 1
    traceback = done.stderr.split("rngtrace: 1 event")[0].splitlines()
    assert traceback[-1] == (
        f"rngtrace._errors.GlobalRNGError: random.random draws from the global random stream at {draws}:6 "
        "in <module>; use an explicit generator (random.Random(seed))"
    )
    # The draw site is the only frame shown: not the runner's, not rngtrace's wrapper.
    assert [line for line in traceback if line.startswith("  File")] == [f'  File "{draws}", line 6, in <module>']


# -- rngtrace diff: the README story -------------------------------------------------

STORY_A = """\
import numpy as np

np.random.seed(666)
pass  # this run initialises no device
x = np.random.rand(1)
print(f"x = {x[0]:.6f}")
"""
STORY_B = STORY_A.replace("pass  # this run initialises no device", "devinit.init()").replace(
    "\n\n", "\nfrom acc import devinit\n", 1
)
DEVINIT = """\
import numpy as np

_ready = False


def init():
    global _ready
    if not _ready:
        jitter = np.random.uniform(0, 1e-3)
        _ready = jitter >= 0
    return _ready
"""


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of the story saved as a.json and b.json: A without the device init, B with it."""
    pytest.importorskip("numpy")
    tmp_path = tmp_path_factory.mktemp("story")
    write(tmp_path / "a" / "story.py", STORY_A)
    write(tmp_path / "b" / "story.py", STORY_B)
    write(tmp_path / "b" / "acc" / "__init__.py", "")
    write(tmp_path / "b" / "acc" / "devinit.py", DEVINIT)
    for run, x in (("a", "0.700437"), ("b", "0.844187")):
        done = rngtrace("run", "--quiet", "--json", f"../{run}.json", "story.py", cwd=tmp_path / run)
        assert (done.returncode, done.stdout) == (0, f"x = {x}\n"), done.stderr
    return tmp_path


def test_diff_of_the_story_names_the_extra_draw_and_exits_1(story):
    done = rngtrace("diff", "a.json", "b.json", cwd=story)
    assert done.returncode == 1, done.stderr
    assert done.stdout.splitlines()[:3] == [
        "rngtrace diff: A = a.json (2 events) and B = b.json (3 events) differ in 1 place",
        "",
        (
            "First divergence: B has 1 extra numpy draw at b/acc/devinit.py:9 in init, "
            "before the draw both runs make at b/story.py:5 in <module>"
        ),
    ]
    assert "numpy.random.uniform  b/acc/devinit.py:9 in init" in done.stdout  # the call-site table


def test_diff_of_two_runs_that_drew_the_same_exits_0(story):
    done = rngtrace("diff", "a.json", "a.json", cwd=story)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("rngtrace diff: A = a.json and B = a.json drew the same")


# -- mistakes: one line, exit status 2 ----------------------------------------------


def _bad_logs(folder: Path) -> None:
    write(folder / "text.json", "hello\n")
    write(folder / "other.json", '{"a": 1}\n')
    write(folder / "cut.json", '{\n  "format": "rngtrace",\n  "version": 1,\n  "pid": 1')
    write(folder / "newer.json", '{"format": "rngtrace", "version": 99}\n')
    write(folder / "x.py", "")


MISTAKES = {
    "no command": ((), "no command; choose from run, check, show, diff"),
    "missing script": (("run", "nope.py"), "no such file: 'nope.py'; check the path"),
    "missing module": (("run", "-m", "nope.mod"), "no module named 'nope.mod'; check the name"),
    "nothing to run": (("run", "--quiet"), "nothing to run; give a script or -m module"),
    "unknown stream": (("run", "--streams", "nump", "x.py"), "unknown stream 'nump'; choose from random, numpy, torch"),
    "bad depth": (("run", "--depth", "0", "x.py"), "argument --depth: expected a whole number >= 1, got '0'"),
    "no folder for json": (("run", "--json", "no/such/dir/x.json", "x.py"), "no such directory: "),
    "missing log": (("show", "x.json"), "no such file: 'x.json'; check the path"),
    "not JSON": (("show", "text.json"), "'text.json' is not JSON (Expecting value at line 1 column 1)"),
    "not a log": (("diff", "other.json", "other.json"), "'other.json' is not an rngtrace log"),
    "truncated": (("show", "cut.json"), "'cut.json' is a truncated or damaged rngtrace log"),
    "newer": (("show", "newer.json"), "'newer.json' was written by a newer rngtrace (log format version 99"),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_a_mistake_is_one_line_on_stderr_and_exit_status_2(tmp_path, case):
    _bad_logs(tmp_path)
    args, said = MISTAKES[case]
    done = rngtrace(*args, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.startswith("rngtrace: error: ") and said in done.stderr
    assert done.stderr.count("\n") == 1


def test_the_rngtrace_command_is_the_same_program():
    command = Path(sys.executable).with_name("rngtrace")
    if not command.exists():
        pytest.skip("the rngtrace console script is not installed next to this python")
    done = subprocess.run([str(command), "--version"], check=False, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "rngtrace 0.1.0\n")


# -- logs that are not files, or too big: one line, exit 2, nothing read --------------


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="no /dev/zero here")
def test_show_refuses_a_device_in_one_line_without_reading_it(tmp_path):
    done = rngtrace("show", "/dev/zero", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        "rngtrace: error: '/dev/zero' is a character device, not a regular file; "
        "pass a file written by `rngtrace run --json` or Trace.save()\n"
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_show_and_diff_refuse_a_fifo_at_once_rather_than_wait_for_a_writer(tmp_path):
    os.mkfifo(tmp_path / "pipe")
    for args in (("show", "pipe"), ("diff", "pipe", "pipe")):
        done = rngtrace(*args, cwd=tmp_path)  # before: blocked in open() until the 120 s timeout
        assert (done.returncode, done.stdout) == (2, "")
        assert done.stderr.startswith("rngtrace: error: 'pipe' is a named pipe, not a regular file; ")


def test_max_log_size_reads_a_log_the_default_limit_refuses(draws):
    rngtrace("run", "--quiet", "--json", "run.json", "draws.py", cwd=draws.parent)
    refused = rngtrace("show", "run.json", "--max-log-size", "200", cwd=draws.parent)
    assert refused.returncode == 2
    assert refused.stderr.startswith("rngtrace: error: 'run.json' is ")
    assert (
        "more than the 200 bytes a log may have; to read it, raise the limit: rngtrace show/diff "
        "--max-log-size 1M" in refused.stderr
    )
    assert rngtrace("show", "run.json", "--max-log-size", "1M", cwd=draws.parent).returncode == 0


# -- rngtrace run: forked children, and the program's exit status ---------------------

FORKS = """\
import os
import random
import sys
import time

random.random()
if os.fork() == 0:
    for _ in range(3):
        random.random()
    time.sleep(0.5)  # the parent reports first: a child reporting after it would overwrite its files
    sys.exit(0)
random.random()
print("parent done")
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no os.fork here")
def test_a_forked_child_that_exits_with_sys_exit_prints_no_log_and_writes_no_file(tmp_path):
    write(tmp_path / "forks.py", FORKS)
    done = rngtrace("run", "--json", "log.json", "--html", "log.html", "forks.py", cwd=tmp_path)
    assert (done.returncode, done.stdout) == (0, "parent done\n"), done.stderr
    assert done.stderr.count("rngtrace: ") == 3, done.stderr  # one log and two "saved to" lines: the parent's
    # The parent's log holds the child's draws too (merged, with the child's pid); the child printed nothing.
    assert done.stderr.startswith("rngtrace: 5 events in 2 processes"), done.stderr
    saved = json.loads((tmp_path / "log.json").read_text(encoding="utf-8"))
    child_threads = {int(k) for k in saved["pids"]}
    assert sum(row[5] not in child_threads for row in saved["events"]) == 2  # the parent's own
    assert [p[4] for p in saved["processes"]] == [None]  # the child outlived the trace: still running


@pytest.mark.skipif(sys.platform in ("win32", "darwin"), reason="file names must be bytes, not UTF-8, here")
def test_a_script_whose_name_is_not_utf8_keeps_its_status_and_its_log_reads_back(tmp_path):
    name = b"caf\xe9.py"
    (tmp_path / os.fsdecode(name)).write_text("import random\nrandom.random()\n", encoding="utf-8")
    env = {
        **os.environ,
        "PYTHONIOENCODING": "utf-8",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(SRC), os.environ.get("PYTHONPATH")])),
    }
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--json", "log.json", "--html", "log.html", name],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        timeout=120,
        check=False,
    )
    stderr = done.stderr.decode("utf-8", "backslashreplace")
    assert done.returncode == 0, stderr  # was 1, after a UnicodeEncodeError traceback
    assert stderr.endswith("rngtrace: log saved to log.json\nrngtrace: HTML report saved to log.html\n")
    shown = rngtrace("show", "log.json", cwd=tmp_path)
    assert shown.returncode == 0 and "caf\\xe9.py:2 in <module>" in shown.stdout, shown.stderr


def test_a_program_that_closes_its_stdout_exits_0_as_it_does_alone(tmp_path):
    write(tmp_path / "closes.py", "import random\nimport sys\nrandom.random()\nsys.stdout.close()\n")
    alone = subprocess.run([sys.executable, "closes.py"], cwd=tmp_path, capture_output=True, timeout=60, check=False)
    done = rngtrace("run", "closes.py", cwd=tmp_path)
    assert alone.returncode == done.returncode == 0, done.stderr  # was 1 under rngtrace run
    assert done.stderr.startswith("rngtrace: 1 event — random: 1 draw — 1 cause found\n")


def test_a_program_that_closes_its_stderr_keeps_its_exit_status(tmp_path):
    write(tmp_path / "closes.py", "import random\nimport sys\nrandom.random()\nsys.stderr.close()\nsys.exit(3)\n")
    done = rngtrace("run", "closes.py", cwd=tmp_path)
    assert done.returncode == 3  # was 1: writing the log raised ValueError


def test_a_log_that_cannot_be_saved_is_one_line_and_the_programs_status_stays_its_own(tmp_path):
    write(tmp_path / "out" / ".keep", "")
    write(tmp_path / "prog.py", "import random, shutil\nrandom.random()\nshutil.rmtree('out')\n")
    done = rngtrace("run", "--quiet", "--json", "out/log.json", "prog.py", cwd=tmp_path)
    assert done.returncode == 0  # was 2
    assert done.stderr == "rngtrace: error: cannot write 'out/log.json' (No such file or directory); check the path\n"


def test_a_program_that_closes_its_stderr_and_is_interrupted_keeps_status_130(tmp_path):
    write(tmp_path / "closes.py", "import sys\nsys.stderr.close()\nraise KeyboardInterrupt\n")
    done = rngtrace("run", "closes.py", cwd=tmp_path)
    assert done.returncode == 130  # was 1: printing the program's traceback raised ValueError


def test_run_reports_a_stream_drawn_before_any_seed_as_unseeded(tmp_path):
    pytest.importorskip("numpy")
    script = tmp_path / "prog.py"
    script.write_text("import numpy as np\nnp.random.rand()\n")
    assert cli.main(["run", "--quiet", "--json", str(tmp_path / "log.json"), str(script)]) == 0
    (finding,) = Trace.load(tmp_path / "log.json").findings
    assert finding.kind == "unseeded" and "prog.py:2" in finding.message


def test_a_block_cannot_say_a_stream_is_unseeded():
    np = pytest.importorskip("numpy")
    with rng_trace(print=False) as trace:
        np.random.rand()
    assert not trace.from_start and not [f for f in trace.findings if f.kind == "unseeded"]


def test_diff_of_two_unseeded_runs_says_the_states_differ_and_exits_1(tmp_path):
    pytest.importorskip("numpy")
    write(tmp_path / "unseeded.py", "import numpy as np\nprint(np.random.rand())\n")
    write(tmp_path / "seeded.py", "import numpy as np\nnp.random.seed(0)\nprint(np.random.rand())\n")
    for name in ("unseeded", "seeded"):
        for run in ("a", "b"):
            done = rngtrace("run", "--quiet", "--json", f"{name}-{run}.json", f"{name}.py", cwd=tmp_path)
            assert done.returncode == 0, done.stderr
    done = rngtrace("diff", "unseeded-a.json", "unseeded-b.json", cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "numpy started from a different state in A and B (never seeded in either run)" in done.stdout
    done = rngtrace("diff", "seeded-a.json", "seeded-b.json", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_plain_block_reads_no_full_state_and_a_compared_one_does(tmp_path):
    np = pytest.importorskip("numpy")
    with rng_trace(print=False) as plain:
        np.random.seed(1)
        np.random.rand()
    assert plain.origins == []  # nothing to compare it with: no full-state read, at its start or its seed
    with rng_trace(print=False, log_dir=tmp_path) as compared:
        np.random.seed(1)
        np.random.rand()
    whys = [origin[3] for origin in compared.origins if origin[1] == "numpy"]
    assert whys == ["start", "seed"]
