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
    result = shell.run_cell(
        "%%rng_trace\nnp.random.seed(3)\nx = np.random.rand(2)\nrandom.random()", store_history=True
    )
    assert result.success
    err = capsys.readouterr().err
    assert err.startswith("rngtrace: 3 events — random: 1 draw · numpy: 1 seed, 1 draw\n")
    assert "numpy.random.seed(3)" in err
    assert f"In[{result.execution_count}]:3 in <module>" in err  # the cell's own lines, as IPython labels them


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
    result = run(
        shell,
        "%%rng_trace --streams numpy --depth 1 --max-events 1 --trace tr --quiet\n"
        "random.random()\nnp.random.rand()\nnp.random.rand()",
    )
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


# -- the cell as IPython shows it: its label, its lines, its traceback ---------------------


def cell_of(shell, frame) -> str | None:
    """IPython's label for the cell ``frame`` is in ("In[3]"), or None."""
    found = shell.compile.format_code_name(frame.filename)
    return found[1] if found else None


def test_a_cell_is_labelled_with_its_own_number_and_its_lines_count_the_magic_line(shell, capsys):
    run(shell, "1 + 1")
    result = shell.run_cell("%%rng_trace -t tr\nx = 1\nrandom.random()", store_history=True)
    [draw] = shell.user_ns["tr"].draws
    assert (cell_of(shell, draw.stack[0]), draw.stack[0].lineno) == (f"In[{result.execution_count}]", 3)
    assert f"random.random ×1  In[{result.execution_count}]:3 in <module>" in capsys.readouterr().err


def test_blank_lines_at_the_top_of_a_cell_body_are_counted(shell):
    result = run(shell, "%%rng_trace -q -t tr\n\n\nrandom.random()")
    assert result.success and shell.user_ns["tr"].draws[0].stack[0].lineno == 4


def test_the_same_statement_in_two_cells_is_logged_at_each_ones_line(shell):
    # On 3.10 the two compiled statements are equal code objects, told apart by identity only.
    run(shell, "%%rng_trace -q -t tr1\nrandom.random()")
    run(shell, "%%rng_trace -q -t tr2\n\nrandom.random()")
    assert [shell.user_ns[t].draws[0].stack[0].lineno for t in ("tr1", "tr2")] == [2, 3]


def test_a_line_magic_statement_is_at_its_line_in_its_cell(shell):
    result = shell.run_cell("x = 1\n%rng_trace -q -t tr random.random()", store_history=True)
    frame = shell.user_ns["tr"].draws[0].stack[0]
    assert (cell_of(shell, frame), frame.lineno) == (f"In[{result.execution_count}]", 2)


def test_a_recorded_stack_holds_the_cells_frames_and_nothing_of_ipython_or_the_magic(shell):
    run(shell, "def helper():\n    return random.random()")
    result = run(shell, "%%rng_trace -q -t tr\ndef f():\n    return helper()\nf()")
    assert result.success
    stack = shell.user_ns["tr"].draws[0].stack
    # helper's cell, then this cell's f and its module code: no phantom cell, no IPython, no test
    assert [(f.function, f.lineno) for f in stack] == [("helper", 2), ("f", 3), ("<module>", 4)]


def test_a_raising_cell_shows_the_traceback_it_shows_without_the_magic(shell, capsys):
    cell = "def f():\n    raise LookupError('boom')\nf()"
    plain = run(shell, cell)
    shown_plain = capsys.readouterr().out
    traced = run(shell, "%%rng_trace -q\n" + cell)
    shown = capsys.readouterr().out
    assert isinstance(traced.error_in_exec, LookupError) and isinstance(plain.error_in_exec, LookupError)
    assert "run_cell_magic" not in shown and "_ipython.py" not in shown and "exec(run" not in shown
    # the same frames, each one line down for the %%rng_trace line
    assert "----> 4 f()" in shown and "----> 3     raise LookupError('boom')" in shown
    assert "----> 3 f()" in shown_plain and shown.count("Cell In[") == shown_plain.count("Cell In[") == 2
    assert not hasattr(traced.error_in_exec, "_render_traceback_")  # the exception is left as it was raised


def test_on_draw_raise_shows_the_draw_as_the_last_frame_of_the_traceback(shell, capsys):
    result = run(shell, "%%rng_trace -q --on-draw raise\nx = 1\nnp.random.rand()")
    from rngtrace import GlobalRNGError

    assert isinstance(result.error_in_exec, GlobalRNGError)
    shown = capsys.readouterr().out
    assert "----> 3 np.random.rand()" in shown and "rngtrace/" not in shown.split("GlobalRNGError")[0]


def test_a_syntax_error_in_a_traced_cell_names_its_cell_and_line(shell, capsys):
    result = shell.run_cell("%%rng_trace\nx = 1\nx = = 2", store_history=True)
    error = result.error_in_exec
    assert isinstance(error, SyntaxError)
    assert (shell.compile.format_code_name(error.filename), error.lineno) == (
        ("Cell", f"In[{result.execution_count}]"),
        3,
    )
    capsys.readouterr()


def test_a_cell_named_as_a_file_as_jupyter_names_it_is_labelled_as_ipython_labels_it(shell, capsys, tmp_path):
    from IPython.core.compilerop import CachingCompiler

    class KernelCompiler(CachingCompiler):
        """Names each cell as a file, as Jupyter's kernel (ipykernel) does."""

        def get_code_name(self, raw_code: str, transformed_code: str, number: int) -> str:
            return str(tmp_path / f"{abs(hash(transformed_code))}.py")

    saved = shell.compile
    shell.compile = KernelCompiler()
    try:
        result = shell.run_cell("%%rng_trace\nrandom.random()", store_history=True)
    finally:
        shell.compile = saved
    assert result.success
    assert f"random.random ×1  In[{result.execution_count}]:2 in <module>" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("np.random.rand(3)", ([], "np.random.rand(3)")),
        ("--depth 8 x = rand(8)", (["--depth", "8"], "x = rand(8)")),
        ("--streams=numpy -q -t t f()", (["--streams", "numpy", "-q", "-t", "t"], "f()")),
        ("-d 2 -- -x", (["-d", "2"], "-x")),
        ("-np.random.rand()", ([], "-np.random.rand()")),
    ],
)
def test_leading_options_are_split_from_the_statement_which_stays_verbatim(line, expected):
    assert split_options(line) == expected


def test_import_rngtrace_does_not_import_ipython():
    code = "import sys, rngtrace; print('IPython' in sys.modules, callable(rngtrace.load_ipython_extension))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "True"]
