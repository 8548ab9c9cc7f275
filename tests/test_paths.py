"""rngtrace._paths: which files are rngtrace's own, the user's, the stdlib's or a package's, and their short names."""

from __future__ import annotations

import os
import sysconfig

import rngtrace.trace
from rngtrace._paths import PACKAGE_DIR, is_own, is_user_file, package_of, package_tail, short_path

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
