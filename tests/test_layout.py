"""The package's shape: data flows one way, and the data never imports what draws it."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from types import ModuleType

import pytest

import rngtrace._paths
import rngtrace.diff
import rngtrace.trace


def imports_of(module: ModuleType) -> list[str]:
    """What ``module``'s source imports, as ``name`` or ``from:name`` (``.base:header``), relative ones with dots."""
    tree = ast.parse(open(module.__file__, encoding="utf-8").read())
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            source = "." * node.level + (node.module or "")
            out += [f"{source}:{alias.name}" for alias in node.names]
    return out


def imported_after(statement: str) -> set[str]:
    """The rngtrace modules a fresh interpreter has loaded after running ``statement``."""
    code = textwrap.dedent(f"""
        import sys
        {statement}
        print("\\n".join(name for name in sys.modules if name.split(".")[0] == "rngtrace"))
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return set(out.split())


@pytest.mark.parametrize("module", ["rngtrace.trace", "rngtrace.diff", "rngtrace._paths", "rngtrace"])
def test_data_modules_do_not_import_the_renderers(module):
    loaded = imported_after(f"import {module}")
    assert module in loaded
    assert not {name for name in loaded if name.split(".")[:2] == ["rngtrace", "render"]}


@pytest.mark.parametrize("module", [rngtrace.trace, rngtrace.diff, rngtrace._paths], ids=lambda m: m.__name__)
def test_data_modules_name_no_renderer_anywhere_in_their_source(module):
    # Also an import inside a method: the data must not know how it is drawn.
    assert not [name for name in imports_of(module) if "render" in name.partition(":")[0]]


def test_paths_imports_nothing_from_rngtrace():
    assert not [name for name in imports_of(rngtrace._paths) if name.startswith(("rngtrace", "."))]


def test_import_rngtrace_imports_neither_numpy_nor_torch():
    code = "import sys, rngtrace; print(sorted({'numpy', 'torch'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_renderers_share_helpers_through_base_not_each_others_private_names():
    import rngtrace.render as render

    for module in (render.text, render.html, render.diff_text):
        for name in imports_of(module):
            source, _, imported = name.partition(":")
            assert source not in (".text", ".html", ".diff_text"), f"{module.__name__} imports {name}"
            private = imported.startswith("_") and not imported.startswith("__")
            assert not private or imported == "_html_page", f"{module.__name__} imports the private {name}"
