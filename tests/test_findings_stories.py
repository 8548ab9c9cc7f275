"""Issue 24's stories, each a real program in examples/ under ``rngtrace run``, with the log a user sees.

Where rngtrace was silent (a library reseeding at import, a reseed in another of the user's
files, children and pool workers drawing unseeded, workers sharing a seed line) the log now
names the cause; where a seeded program is reproducible as it stands, its first line says that
no cause was found. Pids change run to run and are written ``pid N`` here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples")


def run(*argv: str, cwd: str = EXAMPLES, env: dict | None = None, json_path: str | None = None) -> str:
    """The log ``rngtrace run`` writes for ``argv``, pids written ``pid N``."""
    extra = ["--json", json_path] if json_path else []
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", *extra, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        env=environ(env),
    )
    assert done.returncode == 0, done.stderr
    return re.sub(r"pid \d+", "pid N", done.stderr)


def environ(extra: dict | None) -> dict:
    """os.environ with ``extra``; a PYTHONPATH given goes before the one there."""
    env = {**os.environ, **(extra or {})}
    if extra and "PYTHONPATH" in extra and os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = extra["PYTHONPATH"] + os.pathsep + os.environ["PYTHONPATH"]
    return env


def block(log: str, n: int) -> list[str]:
    return log.split("\n\n")[n].splitlines()


def test_a_library_seeding_as_it_is_imported_after_the_seed_is_at_import_named_by_its_module():
    log = run("import_reseed.py", env={"PYTHONPATH": os.path.join(EXAMPLES, "site-packages")})
    assert log.splitlines()[0] == "rngtrace: 3 events — numpy: 2 seeds, 1 draw — 1 cause found"
    assert block(log, 1) == [
        "Causes (1):",
        "  ! at-import: numpy.random.seed(42) at import of reseedlib.legacy (reseedlib/legacy.py:4, imported",
        "    at import_reseed.py:9) reseeds numpy after your seed at import_reseed.py:8: your seed no longer",
        "    governs the draws after it",
        "    fix: import reseedlib.legacy before your seed at import_reseed.py:8",
        "         or seed again after the import at import_reseed.py:9",
        "    events #0, #1",
    ]
    assert block(log, 2)[3] == (
        "  1  numpy   seed  numpy.random.seed(42)  reseedlib/legacy.py:4 at import of reseedlib.legacy"
        "  import_reseed.py:9 in <module>"
    )


def test_the_html_report_names_the_module_being_imported_and_heads_the_causes(tmp_path):
    report = tmp_path / "import.html"
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--html", str(report), "import_reseed.py"],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=120,
        env=environ({"PYTHONPATH": os.path.join(EXAMPLES, "site-packages")}),
    )
    assert done.returncode == 0, done.stderr
    page = report.read_text(encoding="utf-8")
    assert "reseedlib/legacy.py:4 at import of reseedlib.legacy" in page
    assert '<h3 class="level-cause">Causes</h3>' in page and "level-risk" not in page
    assert "1 cause · click one" in page


def test_a_reseed_in_another_file_of_the_project_is_reseeded_and_a_seeding_helper_there_is_not():
    log = run("train.py", cwd=os.path.join(EXAMPLES, "reseed"))
    assert block(log, 1) == [
        "Causes (1):",
        "  ! reseeded: numpy.random.seed(42) inside helpers.py:5 (setup_data, called at train.py:6) reseeds",
        "    numpy after your seed at train.py:5: your seed no longer governs the draws after it",
        "    fix: remove numpy.random.seed(42) at helpers.py:5",
        "         or move your seed below train.py:6",
        "    events #0, #1",
    ]


def test_a_seeding_helper_in_another_file_of_the_project_stays_the_users_seed(tmp_path):
    (tmp_path / "helpers.py").write_text(
        "import numpy as np\n\n\ndef seed_all(value):\n    np.random.seed(value)\n", encoding="utf-8"
    )
    (tmp_path / "main.py").write_text(
        "import numpy as np\nimport helpers\n\nnp.random.seed(0)\nhelpers.seed_all(7)\nnp.random.seed(3)\n"
        "print(np.random.rand())\n",
        encoding="utf-8",
    )
    log = run("main.py", cwd=str(tmp_path))
    assert log.splitlines()[0] == "rngtrace: 4 events — numpy: 3 seeds, 1 draw"
    assert "Causes" not in log and "reseeded" not in log


def test_children_a_launcher_starts_with_subprocess_get_the_unseeded_finding_naming_each_process():
    log = run("folds.py")
    assert log.splitlines()[0] == "rngtrace: 2 events in 3 processes — numpy: 2 draws — 1 cause found"
    assert block(log, 1) == [
        "Causes (1):",
        "  ! unseeded: numpy is drawn from at fold.py:6 in python fold.py 0 (pid N) and python fold.py 1",
        "    (pid N) before it is ever seeded, so every run draws differently",
        "    fix: np.random.seed(0) at the program's start",
        "         or rng = np.random.default_rng(0); rng.permutation(...) at fold.py:6",
        "    events #0, #1",
    ]


def test_the_same_fold_run_alone_is_unseeded_at_the_same_line():
    log = run("fold.py", "0")
    assert block(log, 1)[1] == (
        "  ! unseeded: numpy is drawn from at fold.py:6 before it is ever seeded, so every run draws"
    )


def test_spawned_pool_workers_drawing_unseeded_are_unseeded_with_the_per_process_fix():
    log = run("pool_workers.py")
    lines = block(log, 1)
    assert lines[0] == "Causes (1):"
    # Joined: where the message wraps depends on how many digits the real pids had.
    # A pid split across the wrap ("(pid" then "345)") is made N again once joined.
    text = re.sub(r"\(pid \d+\)", "(pid N)", " ".join(line.strip() for line in lines))
    assert re.search(
        r"! unseeded: numpy is drawn from at pool_workers\.py:8 in pool worker \(pid N\)( and pool worker \(pid N\))? "
        r"before it is ever seeded",
        text,
    ), lines
    assert "before it is ever seeded, so every run draws differently" in text
    assert (
        "fix: seed each process from its id (np.random.seed(base + worker_id)) or draw from "
        "np.random.default_rng(seed + worker_id) in each (the draw at pool_workers.py:8)" in text
    )


def test_spawned_workers_whose_main_module_seeds_as_they_import_it_are_not_unseeded(tmp_path):
    (tmp_path / "pool2.py").write_text(
        "import multiprocessing as mp\n\nimport numpy as np\n\nnp.random.seed(0)\n\n\ndef work(i):\n"
        "    return i + np.random.rand()\n\n\nif __name__ == '__main__':\n"
        "    with mp.get_context('spawn').Pool(2) as pool:\n        print(pool.map(work, range(4)))\n",
        encoding="utf-8",
    )
    log = run("pool2.py", cwd=str(tmp_path))
    assert "unseeded" not in log


def test_workers_seeded_at_one_constant_line_name_it_and_its_per_worker_fix():
    pytest.importorskip("torch")
    log = run("aug_workers.py")
    assert log.splitlines()[0].endswith(" — 1 cause found")
    assert block(log, 1) == [
        "Causes (1):",
        "  ! duplicate: 2 processes drew from the numpy stream starting from the same state, so they drew the",
        "    same numbers: pid N (DataLoader worker 0) and pid N (DataLoader worker 1); first draw at",
        "    aug_workers.py:19 (Crops.__getitem__); each started from the seed at aug_workers.py:30 in",
        "    seed_worker",
        "    fix: np.random.seed(torch.initial_seed() % 2**32) at aug_workers.py:30 in seed_worker, which",
        "         PyTorch makes differ per worker",
        "    events #5, #6, #13, #14",
    ]


def test_a_seeded_program_reproducible_as_it_stands_opens_with_no_cause_and_its_risk_after(tmp_path):
    pytest.importorskip("torch")
    saved = tmp_path / "word_lm.json"
    log = run("word_lm.py", json_path=str(saved))
    assert (
        log.splitlines()[0] == "rngtrace: 10 events — torch: 1 seed, 9 draws — no cause found in this run; 1 risk below"
    )
    assert block(log, 1) == [
        "Risks (1): reproducible as run, but a change before them moves your numbers",
        "  ! global-generator: torch.nn.init.uniform_ at word_lm.py:20 and word_lm.py:22 draws from torch's",
        "    global generator (no generator=)",
        "    fix: g = torch.Generator().manual_seed(0); torch.nn.init.uniform_(..., generator=g)",
        "    events #8, #9",
    ]
    assert "Causes" not in log
    (finding,) = json.loads(saved.read_text(encoding="utf-8"))["findings"]
    assert finding[:3] == ["global-generator", "risk", "torch"]


def test_a_library_drawing_at_import_before_any_seed_is_no_cause(tmp_path):
    # rich draws random.getrandbits in rich/style.py as it is imported; the user's later seed governs the rest.
    package = tmp_path / "site-packages" / "fancytext"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import style\n", encoding="utf-8")
    (package / "style.py").write_text("import random\n\n_HASH = random.getrandbits(64)\n", encoding="utf-8")
    (tmp_path / "app.py").write_text(
        "import random\n\nimport fancytext\n\nrandom.seed(0)\nprint(random.random())\n", encoding="utf-8"
    )
    log = run("app.py", cwd=str(tmp_path), env={"PYTHONPATH": str(tmp_path / "site-packages")})
    assert log.splitlines()[0] == "rngtrace: 3 events — random: 1 seed, 2 draws"
    assert "fancytext/style.py:3 at import of fancytext.style" in log
    assert "Causes" not in log and "Risks" not in log
