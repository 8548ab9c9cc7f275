"""rng_trace(log_dir=...) saves one log per rank; ``rngtrace ranks DIR`` says where the ranks stop drawing alike."""

from __future__ import annotations

import importlib
import json
import os
import random
import re
import socket
import subprocess
import sys
import textwrap

import pytest

from rngtrace import Trace, rng_trace
from rngtrace.ranks import findings, load_logs, main
from rngtrace.render.text import render

HERE = os.path.basename(__file__)


@pytest.fixture(autouse=True)
def no_rank(monkeypatch):
    """Start every test in a process with no rank of its own."""
    for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)


def ranks(folder, capsys) -> tuple[int, str, str]:
    """(exit status, stdout, stderr) of ``rngtrace ranks folder``."""
    capsys.readouterr()
    status = main([str(folder)])
    out, err = capsys.readouterr()
    return status, out, err


def work(extra: bool = False, seed: int = 3) -> None:
    """What each rank runs: a draw, a seed, a draw and, on a straying rank, one more."""
    random.random()
    random.seed(seed)
    random.random()
    if extra:
        random.random()  # the extra draw


EXTRA_LINE = work.__code__.co_firstlineno + 6


def as_rank(monkeypatch, rank: int, folder, **work_args) -> None:
    """Trace ``work`` as rank ``rank`` would, naming the log by the RANK variable."""
    monkeypatch.setenv("RANK", str(rank))
    with rng_trace(log_dir=folder, print=False):
        work(**work_args)


# -- writing the logs -------------------------------------------------------------------


def test_rank_variable_names_the_log(tmp_path, monkeypatch):
    as_rank(monkeypatch, 3, tmp_path)
    assert os.listdir(tmp_path) == ["rank-3.json"]
    trace = Trace.load(tmp_path / "rank-3.json")
    assert [(e.kind, e.api) for e in trace.events] == [
        ("draw", "random.random"),
        ("seed", "random.seed"),
        ("draw", "random.random"),
    ]


def test_a_process_with_no_rank_is_named_by_pid(tmp_path):
    with rng_trace(log_dir=tmp_path, print=False):
        random.random()
    assert os.listdir(tmp_path) == [f"pid-{os.getpid()}.json"]


def test_the_folder_is_made_when_missing(tmp_path):
    folder = tmp_path / "a" / "b"
    with rng_trace(log_dir=folder, print=False):
        pass
    assert os.listdir(folder) == [f"pid-{os.getpid()}.json"]  # an empty block too: blocks stay aligned


def test_later_blocks_are_numbered_and_an_earlier_runs_leftovers_removed(tmp_path, monkeypatch):
    (tmp_path / "rank-0.3.json").write_text("left by an earlier run with three blocks")
    (tmp_path / "rank-1.3.json").write_text("another rank's: not this process's to remove")
    monkeypatch.setenv("RANK", "0")
    tracer = rng_trace(log_dir=tmp_path, print=False)

    @tracer
    def step():
        random.random()

    step()
    step()
    assert sorted(os.listdir(tmp_path)) == ["rank-0.2.json", "rank-0.json", "rank-1.3.json"]
    assert len(Trace.load(tmp_path / "rank-0.2.json")) == 1


def test_log_dir_is_made_absolute_when_the_tracer_is_made(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    tracer = rng_trace(log_dir="logs", print=False)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    with tracer:
        random.random()
    assert tracer.log_dir == str(tmp_path / "logs")
    assert os.listdir(tmp_path / "logs") == [f"pid-{os.getpid()}.json"]
    assert os.listdir(tmp_path / "elsewhere") == []


@pytest.mark.parametrize(
    "value, error, says",
    [
        (b"logs", TypeError, "not bytes"),
        (3, TypeError, "folder path"),
        ("", ValueError, "empty"),
    ],
)
def test_log_dir_that_is_no_folder_path_is_refused(value, error, says):
    with pytest.raises(error, match=says):
        rng_trace(log_dir=value)


def test_log_dir_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(ValueError, match="is a file; give a folder"):
        rng_trace(log_dir=tmp_path / "f")


def test_a_log_that_cannot_be_written_is_one_line_on_stderr(tmp_path, capsys):
    tracer = rng_trace(log_dir=tmp_path / "logs", print=False)
    with tracer:
        random.random()
        (tmp_path / "logs").write_text("now a file, where the folder should be")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot save the draw log in" in err
    assert len(tracer.last_trace) == 1  # the trace itself is there as ever


def test_a_failed_write_leaves_neither_a_log_nor_a_temporary_file(tmp_path, monkeypatch, capsys):
    def half_written(self, path):
        with open(path, "w") as out:
            out.write("{")
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Trace, "save", half_written)
    with rng_trace(log_dir=tmp_path, print=False):
        random.random()
    assert os.listdir(tmp_path) == []
    assert "No space left on device" in capsys.readouterr().err


