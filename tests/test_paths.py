"""rngtrace._paths: which files are rngtrace's own, the user's, the stdlib's or a package's, and their short names."""

from __future__ import annotations

import os
import random
import runpy
import sysconfig
import uuid

import pytest

import rngtrace._paths
import rngtrace.trace
from rngtrace import rng_trace
from rngtrace._paths import (
    PACKAGE_DIR,
    is_hidden,
    is_own,
    is_user_file,
    label_cells,
    package_of,
    package_tail,
    short_path,
)

SITE = sysconfig.get_paths()["purelib"]
STDLIB = sysconfig.get_paths()["stdlib"]
SKLEARN = os.path.join(SITE, "sklearn", "utils", "_indexing.py")
TORCH_LINEAR = "/opt/conda/lib/python3.11/site-packages/torch/nn/modules/linear.py"
RANDOM_PY = os.path.join(STDLIB, "random.py")


# -- rngtrace's own files -------------------------------------------------------------


def test_package_dir_is_rngtraces_directory_with_a_trailing_separator():
    assert PACKAGE_DIR == os.path.dirname(rngtrace.trace.__file__) + os.sep


def test_rngtraces_modules_are_its_own_and_nothing_else_is():
    assert is_own(rngtrace.trace.__file__)
    assert is_own(os.path.join(PACKAGE_DIR, "sources", "numpy.py"))
    assert is_own(os.path.join(PACKAGE_DIR, "render", "..", "_hub.py"))
    assert not is_own(PACKAGE_DIR.rstrip(os.sep) + "_extra" + os.sep + "x.py")  # a sibling named alike
    assert not is_own(os.path.join(PACKAGE_DIR, "..", "elsewhere.py"))
    assert not is_own(RANDOM_PY)


def test_relative_and_generated_names_are_not_own_and_never_read_the_working_directory(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # os.getcwd() now raises, and os.path.abspath("x") with it
    for name in ("<frozen runpy>", "<string>", "script.py", "rngtrace/trace.py", ""):
        assert not is_own(name)
    assert is_own(rngtrace.trace.__file__)


def test_a_traced_draw_after_the_working_directory_is_deleted_is_recorded(tmp_path, monkeypatch, capsys):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()  # as a TemporaryDirectory a test chdir'ed into leaves it
    # Names never seen before in this process, so no cached answer hides a lookup.
    token = uuid.uuid4().hex
    generated = compile("random.random()", f"<generated {token}>", "exec")
    relative = compile("random.random()", f"relative_{token}.py", "exec")
    with rng_trace() as trace:
        for _ in range(300):  # past the first walks, into whatever frame cache this Python keeps
            exec(generated)
            exec(relative)
    assert len(trace.draws) == 600
    assert {e.stack[0].filename for e in trace.draws} == {f"<generated {token}>", f"relative_{token}.py"}
    assert f"relative_{token}.py:1 in <module>" in capsys.readouterr().err  # and the log prints


def test_rngtrace_and_runpy_frames_are_hidden_and_nothing_else_is():
    assert is_hidden(rngtrace.trace.__file__)
    assert is_hidden("<frozen runpy>")  # 3.11+
    assert is_hidden(runpy.__file__)  # 3.10, or -X frozen_modules=off
    for name in (random.__file__, "<string>", "<frozen importlib._bootstrap>", "runpy.py", "<ipython-input-1-0a>"):
        assert not is_hidden(name)


# -- the user's code ------------------------------------------------------------------


def test_generated_stdlib_package_and_rngtrace_files_are_not_user_code(here):
    assert not is_user_file("<string>")
    assert not is_user_file("<frozen importlib._bootstrap>")
    assert not is_user_file(RANDOM_PY)
    assert not is_user_file(rngtrace.trace.__file__)
    assert not is_user_file("/home/u/.venv/lib/python3.12/dist-packages/scipy/stats/_x.py")
    assert is_user_file("<stdin>")
    assert is_user_file(here("story.py"))


def test_a_relative_name_is_user_code_even_without_a_working_directory(tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    assert is_user_file("exec_relative_name.py")
    assert package_of("exec_relative_name.py") is None
    assert short_path("exec_relative_name.py") == "exec_relative_name.py"


def test_package_of_names_the_top_level_package_or_stdlib():
    assert package_of(SKLEARN) == "sklearn"
    assert package_of(TORCH_LINEAR) == "torch"
    assert package_of(os.path.join(SITE, "six.py")) == "six"
    assert package_of(RANDOM_PY) == "stdlib"
    assert package_of("<string>") is None
    assert package_of("/srv/elsewhere/job.py") is None


def test_package_tail_is_the_path_after_the_last_site_packages():
    assert package_tail(TORCH_LINEAR) == "torch/nn/modules/linear.py"
    assert package_tail("C:\\venv\\Lib\\site-packages\\numpy\\random\\x.py") == "numpy/random/x.py"
    assert package_tail("/home/u/project/model.py") is None


# -- short names ----------------------------------------------------------------------


def test_paths_inside_working_directory_are_relative(here):
    assert short_path(here("pkg", "model.py")) == os.path.join("pkg", "model.py")


def test_site_packages_paths_keep_only_the_package_part():
    assert short_path(SKLEARN) == "sklearn/utils/_indexing.py"
    assert short_path(TORCH_LINEAR) == "torch/nn/modules/linear.py"


def test_stdlib_paths_are_marked_as_stdlib(here):
    assert short_path(RANDOM_PY) == "<stdlib>/random.py"


def test_paths_outside_working_directory_and_libraries_stay_absolute(here):
    assert short_path("/srv/elsewhere/job.py") == "/srv/elsewhere/job.py"


def test_an_ipython_cell_prints_as_ipython_labels_it():
    assert short_path("<ipython-input-12-0123456789ab>") == "In[12]"
    assert short_path("<ipython-input-12>") == "<ipython-input-12>"  # not IPython's form: left as it is


@pytest.fixture
def labeller():
    """Cells named as files, as Jupyter's kernel names them, with their labels."""
    cells = {"/tmp/ipykernel_41/2836117.py": "In[7]"}
    before = rngtrace._paths._cell_labeller  # a shell's, where the IPython tests ran first
    label_cells(cells.get)
    yield
    label_cells(before)


def test_a_cell_named_as_a_file_prints_as_the_shell_labels_it(labeller):
    assert short_path("/tmp/ipykernel_41/2836117.py") == "In[7]"
    assert short_path("/tmp/ipykernel_41/other.py") == "/tmp/ipykernel_41/other.py"
