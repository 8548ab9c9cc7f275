"""Findings: each kind fires where a run is irreproducible, and stays quiet at its nearest false alarm.

Real libraries throughout (scikit-learn, torch); a "library" of the test's own is a real module
written under a ``site-packages`` folder, which is what makes code a package's rather than the user's.
"""

from __future__ import annotations

import io
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
from literal_traces import build, draw, seed
from torch_traces import cudnn_benchmark_trace

from rngtrace import Trace, rng_trace
from rngtrace._paths import short_path
from rngtrace.render.text import render

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(__file__)), "examples")
HERE = os.path.abspath(__file__)
ME = short_path(HERE)  # how findings name this file


def kinds(trace) -> list[str]:
    return [f.kind for f in trace.findings]


def _own_helper() -> float:
    return float(np.random.rand())


# -- interleaved ---------------------------------------------------------------------------


def test_the_story_opens_its_log_with_the_interleaved_finding():
    out = subprocess.run([sys.executable, "story.py"], cwd=EXAMPLES, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    blocks = out.stderr.split("\n\n")
    assert blocks[1].splitlines()[:3] == [
        "Causes (1):",
        "  ! interleaved: 1 numpy draw inside acc/devinit.py:10 (init) comes between your seed at story.py:8",
        "    and your draw at story.py:10: your numbers depend on it",
    ]
    # The user's own generator first; rng_isolate, which makes rngtrace a dependency of the program, last.
    assert (
        "    fix: draw your own at story.py:10: rng = np.random.default_rng(666); rng.random(...)\n"
        "         or wrap init() at story.py:9 in `with rngtrace.rng_isolate():`\n"
    ) in blocks[1]
    assert blocks[2].startswith("Events:")


def test_train_test_split_between_the_seed_and_a_draw_is_interleaved_with_its_random_state_fix():
    from sklearn.model_selection import train_test_split

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        train_test_split(np.arange(20.0))
        np.random.rand()
    (finding,) = trace.findings
    assert finding.kind == "interleaved" and finding.stream == "numpy"
    assert f"inside train_test_split ({ME}:" in finding.message
    assert finding.fix.startswith(f"train_test_split(..., random_state=0) at {ME}:")
    assert [trace.events[i].kind for i in finding.events] == ["seed", "draw", "draw"]


def test_kmeans_names_its_constructor_for_random_state_not_its_private_base_class():
    from sklearn.cluster import KMeans

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        KMeans(n_clusters=2, n_init=1).fit_predict(np.arange(40.0).reshape(20, 2))  # _BaseKMeans.fit_predict
        np.random.rand()
    (finding,) = trace.findings
    if sys.version_info >= (3, 11):  # a 3.10 frame names its function without the class
        assert "inside KMeans.fit" in finding.message
    # The constructor the user called, read from their line, with the argument its signature takes.
    line = next(f for f in trace.events[1].stack if f.filename == HERE).lineno
    assert finding.fix.startswith(f"KMeans(n_clusters=2, n_init=1, random_state=0) at {ME}:{line}, or ")


def test_a_dataloader_between_the_seed_and_the_model_built_says_to_seed_right_before_building_it():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    with rng_trace(print=False, streams="torch") as trace:
        torch.manual_seed(0)
        next(iter(DataLoader(list(range(8)), batch_size=4, shuffle=True)))
        torch.nn.Linear(4, 2)
    (finding,) = trace.findings
    assert finding.kind == "interleaved" and "inside the DataLoader (" in finding.message
    assert f"and the model you build at {ME}:" in finding.message
    assert finding.fix.startswith("DataLoader(..., generator=torch.Generator().manual_seed(0))")
    assert finding.fix.endswith(
        f"or torch.manual_seed(0) right before building the model at {ME}:"
        f"{next(f for f in trace.events[-1].stack if f.filename == HERE).lineno}"
    )


def test_a_helper_in_the_seeds_own_file_is_not_interleaved():
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        _own_helper()
        np.random.rand()
    assert trace.findings == []


def test_a_library_call_given_random_state_draws_nothing_global_and_is_no_finding():
    from sklearn.model_selection import train_test_split

    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        train_test_split(np.arange(20.0), random_state=0)
        np.random.rand()
    assert trace.findings == []


def test_a_clean_run_reports_nothing():
    with rng_trace(print=False) as trace:
        rng = np.random.default_rng(0)
        rng.random()
    assert trace.findings == [] and "Findings" not in render(trace)


# -- reseeded ------------------------------------------------------------------------------


def test_a_library_seeding_after_the_user_is_reseeded(package):
    lib = package(
        "reseedlib",
        """\
        import numpy as np

        def setup():
            np.random.seed(1234)
        """,
    )
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        lib.setup()
        np.random.rand()
    (finding,) = trace.findings
    assert finding.kind == "reseeded" and f"inside reseedlib.py:4 (setup, called at {ME}:" in finding.message
    assert f"after your seed at {ME}:" in finding.message
    assert f"wrap setup() at {ME}:" in finding.fix


def test_a_seeding_helper_the_user_calls_is_the_users_seed(package):
    torch = pytest.importorskip("torch")
    lib = package(
        "seedhelpers",
        """\
        import random
        import numpy as np
        import torch

        def seed_everything(seed):
            random.seed(seed)
            np.random.seed(seed)
            torch.manual_seed(seed)
        """,
    )
    with rng_trace(print=False) as trace:
        np.random.seed(0)
        lib.seed_everything(7)
        np.random.rand()
        torch.rand(2)
    assert trace.findings == []


def test_pytorch_seeding_each_dataloader_worker_is_not_reseeded():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    with rng_trace(print=False) as trace:
        torch.manual_seed(0)
        np.random.seed(0)
        g = torch.Generator().manual_seed(0)
        for _batch in DataLoader(_Draws(), batch_size=2, num_workers=2, generator=g, multiprocessing_context="fork"):
            pass
    assert any(e.kind == "seed" and e.pid != os.getpid() for e in trace.events)  # the workers' own seeds
    assert "reseeded" not in kinds(trace)


class _Draws:
    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> float:
        return float(np.random.rand())


# -- unseeded and OS entropy ----------------------------------------------------------------


def test_a_stream_drawn_before_any_seed_is_unseeded_when_the_trace_saw_the_program_start():
    first = draw("numpy.random.rand", 1, (HERE, 5, "<module>"))
    (finding,) = build(first, from_start=True).findings
    assert finding.kind == "unseeded" and "before it is ever seeded" in finding.message
    assert "np.random.seed(0) at the program's start" in finding.fix


def test_a_block_cannot_tell_unseeded_and_a_torch_build_starting_from_its_fixed_seed_is_no_finding():
    assert build(draw("numpy.random.rand", 1, (HERE, 5, "<module>"))).findings == []
    fixed = {"torch.starts_fixed": True}
    assert build(draw("torch.rand", 4, (HERE, 5, "<module>")), from_start=True, settings=fixed).findings == []


def test_torch_drawn_before_any_seed_is_unseeded_where_its_build_starts_from_os_entropy(tmp_path):
    # torch 2.13 starts its default generator from OS entropy: torch.initial_seed() differs per process.
    pytest.importorskip("torch")
    (tmp_path / "prog.py").write_text("import torch\nx = torch.rand(2)\n")
    done = subprocess.run(
        [sys.executable, "-m", "rngtrace", "run", "--json", "log.json", "prog.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    trace = Trace.load(tmp_path / "log.json")
    starts_fixed = trace.settings["torch.starts_fixed"]
    kinds = [f.kind for f in trace.findings]
    assert kinds == ([] if starts_fixed else ["unseeded"])
    if not starts_fixed:
        assert "prog.py:2 before it is ever seeded" in trace.findings[0].message
    seeded = build(
        seed("numpy.random.seed", "0", (HERE, 4, "<module>")),
        draw("numpy.random.rand", 1, (HERE, 5, "f")),
        from_start=True,
    )
    assert seeded.findings == []


def test_a_seed_given_no_value_is_seeded_from_os_entropy_in_the_log_and_as_a_finding():
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed()
        np.random.rand()
    (finding,) = trace.findings
    assert finding.kind == "unseeded" and "from OS entropy" in finding.message
    assert finding.fix.startswith(f"give it a value: np.random.seed(0) at {ME}:")
    assert "seeded from OS entropy" in render(trace).split("Events:")[1]


# -- global-generator -------------------------------------------------------------------------


def test_a_shuffling_dataloader_without_generator_is_named_once_at_its_line():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    with rng_trace(print=False, streams="torch") as trace:
        for _epoch in range(2):
            for _batch in DataLoader(list(range(8)), batch_size=4, shuffle=True):
                pass
    (finding,) = trace.findings
    assert finding.kind == "global-generator" and f"the DataLoader iterated at {ME}:" in finding.message
    assert finding.fix == "DataLoader(..., generator=torch.Generator().manual_seed(0))"
    assert len(finding.events) == 4  # base seed and shuffle, both epochs
    del torch


def test_a_dataloader_given_a_generator_is_no_finding():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    with rng_trace(print=False, streams="torch") as trace:
        for _batch in DataLoader(
            list(range(8)), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(0)
        ):
            pass
    assert trace.findings == []


def test_init_and_randperm_from_user_code_need_generator_but_a_model_built_is_not_named():
    torch = pytest.importorskip("torch")
    with rng_trace(print=False, streams="torch") as trace:
        torch.nn.init.normal_(torch.empty(3))
        torch.randperm(4)
        torch.nn.Linear(2, 2)
        g = torch.Generator().manual_seed(0)
        torch.nn.init.normal_(torch.empty(3), generator=g)
    assert [(f.kind, f.fix) for f in trace.findings] == [
        ("global-generator", "g = torch.Generator().manual_seed(0); torch.nn.init.normal_(..., generator=g)"),
        ("global-generator", "g = torch.Generator().manual_seed(0); torch.randperm(..., generator=g)"),
    ]


# -- settings ----------------------------------------------------------------------------------


def test_cudnn_benchmark_on_is_a_settings_finding_with_the_line_that_sets_it_right():
    pytest.importorskip("torch")
    trace = cudnn_benchmark_trace()
    (finding,) = trace.findings
    assert finding.kind == "settings" and finding.fix == "torch.backends.cudnn.benchmark = False"


def test_a_cpu_run_with_default_flags_or_no_torch_draw_has_no_settings_finding():
    torch = pytest.importorskip("torch")
    with rng_trace(print=False, streams="torch") as trace:
        torch.rand(2)
    assert trace.settings["cuda"] is False and trace.findings == []
    benchmark = {"cudnn.benchmark": True}
    assert build(draw("numpy.random.rand", 1, (HERE, 3, "f")), settings=benchmark).findings == []


def test_settings_are_read_only_for_a_library_with_an_event_and_flags_of_its_own():
    torch = pytest.importorskip("torch")
    with rng_trace(print=False) as numpy_only:
        np.random.rand()
    assert numpy_only.settings == {}  # torch imported, traced, but it drew nothing; numpy has no flags
    with rng_trace(print=False) as both:
        np.random.rand()
        torch.rand(1)
    assert set(both.settings) == {"cudnn.benchmark", "cudnn.deterministic", "deterministic_algorithms", "cuda"}


def test_cuda_without_deterministic_algorithms_is_a_settings_finding():
    flags = {"cuda": True, "cudnn.benchmark": False, "cudnn.deterministic": False, "deterministic_algorithms": False}
    (finding,) = build(draw("torch.rand", 2, (HERE, 3, "f")), settings=flags).findings
    assert finding.kind == "settings" and "torch.use_deterministic_algorithms(True)" in finding.fix
    flags["deterministic_algorithms"] = True
    assert build(draw("torch.rand", 2, (HERE, 3, "f")), settings=flags).findings == []


# -- rendering -----------------------------------------------------------------------------------


def test_findings_print_first_in_two_lines_and_a_fix_in_two(monkeypatch):
    monkeypatch.chdir(os.path.dirname(HERE))  # the log names this file as a user would see it
    log = io.StringIO()
    from sklearn.model_selection import train_test_split

    with rng_trace(file=log, streams="numpy"):
        np.random.seed(0)
        train_test_split(np.arange(20.0))
        np.random.rand()
    blocks = log.getvalue().split("\n\n")
    assert blocks[1].startswith("Causes (1):") and blocks[2].startswith("Events:")
    finding = blocks[1].splitlines()[1:]
    assert len(finding) == 5 and finding[2].startswith("    fix: train_test_split(..., random_state=0) at ")
    assert finding[3].startswith("         or draw your own at test_findings.py:")


def test_a_package_drawing_as_it_is_imported_after_the_seed_is_at_import_named_by_its_module(package):
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        package(
            "drawsonimport",
            """\
            import numpy as np

            JITTER = np.random.rand()
            """,
        )
        np.random.rand()
    (finding,) = trace.findings
    assert finding.kind == "at-import" and finding.level == "cause"
    assert finding.message.startswith("1 numpy draw at import of drawsonimport (drawsonimport.py:3, imported at ")
    assert finding.fix.startswith(f"import drawsonimport before your seed at {ME}:")


def test_a_loader_named_by_interleaved_is_not_named_again_by_global_generator_in_later_epochs():
    torch = pytest.importorskip("torch")
    from torch.utils.data import DataLoader

    loader = DataLoader(list(range(8)), batch_size=4, shuffle=True)
    with rng_trace(print=False, streams="torch") as trace:
        torch.manual_seed(0)
        for _epoch in range(3):
            for _batch in loader:
                torch.rand(1)
    assert kinds(trace) == ["interleaved"]


def test_one_library_call_left_without_random_state_at_many_lines_is_one_finding():
    import sysconfig

    resample = (os.path.join(sysconfig.get_paths()["purelib"], "sklearn", "utils", "_indexing.py"), 574, "resample")
    trace = build(*[draw("numpy.random.choice", 3, resample, (HERE, line, "main")) for line in (20, 21, 22, 20)])
    (finding,) = trace.findings
    assert finding.kind == "global-generator" and finding.events == (0, 1, 2, 3)
    assert finding.message.startswith(f"resample at {ME}:20, {ME}:21 and 1 more line draws from NumPy's global")
    assert finding.fix == "resample(..., random_state=0) at each"


def test_a_notebooks_cells_are_one_file_for_interleaved():
    import sysconfig

    cell = lambda n, line: (f"<ipython-input-{n}-0123456789ab>", line, "<module>")  # noqa: E731
    resample = (os.path.join(sysconfig.get_paths()["purelib"], "sklearn", "utils", "_indexing.py"), 574, "resample")
    trace = build(
        seed("numpy.random.seed", "0", cell(1, 1)),
        draw("numpy.random.choice", 3, resample, cell(2, 1)),
        draw("numpy.random.rand", 1, cell(3, 1)),
    )
    (finding,) = trace.findings
    assert finding.kind == "interleaved" and "your seed at In[1]:1 and your draw at In[3]:1" in finding.message
    assert build(seed("numpy.random.seed", "0", cell(1, 1)), draw("numpy.random.rand", 1, cell(2, 1))).findings == []


def test_every_finding_kind_is_in_a_registry_and_documented_in_order():
    from rngtrace._findings import ACROSS_RUNS, KINDS

    text = (pathlib.Path(__file__).parent.parent / "docs" / "findings.md").read_text(encoding="utf-8")
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    named = [name for line in headings for name in re.findall(r"`([a-z-]+)`", line)]
    # The reference lists one trace's kinds in the log's order (the ranking), then those across runs.
    names = [kind.name for kind in KINDS] + [kind.name for kind in ACROSS_RUNS]
    assert named == names
    assert "divergent" in names


# -- issue 24: the user's value repeated, restores, levels -------------------------------------------


def test_a_library_seeding_with_the_users_value_is_the_users_seed_repeated_and_another_value_is_reseeded(package):
    lib = package(
        "trainerlib",
        """\
        import numpy as np

        class Trainer:
            def __init__(self, seed):
                np.random.seed(seed)  # the seed the user configured, passed on
        """,
    )
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        lib.Trainer(0)
        np.random.rand()
    assert trace.findings == []
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        lib.Trainer(1234)  # the seed-sweep trap: a value of its own
        np.random.rand()
    assert kinds(trace) == ["reseeded"]


def test_a_restore_is_neither_reseeded_nor_unseeded():
    from rngtrace._model import Event, Frame
    from rngtrace._seeds import RESTORE, is_restore, seed_roles

    line = (Frame(HERE, 5, "<module>"),)
    library = (Frame("/x/site-packages/lightning/fabric/utilities/seed.py", 153, "_set_rng_states"), *line)
    events = [
        Event(0, "numpy", "seed", "numpy.random.seed", None, line, "MainThread", 1, "42"),
        Event(1, "numpy", "restore", "numpy.random.set_state", None, library, "MainThread", 1, None),
    ]
    assert is_restore(events[1]) and seed_roles(events)[1].role == RESTORE


def test_causes_come_before_risks_whatever_the_registry_order():
    from rngtrace._findings import by_level
    from rngtrace._model import Finding

    risk = Finding("global-generator", "torch", (1,), "m", (), "", "risk")
    cause = Finding("duplicate", "numpy", (1,), "m", (), "", "cause")
    assert by_level([risk, cause]) == [cause, risk]


def test_every_kind_declares_a_level_and_global_generator_alone_is_a_risk():
    from rngtrace._findings import ACROSS_RUNS, KINDS

    levels = {kind.name: kind.level for kind in (*KINDS, *ACROSS_RUNS)}
    assert {name for name, level in levels.items() if level == "risk"} == {"global-generator"}
    assert set(levels.values()) == {"cause", "risk"}


def test_a_library_drawing_at_import_after_the_seed_with_nothing_drawn_after_it_is_no_finding(package):
    with rng_trace(print=False, streams="numpy") as trace:
        np.random.seed(0)
        package("drawsatimportonly", "import numpy as np\n\nJITTER = np.random.rand()\n")
    assert trace.findings == []
    assert "drawsatimportonly.py:3 at import of drawsatimportonly" in render(trace)
