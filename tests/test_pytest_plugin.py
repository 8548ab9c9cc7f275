"""The pytest plugin (issue 13), run on small suites through pytest's own pytester."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import textwrap

import numpy  # noqa: F401  (imported once, here: an in-process inner run unloads what it imported,

#               and numpy's extension cannot be loaded twice in one process)
import pytest

import rngtrace._pytest_report  # noqa: F401  (likewise the modules a traced inner run loads: the hub keeps
import rngtrace._pytest_tracer  # noqa: F401  sources made from them, which a second copy would not match)
import rngtrace.sources.numpy  # noqa: F401
import rngtrace.sources.random  # noqa: F401
from rngtrace import Trace

try:
    import torch  # noqa: F401  (imported here, once, for the same reason as numpy)
except ImportError:
    torch = None
try:
    import hypothesis  # noqa: F401  (likewise)
except ImportError:
    hypothesis = None

pytest_plugins = ["pytester"]

# pytest-randomly is installed with the test extras: each inner run says whether it wants it.
NO_RANDOMLY = ("-p", "no:randomly")
# np.random.rand as the log names it: an earlier move in this process (another test's) arms the profile
# hook, which sees the C function rand calls. The line is the claim here, not the label.
RAND = r"numpy\.random\.(rand|random_sample)"

SUITE = """
    import random
    import threading

    import numpy as np
    import pytest


    @pytest.fixture(scope="module")
    def table():
        return np.random.rand(4)  # line 10: drawn once for the module


    def test_draws():
        np.random.rand(3)  # line 14


    def test_reseeds():
        np.random.seed(0)  # line 18


    def test_leaks():
        random.random()  # line 22


    def test_restores():
        state = random.getstate()
        random.random()
        random.setstate(state)


    def test_clean():
        assert np.random.default_rng(0).random() < 1


    def test_uses_table(table):
        assert len(table) == 4


    def test_uses_table_again(table):
        assert len(table) == 4


    def test_other_thread():
        worker = threading.Thread(target=random.random)
        worker.start()
        worker.join()


    @pytest.mark.rng_global(reason="draws on purpose")
    def test_marked():
        random.random()


    def test_takes_charge(rng_trace):
        np.random.rand()
        assert len(rng_trace.draws) == 1
