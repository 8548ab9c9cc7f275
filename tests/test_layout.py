"""The package's shape: data flows one way, and the data never imports what draws it."""

from __future__ import annotations

import ast
import pathlib
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


# -- the layers: every import runs down (or to an earlier file of its own layer) -----------

#: The package's layers, lowest first, each module in the order its layer may import it
#: (docs/development.md describes them). A new module is added here, in its place.
LAYERS = (
    ("leaves", ("_version", "_errors", "_paths", "_pids", "_streams", "_spool", "_kinds", "_model", "_rows", "_store")),
    ("hot path", ("_threads", "_caller", "_speedups", "_hotpath", "_codes", "_stack")),
    (
        "sources",
        (
            "sources._source",
            "sources._wrapping",
            "sources._torch_tensor",
            "sources._recorder",
            "sources._restoring",
            "sources._base",
            "sources._entropy",
            "sources._inplace",
            "sources._numpy_views",
            "sources._torch_state",
            "sources._torch_ops",
            "sources._torch_wrappers",
            "sources.random_stream",
            "sources.numpy_stream",
            "sources.torch_stream",
            "sources",
            "sources.random",
            "sources.numpy",
            "sources._torch_patches",
            "sources.torch",
        ),
    ),
    (
        "hub",
        (
            "_hublock",
            "_blocks",
            "_patches",
            "_postimport",
            "_hooks",
            "_handed",
            "_prebound",
            "_ondraw",
            "_record",
            "_catchall_common",
            "_catchall_monitoring",
            "_catchall_profile",
            "_catchall",
            "_lone",
            "_digests",
            "_session",
            "_blockend",
            "_roles",
            "_childlogs",
            "_spawned",
            "_processes",
            "_hubstreams",
            "_hubchildren",
            "_hub",
            "_subprocess",
        ),
    ),
    (
        "analysis",
        (
            "_words",
            "_logfields",
            "_logjson",
            "_logfile",
            "_callables",
            "_yours",
            "_fixes",
            "_duplicates",
            "diff",
            "_divergent",
            "_seeds",
            "_seed_findings",
            "_start_findings",
            "_call_findings",
            "_findings",
            "_reproduce",
            "_fix_edits",
            "_fix_plan",
        ),
    ),
    ("trace", ("trace",)),
    (
        "renderers",
        (
            "render.base",
            "render._html_page",
            "render._html_data",
            "render.text",
            "render.html",
            "render.diff_text",
            "render.check_text",
            "render",
        ),
    ),
    (
        "faces",
        (
            "_say",
            "_logdir",
            "_options",
            "tracer",
            "isolate",
            "_ipython",
            "_cli_outputs",
            "ranks",
            "_cli_run",
            "check",
            "_fix_syntax",
            "_fix_find",
            "_fix_rewrite",
            "fix",
            "cli",
            "_pytest_record",
            "_pytest_report",
            "_pytest_items",
            "_pytest_assign",
            "_pytest_tracer",
            "pytest_plugin",
            "__main__",
            "",
        ),
    ),
)
_PLACE = {
    f"rngtrace.{name}".rstrip("."): (layer, position)
    for layer, (_, names) in enumerate(LAYERS)
    for position, name in enumerate(names)
}
_ROOT = pathlib.Path(rngtrace._paths.__file__).parent


def _modules() -> dict[str, pathlib.Path]:
    """Every module of the package, by dotted name."""
    found = {}
    for path in sorted(_ROOT.rglob("*.py")):
        parts = path.relative_to(_ROOT.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _imports(name: str, path: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """(line, rngtrace module imported, name taken from it) for every import in ``path``, at any depth."""
    modules = _modules()
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name, None) for alias in node.names if alias.name.split(".")[0] == "rngtrace"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module or ""
            if source.split(".")[0] != "rngtrace":
                continue
            for alias in node.names:
                full = f"{source}.{alias.name}"
                out.append((node.lineno, full if full in modules or full in _PLACE else source, alias.name))
    return out


def test_every_module_has_its_place_in_a_layer():
    assert sorted(set(_modules()) - set(_PLACE)) == []


def test_no_import_lazy_or_not_runs_up_a_layer_or_ahead_in_its_own():
    wrong = []
    for name, path in _modules().items():
        for line, target, _taken in _imports(name, path):
            if target not in _PLACE:
                wrong.append(f"{name}:{line} imports {target}, which has no place in LAYERS")
            elif _PLACE[target] >= _PLACE[name]:
                wrong.append(
                    f"{name}:{line} imports {target} ({LAYERS[_PLACE[target][0]][0]}) from {LAYERS[_PLACE[name][0]][0]}"
                )
    assert wrong == []


def test_no_module_imports_another_modules_private_name():
    wrong = [
        f"{name}:{line} imports {taken} from {target}"
        for name, path in _modules().items()
        for line, target, taken in _imports(name, path)
        if taken and taken.startswith("_") and not taken.startswith("__") and not target.endswith("." + taken)
    ]
    assert wrong == []


# Private names of other libraries' objects that rngtrace must read (multiprocessing's context name).
_FOREIGN_PRIVATE = frozenset({"_name"})


def _own_names(tree: ast.AST) -> set[str]:
    """The names a module defines: functions, classes, variables, arguments, its own attributes, slots."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names.add(node.value)  # __slots__ entries
    return names


def test_no_module_reads_a_private_attribute_another_module_defines():
    trees = {name: ast.parse(path.read_text(encoding="utf-8")) for name, path in _modules().items()}
    own = {name: _own_names(tree) for name, tree in trees.items()}
    defined_by: dict[str, set[str]] = {}
    for name, names in own.items():
        for attr in names:
            if attr.startswith("_") and not attr.startswith("__"):
                defined_by.setdefault(attr, set()).add(name)
    wrong = []
    for name, tree in trees.items():
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
                and node.attr not in own[name]
                and node.attr in defined_by
                and node.attr not in _FOREIGN_PRIVATE
            ):
                wrong.append(
                    f"{name}:{node.lineno} reads .{node.attr} (defined in {', '.join(sorted(defined_by[node.attr]))})"
                )
    assert wrong == []


def test_the_c_accelerator_is_loaded_in_one_place():
    loaders = [
        name
        for name, path in _modules().items()
        for _line, target, _taken in _imports(name, path)
        if target == "rngtrace._speedups"
    ]
    assert loaders == ["rngtrace._hotpath"]