def test_an_exception_in_the_block_still_saves_its_log(tmp_path):
    with pytest.raises(KeyError):
        with rng_trace(log_dir=tmp_path, print=False):
            random.random()
            raise KeyError("the user's error")
    assert len(Trace.load(tmp_path / f"pid-{os.getpid()}.json")) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_is_named_by_its_pid_not_its_parents_rank(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "0")
    pid = os.fork()
    if pid == 0:  # the child: a worker of rank 0, which inherits RANK
        try:
            with rng_trace(log_dir=tmp_path, print=False):
                random.random()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.listdir(tmp_path) == [f"pid-{pid}.json"]


# -- rngtrace ranks ------------------------------------------------------------------


def test_ranks_that_drew_alike_exit_0_with_one_line(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    as_rank(monkeypatch, 1, tmp_path, seed=4)  # seeding by rank is right: a seed's value is not compared
    status, out, err = ranks(tmp_path, capsys)
    assert status == 0 and err == ""
    assert out == "rngtrace ranks: all 2 ranks drew alike — random: 1 seed, 2 draws\n"
    assert findings(load_logs(tmp_path)[0]) == []


def test_an_extra_draw_on_one_rank_exits_1_naming_its_line_and_both_stacks(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    as_rank(monkeypatch, 1, tmp_path, extra=True)
    status, out, err = ranks(tmp_path, capsys)
    assert status == 1 and err == ""
    lines = out.splitlines()
    assert lines[0] == "rngtrace ranks: the 2 ranks stop drawing alike in 1 stream"
    assert "random: the ranks part at their 4th random draw or seed (3 alike before it" in out
    assert "\n  rank 0      made no more: 3 random events in all\n" in out
    assert "\n  rank 1  #3  draw random.random ×1\n" in out
    assert f"{HERE}:{EXTRA_LINE} in work" in out
    assert "fix: make every rank draw alike from random" in out


def test_a_draw_at_another_line_is_a_divergence(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    monkeypatch.setenv("RANK", "1")
    with rng_trace(log_dir=tmp_path, print=False):
        random.random()
        random.seed(3)
        random.random()  # the same api, count and stream, from another line
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 1
    assert "part at their 1st random draw or seed (0 alike before it)" in out


def test_a_draw_of_another_api_at_the_same_line_is_a_divergence(tmp_path, monkeypatch, capsys):
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        with rng_trace(log_dir=tmp_path, print=False):
            random.random() if rank == 0 else random.uniform(0, 1)
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 1
    assert "rank 0  #0  draw random.random" in out and "rank 1  #0  draw random.uniform" in out


def test_ranks_started_from_different_folders_still_match(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    as_rank(monkeypatch, 1, tmp_path)
    log = tmp_path / "rank-1.json"
    data = json.loads(log.read_text())
    data["stacks"] = [
        [["/elsewhere/checkout/" + os.path.basename(f), line, fn] for f, line, fn in stack] for stack in data["stacks"]
    ]
    log.write_text(json.dumps(data))
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 0, out


def test_three_ranks_name_the_ranks_on_each_side(tmp_path, monkeypatch, capsys):
    for rank in range(3):
        as_rank(monkeypatch, rank, tmp_path, extra=rank == 1)
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 1
    assert (
        "\n  ranks 0 and 2      made no more: 3 random events in all\n  rank 1         #3  draw random.random ×1\n"
        in out
    )
    [finding] = findings(load_logs(tmp_path)[0])
    assert finding.kind == "divergent" and finding.stream == "random"
    assert finding.pids == (os.getpid(),) * 3 and finding.events == (-1, -1, 3)
    assert "rank 1 drew random.random ×1 at" in finding.message and f"{HERE}:{EXTRA_LINE}" in finding.message
    assert "ranks 0 and 2 made no more" in finding.message
    assert "random.Random(seed)" in finding.fix


def test_a_block_only_one_rank_ran_is_compared_as_empty(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    as_rank(monkeypatch, 1, tmp_path)
    as_rank(monkeypatch, 1, tmp_path)  # rank 1's second block: rank-1.2.json
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 1
    assert "random: the ranks part at their 1st random draw or seed in block 2" in out
    assert "rank 0      made no more: 0 random events in all" in out
    [finding] = findings(load_logs(tmp_path)[0])
    assert finding.pids == (os.getpid(), os.getpid()) and finding.events == (-1, 0)


def test_events_past_max_events_are_not_called_a_divergence(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "0")
    with rng_trace(log_dir=tmp_path, print=False, max_events=2):
        work()
    as_rank(monkeypatch, 1, tmp_path)
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 0
    assert "(rank-0.json kept its first 2 events of 3 (max_events): the rest were not compared)" in out


DEEP_LIBRARY = """\
import random


def layer(n):
    if n == 0:
        return random.random()
    return layer(n - 1)
"""


def test_a_deep_library_stack_is_shown_down_to_the_users_line(tmp_path, monkeypatch, capsys):
    # A framework's stack is deeper than the frames shown: the user's line under it is never cut off.
    site = tmp_path / "site-packages"
    site.mkdir()
    (site / "deeplib.py").write_text(DEEP_LIBRARY)
    monkeypatch.syspath_prepend(str(site))
    deeplib = importlib.import_module("deeplib")
    monkeypatch.setitem(sys.modules, "deeplib", deeplib)
    logs = tmp_path / "logs"
    for rank in (0, 1):
        monkeypatch.setenv("RANK", str(rank))
        with rng_trace(log_dir=logs, print=False):
            random.seed(0)
            random.uniform(0, 1)
            deep = sys._getframe().f_lineno + 1
            deeplib.layer(10) if rank == 0 else random.random()
    status, out, _ = ranks(logs, capsys)
    assert status == 1
    rank_0 = out.split("\n  rank 0  ", 1)[1].split("\n  rank 1  ", 1)[0].splitlines()
    assert rank_0[0] == "#2  draw random.random ×1"
    shown = [line.strip() for line in rank_0]
    mine = next(i for i, line in enumerate(shown) if line.endswith(f"{HERE}:{deep} in {deep_test.__name__}"))
    frames = [line.rsplit("/", 1)[-1] for line in shown[1:mine]]
    assert frames == ["deeplib.py:6 in layer"] + ["deeplib.py:7 in layer"] * 10
    assert not [line for line in shown[:mine] if "more frame" in line]
    # The draw is numbered #2, as rank 0's own log numbers it.
    log = render(Trace.load(logs / "rank-0.json"))
    assert re.search(r"^\s+2\s+random\s+draw\s+random\.random ×1\s+\S*deeplib\.py:6 in layer", log, re.M)


deep_test = test_a_deep_library_stack_is_shown_down_to_the_users_line  # the name its stack shows


def test_alike_blocks_are_counted(tmp_path, monkeypatch, capsys):
    for rank in (0, 1):
        as_rank(monkeypatch, rank, tmp_path)
        as_rank(monkeypatch, rank, tmp_path)
    status, out, _ = ranks(tmp_path, capsys)
    assert (status, out) == (0, "rngtrace ranks: all 2 ranks drew alike in 2 blocks — random: 2 seeds, 4 draws\n")


def test_logs_named_by_pid_are_compared_when_no_rank_is_named(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    as_rank(monkeypatch, 1, tmp_path)
    for name in ("rank-0.json", "rank-1.json"):
        os.replace(tmp_path / name, tmp_path / name.replace("rank-", "pid-10"))
    status, out, _ = ranks(tmp_path, capsys)
    assert (status, out) == (0, "rngtrace ranks: all 2 processes drew alike — random: 1 seed, 2 draws\n")


def test_pid_logs_beside_rank_logs_are_left_out_and_said(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    as_rank(monkeypatch, 1, tmp_path)
    monkeypatch.delenv("RANK")
    with rng_trace(log_dir=tmp_path, print=False):
        random.random()  # a worker with no rank: not compared
    status, out, _ = ranks(tmp_path, capsys)
    assert status == 0
    assert out.splitlines()[-1] == "(1 log named by pid left out: processes with no rank)"


@pytest.mark.parametrize(
    "make, says",
    [
        (lambda d: d / "missing", "does not exist; give the log_dir the ranks saved their logs in"),
        (lambda d: d, "holds no rank-N.json or pid-N.json logs"),
        (lambda d: d / "a-file" if (d / "a-file").write_text("") == 0 else None, "is not a folder"),
    ],
)
def test_nothing_to_compare_exits_2_with_one_line(tmp_path, capsys, make, says):
    status, out, err = ranks(make(tmp_path), capsys)
    assert (status, out) == (2, "")
    assert err.startswith("rngtrace: error: ") and says in err and err.count("\n") == 1


def test_one_ranks_log_alone_exits_2(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    status, out, err = ranks(tmp_path, capsys)
    assert (status, out) == (2, "")
    assert "holds only rank-0.json" in err and err.count("\n") == 1


def test_a_bad_log_exits_2_naming_it(tmp_path, monkeypatch, capsys):
    as_rank(monkeypatch, 0, tmp_path)
    (tmp_path / "rank-1.json").write_text('{"format": "rngtrace", "version": 1, "pid": ')
    status, out, err = ranks(tmp_path, capsys)
    assert (status, out) == (2, "")
    assert err.startswith("rngtrace: error: ") and "rank-1.json" in err and err.count("\n") == 1


def test_a_mistaken_command_line_exits_2(capsys):
    assert main([]) == 2
    assert "the following arguments are required: DIR" in capsys.readouterr().err


# -- a real distributed job ----------------------------------------------------------------

RANK_SCRIPT = textwrap.dedent("""
    import os, sys
    import torch
    import torch.distributed as dist
    from rngtrace import rng_trace

    rank, folder = int(sys.argv[1]), sys.argv[2]
    dist.init_process_group("gloo", rank=rank, world_size=2)  # no RANK variable: the group names the rank

    def step(extra):
        torch.rand(3)
        torch.randn(2)
        if extra:
            torch.rand(1)  # EXTRA
        dist.all_reduce(torch.ones(1))

    with rng_trace(log_dir=os.path.join(folder, "alike"), print=False):
        torch.manual_seed(rank)
        step(False)
    with rng_trace(log_dir=os.path.join(folder, "extra"), print=False):
        step(rank == 1)
    with rng_trace(log_dir=os.path.join(folder, "destroyed"), print=False):
        torch.rand(1)
        dist.destroy_process_group()  # the block ends with no group: it keeps its rank's name
""")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def gloo_job(tmp_path_factory):
    """Run a 2-rank gloo job on CPU once; return its folder of log folders."""
    torch = pytest.importorskip("torch")
    if not torch.distributed.is_available():
        pytest.skip("this torch has no torch.distributed")
    folder = tmp_path_factory.mktemp("gloo")
    script = folder / "train.py"
    script.write_text(RANK_SCRIPT)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "LOCAL_RANK", "WORLD_SIZE")}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()))
    jobs = [
        subprocess.Popen(
            [sys.executable, str(script), str(rank), str(folder)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for rank in (0, 1)
    ]
    try:
        outputs = [job.communicate(timeout=120)[0] for job in jobs]
    finally:
        for job in jobs:
            job.kill()
    assert [job.returncode for job in jobs] == [0, 0], outputs
    return folder


def test_a_gloo_job_in_lockstep_draws_alike(gloo_job, capsys):
    assert sorted(os.listdir(gloo_job / "alike")) == ["rank-0.json", "rank-1.json"]
    status, out, _ = ranks(gloo_job / "alike", capsys)
    assert (status, out) == (0, "rngtrace ranks: all 2 ranks drew alike — torch: 1 seed, 2 draws\n")


def test_a_gloo_job_with_an_extra_draw_on_rank_1_names_its_line(gloo_job, capsys):
    status, out, _ = ranks(gloo_job / "extra", capsys)
    extra_line = RANK_SCRIPT.splitlines().index("        torch.rand(1)  # EXTRA") + 1
    assert status == 1
    assert "torch: the ranks part at their 3rd torch draw or seed" in out
    assert "rank 0      made no more: 2 torch events in all" in out
    assert "rank 1  #2  draw torch.rand" in out and f"train.py:{extra_line} in step" in out
    [finding] = findings(load_logs(gloo_job / "extra")[0])
    assert finding.kind == "divergent" and f"train.py:{extra_line}" in finding.message


def test_a_block_ending_after_destroy_process_group_keeps_its_rank(gloo_job):
    assert sorted(os.listdir(gloo_job / "destroyed")) == ["rank-0.json", "rank-1.json"]


def _run_rank(folder, script, rank: int, extra: bool) -> subprocess.CompletedProcess:
    env = dict(os.environ, RANK=str(rank), EXTRA="1" if extra else "")
    return subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--quiet", "--log-dir", str(folder), str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_rngtrace_run_log_dir_and_rngtrace_ranks_from_the_command_line(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(
        textwrap.dedent("""\
        import os, random
        random.seed(1)
        random.random()
        if os.environ.get("EXTRA"):
            random.random()
        random.random()
    """)
    )
    alike, apart = tmp_path / "alike", tmp_path / "apart"
    for rank in (0, 1):
        assert _run_rank(alike, script, rank, extra=False).returncode == 0
        assert _run_rank(apart, script, rank, extra=rank == 1).returncode == 0
    assert sorted(os.listdir(alike)) == ["rank-0.json", "rank-1.json"]
    ok = subprocess.run([sys.executable, "-m", "rngtrace", "ranks", str(alike)], capture_output=True, text=True)
    bad = subprocess.run([sys.executable, "-m", "rngtrace", "ranks", str(apart)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "train.py:5" in bad.stdout


def test_rngtrace_run_refuses_a_log_dir_that_is_a_file_in_one_line(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("pass\n")
    result = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--log-dir", str(script), str(script)], capture_output=True, text=True
    )
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