"""


def entries(output: str) -> dict[str, str]:
    """The summary's entries: first line (test id or fixture) -> the entry's whole text."""
    section = output.split("rngtrace: global random streams", 1)[1]
    blocks = re.split(r"\n\s*\n", section.split("\n", 2)[2].strip("\n"))
    out = {}
    for block in blocks:
        if block.strip() and not block.startswith(" ") and not re.match(r"=+ \d+ passed", block):
            out[block.split("\n", 1)[0].split("  [", 1)[0]] = block
    return out


def run(pytester: pytest.Pytester, *args: str, source: str = SUITE, name: str = "test_suite") -> pytest.RunResult:
    pytester.makepyfile(**{name: textwrap.dedent(source)})
    return pytester.runpytest(*args)


def test_report_names_exactly_the_drawing_reseeding_and_leaking_tests_with_their_lines(pytester):
    result = run(pytester, "--rng-trace", *NO_RANDOMLY)
    result.assert_outcomes(passed=10)
    found = entries(result.stdout.str())
    tests = {k.split("::")[1] for k in found if "::" in k}
    assert tests == {"test_draws", "test_reseeds", "test_leaks", "test_restores", "test_marked", "test_takes_charge"}
    assert re.search(f"test_suite.py:14 in test_draws  {RAND} ×3", found["test_suite.py::test_draws"])
    assert "test_suite.py:18 in test_reseeds  numpy.random.seed(0)" in found["test_suite.py::test_reseeds"]
    assert "LEAKS numpy" in found["test_suite.py::test_reseeds"]
    assert "LEAKS random" in found["test_suite.py::test_leaks"]
    assert "test_suite.py:22 in test_leaks" in found["test_suite.py::test_leaks"]
    # Put back with setstate: it drew, and reseeded, but later tests see the state it found.
    assert "LEAKS" not in found["test_suite.py::test_restores"]
    # The state it put back was one random.getstate() handed out: a restore, not a reseed (issue 24).
    assert (
        "in test_restores  random.setstate (restored a state saved earlier: no reseed)"
        in found["test_suite.py::test_restores"]
    )
    assert "marked rng_global: draws on purpose" in found["test_suite.py::test_marked"]
    assert "uses the rng_trace fixture" in found["test_suite.py::test_takes_charge"]


def test_a_module_fixture_is_reported_once_under_its_name_and_owns_its_leak(pytester):
    found = entries(run(pytester, "--rng-trace", *NO_RANDOMLY).stdout.str())
    fixture = [k for k in found if k.startswith("fixture 'table'")]
    assert fixture == ["fixture 'table' (module scope, test_suite.py)"]
    assert "numpy  1 draw in setup" in found[fixture[0]]
    assert re.search(f"test_suite.py:10 in table  {RAND} ×4", found[fixture[0]])
    assert "LEAKS numpy" in found[fixture[0]]
    assert not [k for k in found if "test_uses_table" in k]


def test_another_threads_draw_is_not_blamed_on_the_test_it_ran_beside(pytester):
    found = entries(run(pytester, "--rng-trace", *NO_RANDOMLY).stdout.str())
    assert not [k for k in found if "test_other_thread" in k]
    assert "random  1 draw in call" in found["other threads (not blamed on the test they ran beside)"]


@pytest.mark.parametrize("mode", [["--rng-trace-mode=strict"], ["--rng-trace=strict"]], ids=["mode option", "=MODE"])
def test_strict_fails_exactly_the_unmarked_tests_that_draw_reseed_or_leak(pytester, mode):
    result = run(pytester, *mode, *NO_RANDOMLY)
    result.assert_outcomes(passed=6, failed=4)
    failed = {line.split("::")[1].split(" ")[0] for line in result.stdout.lines if line.startswith("FAILED")}
    # Not the fixture's users, the other thread's neighbour, the marked test or the fixture's taker.
    assert failed == {"test_draws", "test_reseeds", "test_leaks", "test_restores"}
    result.stdout.re_match_lines(
        [".*rngtrace draw log.*", f".*numpy +draw +{RAND} ×3 +test_suite.py:14 in test_draws.*"]
    )


def test_strict_from_the_ini_file(pytester):
    pytester.makeini("[pytest]\nrng_trace = strict\n")
    result = run(
        pytester,
        *NO_RANDOMLY,
        source="import random\n\ndef test_a():\n    random.random()\n\ndef test_b():\n    pass\n",
    )
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*rngtrace strict mode: this test drew from or reseeded*"])


def test_an_ini_mode_that_is_not_one_says_which_are(pytester):
    pytester.makeini("[pytest]\nrng_trace = loud\n")
    result = run(pytester, *NO_RANDOMLY, source="def test_a():\n    pass\n")
    result.stderr.fnmatch_lines(["*rng_trace = 'loud' is not a mode; choose from report, strict, off*"])


def test_the_rng_trace_fixture_holds_the_running_tests_trace_without_the_flag(pytester):
    source = """
        import random

        def test_counts(rng_trace):
            random.random()
            random.seed(3)
            assert [(e.kind, e.api) for e in rng_trace.events] == [("draw", "random.random"), ("seed", "random.seed")]
    """
    result = run(pytester, *NO_RANDOMLY, source=source)
    result.assert_outcomes(passed=1)
    assert "global random streams" not in result.stdout.str()


def test_pytest_randomly_reseeding_before_each_test_is_not_blamed_on_the_tests(pytester):
    pytest.importorskip("pytest_randomly", reason="pytest-randomly is in the test extra; not installed here")
    source = """
        import random
        import numpy as np

        def test_clean():
            pass

        def test_draws():
            np.random.rand()

        def test_also_clean():
            assert random.Random(0).random() < 1
    """
    result = run(pytester, "-p", "randomly", "--rng-trace", source=source)
    result.assert_outcomes(passed=3)
    found = entries(result.stdout.str())
    assert set(found) == {"test_suite.py::test_draws"}
    # pytest-randomly reseeds numpy before the next test: no leak reaches it.
    assert "LEAKS" not in found["test_suite.py::test_draws"]


def test_with_pytest_randomly_a_stream_it_does_not_reseed_still_leaks_after_many_clean_tests(pytester):
    # The tests whose only events are pytest-randomly's reseeds are judged on a short path: a move
    # of another stream, even one no call recorded, must still be named.
    pytest.importorskip("pytest_randomly", reason="pytest-randomly is in the test extra; not installed here")
    pytest.importorskip("torch")
    source = """
        import random
        import torch

        def test_clean_0():
            pass

        def test_clean_1():
            pass

        def test_clean_2():
            assert random.Random(0).random() < 1

        def test_moves_torch_unseen():
            torch._C._VariableFunctions.rand(2)  # torch's C function itself: no wrapper sees it
    """
    result = run(
        pytester, "-p", "randomly", "-p", "no:xdist", "--randomly-dont-reorganize", "--rng-trace", source=source
    )
    result.assert_outcomes(passed=4)
    found = entries(result.stdout.str())
    assert {k for k in found if "::" in k} == {"test_suite.py::test_moves_torch_unseen"}
    assert "LEAKS torch" in found["test_suite.py::test_moves_torch_unseen"]


def test_a_test_drawing_thousands_of_times_is_counted_whole_and_a_threads_draw_after_them_keeps_its_line(pytester):
    source = """
        import random
        import threading

        def test_many():
            for _ in range(2500):
                random.random()
            thread = threading.Thread(target=random.random)
            thread.start()
            thread.join()
            random.seed(4)
    """
    result = run(pytester, "--rng-trace", *NO_RANDOMLY, source=source)
    result.assert_outcomes(passed=1)
    found = entries(result.stdout.str())
    assert "random  1 seed, 2,500 draws in call" in found["test_suite.py::test_many"]
    others = found["other threads (not blamed on the test they ran beside)"]
    assert "random  1 draw in call" in others and "threading.py" in others and "random.random ×1" in others


def test_the_events_past_a_tests_first_thousand_are_said_to_be_counted_but_not_located(pytester):
    source = """
        import random

        def test_many():
            for _ in range(2500):
                random.random()
    """
    result = run(pytester, "--rng-trace", *NO_RANDOMLY, source=source)
    report = entries(result.stdout.str())["test_suite.py::test_many"]
    # The counts line counts all 2,500; the call-site line holds the kept 1,000: the rest is said.
    assert "random  2,500 draws in call" in report
    assert "random.random ×1,000 (1,000 calls)" in report
    assert "... and 1,500 more events past the test's first 1,000, counted above but not located" in report


def test_a_phases_events_past_its_first_thousand_are_counted_by_stream_kind_stack_and_thread():
    from collections import Counter

    from rngtrace._pytest_assign import _TALLY_KEY, _tally_of

    # Equal events, the same event appended again, ones differing only in api or size (the same key),
    # another thread's, and an unattributed move whose detail does not hash: counted as keyed one by one.
    draw = ("random", "draw", "random.random", None, 7, 1, None)
    rows = [draw] * 5 + [("random", "draw", "random.random", None, 7, 1, None)] * 3
    rows += [("random", "draw", "random.choice", None, 7, 1, None), ("numpy.random", "draw", "rand", 4, 7, 1, None)]
    rows += [("random", "draw", "random.random", None, 7, 2, None), ("random", "seed", "random.seed", None, 9, 1, "4")]
    assert _tally_of(rows) == Counter(map(_TALLY_KEY, rows))
    assert _tally_of(rows)[("random", "draw", 7, 1)] == 9
    unhashable = [*rows, ("random", "moved", "random state", None, -1, 1, ["noticed", 3])]
    assert _tally_of(unhashable) == Counter(map(_TALLY_KEY, unhashable))


def test_rngtraces_own_modules_are_imported_without_pytests_assert_rewriting(pytester):
    # pytest rewrites a plugin package's modules, compiling each from source where no bytecode is
    # written: a tenth of a second on every traced run, for asserts that are not test assertions.
    source = """
        import sys

        def test_loaders():
            names = [n for n in sys.modules if n.startswith("rngtrace.") and n != "rngtrace.pytest_plugin"]
            assert "rngtrace._hub" in names and "rngtrace._pytest_tracer" in names
            rewritten = [n for n in names if type(sys.modules[n].__loader__).__name__ == "AssertionRewritingHook"]
            assert rewritten == []
    """
    run(pytester, "--rng-trace", *NO_RANDOMLY, source=source).assert_outcomes(passed=1)


def test_a_hypothesis_test_is_one_test_and_its_seeds_are_not_blamed(pytester):
    pytest.importorskip("hypothesis", reason="Hypothesis is in the test extra; not installed here")
    source = """
        import random
        import numpy as np
        from hypothesis import given, settings, strategies as st

        @settings(max_examples=20, database=None)
        @given(st.integers())
        def test_draws_in_every_example(n):
            random.random()

        @settings(max_examples=20, database=None)
        @given(st.integers())
        def test_draws_nothing(n):
            assert n == n
    """
    result = run(pytester, "--rng-trace", *NO_RANDOMLY, source=source)
    result.assert_outcomes(passed=2)
    found = entries(result.stdout.str())
    assert set(found) == {"test_suite.py::test_draws_in_every_example"}
    entry = found["test_suite.py::test_draws_in_every_example"]
    assert re.search(r"random  \d+ draws in call", entry) and "seed" not in entry
    assert "LEAKS" not in entry  # Hypothesis puts the state back after the examples


def test_xdist_workers_results_reach_the_controller(pytester):
    pytest.importorskip("xdist", reason="pytest-xdist is in the test extra; not installed here")
    result = run(pytester, "-n", "2", "--rng-trace", *NO_RANDOMLY)
    result.assert_outcomes(passed=10)
    found = entries(result.stdout.str())
    assert {"test_suite.py::test_draws", "test_suite.py::test_reseeds", "test_suite.py::test_leaks"} <= set(found)
    assert "test_suite.py:14 in test_draws  numpy.random.rand ×3" in found["test_suite.py::test_draws"]


def test_json_log_holds_every_reported_test_and_rngtrace_show_reads_it(pytester):
    path = pytester.path / "rng.json"
    run(pytester, f"--rng-trace-json={path}", *NO_RANDOMLY).assert_outcomes(passed=10)
    trace = Trace.load(path)
    by_test = {(e.thread, e.api) for e in trace.events}
    assert [api for test, api in by_test if test == "test_suite.py::test_draws" and re.fullmatch(RAND, api)]
    assert ("test_suite.py::test_reseeds", "numpy.random.seed") in by_test
    assert json.loads(path.read_text())["format"] == "rngtrace"
    from rngtrace.cli import main

    assert main(["show", str(path)]) == 0


def test_inert_without_the_flag_imports_nothing_patches_nothing_prints_nothing(pytester):
    source = """
        import random
        import sys

        def test_inert():
            assert "numpy" not in sys.modules and "torch" not in sys.modules
            assert "rngtrace.pytest_plugin" in sys.modules
            assert not [m for m in sys.modules if m.startswith("rngtrace.") and m != "rngtrace.pytest_plugin"]
            assert random.random == random._inst.random  # the original bound method: no patch
    """
    # A fresh interpreter: this one has imported numpy and rngtrace already.
    pytester.makepyfile(test_inert=textwrap.dedent(source))
    result = pytester.runpytest_subprocess(*NO_RANDOMLY)
    result.assert_outcomes(passed=1)
    assert "global random streams" not in result.stdout.str()


DRAWS_ONCE = "import random\n\ndef test_draws():\n    random.random()\n\ndef test_clean():\n    pass\n"


def test_the_flag_before_the_paths_traces_those_paths(pytester):
    pytester.makepyfile(test_one=DRAWS_ONCE, test_other="def test_not_asked_for():\n    pass\n")
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace", "test_one.py")
    result.assert_outcomes(passed=2)
    assert set(entries(result.stdout.str())) == {"test_one.py::test_draws"}


def test_the_mode_option_before_the_paths_takes_its_own_value_and_turns_tracing_on(pytester):
    pytester.makepyfile(test_one=DRAWS_ONCE)
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace-mode", "strict", "test_one.py")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["rngtrace strict mode: this test drew from or reseeded*", "FAILED test_one.py::test_draws*"]
    )


def test_a_mode_that_is_not_one_is_a_usage_error_naming_the_modes(pytester):
    pytester.makepyfile(test_one=DRAWS_ONCE)
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace-mode=loud", "test_one.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --rng-trace-mode: unknown mode 'loud'; choose from report, strict, off"])
    # --rng-trace=MODE exists for the three modes alone: the flag itself takes no value.
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace=loud", "test_one.py")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*argument --rng-trace: ignored explicit argument 'loud'"])


def test_a_mode_written_after_the_bare_flag_says_how_to_write_it(pytester):
    pytester.makepyfile(test_one=DRAWS_ONCE)
    result = pytester.runpytest(*NO_RANDOMLY, "test_one.py", "--rng-trace", "strict")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [
            "ERROR: --rng-trace takes no value, so 'strict' is read as a test path; "
            "write --rng-trace-mode=strict (or --rng-trace=strict)"
        ]
    )


def test_the_flag_keeps_the_ini_mode_and_the_mode_option_overrides_it(pytester):
    pytester.makeini("[pytest]\nrng_trace = strict\n")
    pytester.makepyfile(test_one=DRAWS_ONCE)
    pytester.runpytest(*NO_RANDOMLY, "--rng-trace", "test_one.py").assert_outcomes(passed=1, failed=1)
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace-mode=report", "test_one.py")
    result.assert_outcomes(passed=2)
    assert set(entries(result.stdout.str())) == {"test_one.py::test_draws"}
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace-mode=off", "test_one.py")
    result.assert_outcomes(passed=2)
    assert "global random streams" not in result.stdout.str()


def test_the_summary_counts_one_test_in_the_singular(pytester):
    pytester.makepyfile(test_one="import random\n\ndef test_draws():\n    random.random()\n")
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace", "test_one.py")
    result.stdout.fnmatch_lines(["1 test traced: 1 drew from or reseeded a global random stream*"])
    pytester.makepyfile(test_one="def test_clean():\n    pass\n")
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace", "test_one.py")
    result.stdout.fnmatch_lines(["no test drew from, reseeded or leaked a global random stream (1 test traced)"])


def test_a_test_outside_the_rootdir_is_named_with_its_file_from_the_invocation_dir(pytester):
    project = pytester.mkdir("project")
    (project / "pytest.ini").write_text("[pytest]\n")
    far = pytester.mkdir("elsewhere") / "test_far.py"
    far.write_text("import random\n\nclass TestFar:\n    def test_draws(self):\n        random.random()\n")
    # pytest's own id starts from the path given on the command line: "::TestFar::test_draws", no file.
    result = pytester.runpytest(*NO_RANDOMLY, "--rootdir", str(project), "--rng-trace", str(far))
    result.assert_outcomes(passed=1)
    assert set(entries(result.stdout.str())) == {"elsewhere/test_far.py::TestFar::test_draws"}


def test_a_session_fixtures_teardown_draw_is_reported_under_its_name(pytester):
    source = """
        import random
        import pytest

        @pytest.fixture(scope="session")
        def pool():
            yield [1, 2, 3]
            random.shuffle([1, 2, 3])  # line 7: at the end of the session, in the last test's teardown

        def test_one(pool):
            pass

        def test_two(pool):
            pass
    """
    found = entries(run(pytester, "--rng-trace", *NO_RANDOMLY, source=source).stdout.str())
    assert list(found) == ["fixture 'pool' (session scope, test_suite.py)"]
    entry = found["fixture 'pool' (session scope, test_suite.py)"]
    assert "random  1 draw in teardown" in entry and "test_suite.py:7 in pool  random.shuffle ×3" in entry


@pytest.mark.skipif(torch is None, reason="torch is not installed")
def test_a_torch_draw_is_reported_with_the_tests_line(pytester):
    source = """
        import torch

        def test_weights():
            torch.nn.Linear(2, 2)

        def test_owns_a_generator():
            torch.rand(2, generator=torch.Generator().manual_seed(0))
    """
    found = entries(run(pytester, "--rng-trace", *NO_RANDOMLY, source=source).stdout.str())
    assert list(found) == ["test_suite.py::test_weights"]
    entry = found["test_suite.py::test_weights"]
    assert "torch  2 draws in call" in entry and "LEAKS torch" in entry
    assert "test_suite.py:4 in test_weights  torch.nn.init.kaiming_uniform_ ×4" in entry


PACKAGE_INIT = """
    import random

    import numpy as np


    def setup_module(module):
        np.random.seed(int(np.random.uniform() * 1000))  # line 8: as scikit-learn's own __init__.py does
        random.seed(3)


    def teardown_module():
        random.random()  # line 13
