"""What pytest calls things, as the plugin's report names them: a test's id, its exemption, fixtures' code.

A wider-scoped fixture's events are its own, not the test's it ran beside: its
function's file and lines tell its teardown's frames apart, and pytest's own
xunit fixtures (``setup_module``, ``setup_class``) are named after the functions
they run. A package's ``setup_module`` has no fixture at all: pytest calls it
from its own files.
"""

from __future__ import annotations

import inspect
import os
import sys
from typing import Any

import pytest

from ._paths import short_path

#: what pytest calls in a module or a package's __init__.py, the first of each pair it finds there
MODULE_SETUP = ("setUpModule", "setup_module")
MODULE_TEARDOWN = ("tearDownModule", "teardown_module")
#: pytest's own modules: a package's setup_module is reported as the package's only where pytest called it
PYTEST_DIR = os.path.dirname(inspect.getfile(pytest.Package)) + os.sep


def exempt(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("rng_global")
    if marker is not None:
        reason = marker.kwargs.get("reason") or (marker.args[0] if marker.args else "")
        return f"marked rng_global{': ' + str(reason) if reason else ''}"
    if "rng_trace" in getattr(item, "fixturenames", ()):
        return "uses the rng_trace fixture"
    return None


def item_id(item: pytest.Item) -> str:
    """The test's node id, as pytest's own; outside the rootdir, with its file as given from the invocation dir.

    There pytest's id starts from the path given on the command line (``::test_x`` for a file),
    which names no file: the path from where pytest was run names it, and runs it again.
    """
    rootpath, nodeid = item.config.rootpath, item.nodeid
    path = item.path
    if path == rootpath or rootpath in path.parents:
        return nodeid
    try:
        where = os.path.relpath(path, item.config.invocation_params.dir)
    except ValueError:  # another drive
        where = str(path)
    rest = nodeid.partition("::")[2]
    return f"{where.replace(os.sep, '/')}::{rest}" if rest else where.replace(os.sep, "/")


def _xunit_names(obj: Any, setup: tuple[str, ...], teardown: tuple[str, ...]) -> str:
    """Name the setup and teardown functions pytest finds in ``obj`` (``setup_module/teardown_module``)."""
    found = (next((name for name in names if callable(getattr(obj, name, None))), None) for names in (setup, teardown))
    return "/".join(name for name in found if name)


def package_label(init_file: str, config: pytest.Config) -> str:
    """``setup_module (package scope, sklearn/__init__.py)``: a package's record's label."""
    module = next((m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == init_file), None)
    names = _xunit_names(module, MODULE_SETUP, MODULE_TEARDOWN) if module is not None else ""
    return f"{names or 'setup_module'} (package scope, {short_path(init_file, str(config.rootpath))})"


#: pytest's fixtures for xunit functions: their name's prefix -> (where the functions are, their names)
_XUNIT = {
    "_xunit_setup_module_fixture_": ("module", MODULE_SETUP, MODULE_TEARDOWN),
    "_xunit_setup_class_fixture_": ("cls", ("setup_class",), ("teardown_class",)),
}


def code_of(fixturedef: Any, request: Any) -> tuple[str, str, int, int]:
    """(label, file, first line, last line) of a wider fixture's function, to know its teardown's frames."""
    where = fixturedef.baseid or "conftest"
    label = f"fixture '{fixturedef.argname}' ({fixturedef.scope} scope, {where})"
    for prefix, (owner, setup, teardown) in _XUNIT.items():
        # A setup_module is run by a fixture of pytest's own: named after the functions, not the fixture.
        if fixturedef.argname.startswith(prefix):
            names = _xunit_names(getattr(request, owner, None), setup, teardown)
            label = f"{names or fixturedef.argname} ({fixturedef.scope} scope, {where})"
    func = inspect.unwrap(fixturedef.func)
    code = getattr(func, "__code__", None)
    if code is None:
        return label, "", 0, 0
    last = max((line for *_x, line in code.co_lines() if line is not None), default=code.co_firstlineno)
    return label, code.co_filename, code.co_firstlineno, last


def in_code(stack: tuple, code: tuple[str, str, int, int]) -> bool:
    _label, filename, first, last = code
    return bool(filename) and any(f.filename == filename and first <= f.lineno <= last for f in stack)
