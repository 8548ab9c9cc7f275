"""``%load_ext rngtrace``: the %rng_trace line magic and %%rng_trace cell magic, in IPython's own shell."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytest.importorskip("IPython", reason="the magics need IPython (pip install ipython)")

from rngtrace import Trace  # noqa: E402
from rngtrace._ipython import split_options  # noqa: E402


@pytest.fixture(scope="module")
def shell():
    """IPython's test shell, in this process, with the extension loaded."""
    from IPython.testing.globalipapp import get_ipython

    ip = get_ipython()
    ip.run_line_magic("load_ext", "rngtrace")
    ip.run_cell("import random\nimport numpy as np")
    return ip


def run(shell, cell: str):
    """Run ``cell`` as a notebook would; return IPython's ExecutionResult."""
    return shell.run_cell(cell, store_history=False)


def test_load_ext_registers_a_line_and_a_cell_magic(shell):
    magics = shell.magics_manager.magics
    assert "rng_trace" in magics["line"] and "rng_trace" in magics["cell"]


def test_cell_magic_prints_the_draw_log_under_the_cell(shell, capsys):
    result = run(shell, "%%rng_trace\nnp.random.seed(3)\nx = np.random.rand(2)\nrandom.random()")
    assert result.success
    err = capsys.readouterr().err
    assert err.startswith("rngtrace: 3 events — random: 1 draw · numpy: 1 seed, 1 draw\n")
    assert "numpy.random.seed(3)" in err
    assert "<ipython-input-" in err  # the cell's own lines are named


def test_cell_magic_returns_the_last_expression_so_the_cell_shows_it(shell, capsys):
    result = run(shell, "%%rng_trace\nrandom.seed(5)\nrandom.randint(0, 10**9)")
    import random

    random.seed(5)
    assert result.result == random.randint(0, 10**9)
    assert "random.randint" in capsys.readouterr().err


def test_line_magic_traces_one_statement_in_the_user_namespace(shell, capsys):
    result = run(shell, "%rng_trace picked = random.choice([1, 2, 3])")
    assert result.success and shell.user_ns["picked"] in (1, 2, 3)
    assert "random.choice" in capsys.readouterr().err


def test_options_are_those_of_rng_trace(shell, capsys):
    result = run(shell, "%%rng_trace --streams numpy --depth 1 --max-events 1 --trace tr --quiet\n"
                        "random.random()\nnp.random.rand()\nnp.random.rand()")
    assert result.success
    trace = shell.user_ns["tr"]
    assert isinstance(trace, Trace)
    assert trace.streams == ("numpy",) and trace.depth == 1 and trace.max_events == 1
    assert [e.api for e in trace.events] == ["numpy.random.rand"] and trace.dropped == 1
    assert capsys.readouterr().err == ""


def test_streams_option_takes_a_comma_separated_list(shell):
    run(shell, "%rng_trace -s numpy,random -q -t tr2 random.random()")
    assert shell.user_ns["tr2"].streams == ("numpy", "random")


def test_on_draw_raise_stops_the_cell_before_the_draw(shell, capsys):
    result = run(shell, "%%rng_trace --on-draw raise\nnp.random.rand()")
    from rngtrace import GlobalRNGError

    assert isinstance(result.error_in_exec, GlobalRNGError)
    capsys.readouterr()


def test_an_unknown_stream_is_a_usage_error_naming_the_valid_ones(shell, capsys):
    result = run(shell, "%rng_trace --streams nump np.random.rand()")
    assert not result.success
    assert "unknown stream 'nump'; choose from random, numpy, torch" in capsys.readouterr().err


def test_a_cell_magic_takes_options_only_on_its_line(shell, capsys):
    result = run(shell, "%%rng_trace x = 1\nrandom.random()")
    assert not result.success
    assert "takes options only on its line" in capsys.readouterr().err


def test_an_error_in_the_cell_still_prints_the_log_and_unhooks(shell, capsys):
    result = run(shell, "%%rng_trace\nrandom.random()\nraise LookupError('user error')")
    assert isinstance(result.error_in_exec, LookupError)
    assert "random.random" in capsys.readouterr().err
    # the autouse fixture then checks that nothing is left hooked


def test_ipython_syntax_works_inside_the_cell(shell, capsys):
    result = run(shell, "%%rng_trace\nvalue = random.random()\n%time random.random()")
    assert result.success
    assert capsys.readouterr().err.startswith("rngtrace: 2 events")


@pytest.mark.parametrize(("line", "expected"), [
    ("np.random.rand(3)", ([], "np.random.rand(3)")),
    ("--depth 8 x = rand(8)", (["--depth", "8"], "x = rand(8)")),
    ("--streams=numpy -q -t t f()", (["--streams", "numpy", "-q", "-t", "t"], "f()")),
    ("-d 2 -- -x", (["-d", "2"], "-x")),
    ("-np.random.rand()", ([], "-np.random.rand()")),
])
def test_leading_options_are_split_from_the_statement_which_stays_verbatim(line, expected):
    assert split_options(line) == expected


def test_import_rngtrace_does_not_import_ipython():
    code = "import sys, rngtrace; print('IPython' in sys.modules, callable(rngtrace.load_ipython_extension))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