"""


def _package(pytester: pytest.Pytester) -> None:
    pytester.mkpydir("pkg")
    (pytester.path / "pkg" / "__init__.py").write_text(textwrap.dedent(PACKAGE_INIT))
    (pytester.path / "pkg" / "test_a.py").write_text(
        textwrap.dedent("""
        import random


        def setup_module():
            random.random()  # line 6: a module's own setup_module


        def test_first():
            pass


        def test_second():
            pass
    """)
    )
    (pytester.path / "pkg" / "test_b.py").write_text("def test_last():\n    pass\n")


def test_a_packages_setup_module_is_reported_once_under_its_name_not_blamed_on_its_first_test(pytester):
    _package(pytester)
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace", "pkg")
    result.assert_outcomes(passed=3)
    found = entries(result.stdout.str())
    assert set(found) == {
        "setup_module/teardown_module (package scope, pkg/__init__.py)",
        "setup_module (module scope, pkg/test_a.py)",
    }
    entry = found["setup_module/teardown_module (package scope, pkg/__init__.py)"]
    assert "numpy   1 seed, 1 draw in setup" in entry
    assert "random  1 seed in setup; 1 draw in teardown" in entry
    assert "pkg/__init__.py:8 in setup_module  numpy.random.seed(" in entry
    assert re.search(r"\[LEAKS [^]]*random\]", entry)  # the package's own leak, not its first test's
    assert "pkg/test_a.py:6 in setup_module  random.random" in found["setup_module (module scope, pkg/test_a.py)"]


def test_strict_does_not_fail_a_packages_first_or_last_test_for_its_setup_module(pytester):
    _package(pytester)
    result = pytester.runpytest(*NO_RANDOMLY, "--rng-trace-mode=strict", "pkg")
    result.assert_outcomes(passed=3)


def test_scikit_learns_own_suite_outside_the_rootdir_names_files_and_its_package_setup_module(pytester):
    spec = importlib.util.find_spec("sklearn")  # found, not imported: the inner run, alone, imports it
    if spec is None or spec.origin is None:
        pytest.skip("scikit-learn is in the test extra; not installed here")
    suite = os.path.join(os.path.dirname(spec.origin), "model_selection", "tests", "test_split.py")
    (pytester.path / "pytest.ini").write_text("[pytest]\n")
    selected = "test_kfold_valueerrors or test_train_test_split_sparse"
    # A fresh interpreter, as people run it: scikit-learn's extensions are not loaded twice here. -s shows
    # what sklearn/__init__.py's setup_module prints as it seeds.
    result = pytester.runpytest_subprocess(
        *NO_RANDOMLY, "-s", "--rootdir", str(pytester.path), "--rng-trace-mode=strict", suite, "-k", selected
    )
    failed = [line.split(" - ")[0] for line in result.stdout.lines if line.startswith("FAILED")]
    # That setup_module seeds numpy and random in the first test's setup: not that test's doing.
    assert failed and all("test_train_test_split_sparse" in line for line in failed)
    found = entries(result.stdout.str())
    seeded = "I: Seeding RNGs with" in result.stdout.str()
    assert seeded or pytest.version_tuple < (8,)  # pytest 7 runs no setup_module of a package in site-packages
    assert [k for k in found if "package scope" in k] == (
        ["setup_module (package scope, sklearn/__init__.py)"] if seeded else []
    )
    where = os.path.relpath(suite, pytester.path).replace(os.sep, "/")
    tests = [k for k in found if "package scope" not in k]
    assert tests and all(k.startswith(f"{where}::test_train_test_split_sparse[") for k in tests)


@pytest.mark.parametrize("where", ["past a test's first 1,000 events", "at collection"])
def test_an_unattributed_move_is_reported_past_a_tests_first_thousand_events_and_at_collection(pytester, where):
    # The legacy stream's bit generator drawn from directly: no patch sees it, so it is a move
    # noticed afterwards. The collection record lists it by the call that noticed it (that path
    # once read a name that did not exist: the run ended in an INTERNALERROR), and so do the
    # counted events past a test's first 1,000.
    source = f"""
        import numpy as np

        IN_TEST = {where != "at collection"}
        if not IN_TEST:
            np.random.mtrand._rand._bit_generator.random_raw()
        np.random.rand()

        def test_many():
            for i in range(1200):
                np.random.rand()
                if IN_TEST and i == 1100:
                    np.random.mtrand._rand._bit_generator.random_raw()  # the bit generator: no patch
    """
    result = run(pytester, "--rng-trace", *NO_RANDOMLY, source=source)
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "INTERNALERROR" not in out + result.stderr.str()
    found = entries(out)
    key = (
        "outside any test (collection, imports, between tests)"
        if where == "at collection"
        else "test_suite.py::test_many"
    )
    assert "move with no recorded call" in found[key]


def test_draws_from_one_line_in_one_phase_go_to_the_wider_fixture_that_made_them_and_the_rest_to_the_test(pytester):
    # One helper line draws for a module fixture and for the test's own fixture, in one setup phase:
    # whose each draw is follows who made it, not the line it was drawn on.
    source = """
        import random
        import pytest

        def draw():
            return random.random()

        @pytest.fixture(scope="module")
        def shared():
            return [draw() for _ in range(3)]

        @pytest.fixture
        def own(shared):
            return [draw() for _ in range(2)]

        def test_uses_both(own):
            draw()
    """
    result = run(pytester, "--rng-trace", *NO_RANDOMLY, source=source)
    result.assert_outcomes(passed=1)
    found = entries(result.stdout.str())
    assert "random  3 draws in setup" in found["fixture 'shared' (module scope, test_suite.py)"]
    assert "random  2 draws in setup; 1 draw in call" in found["test_suite.py::test_uses_both"]
