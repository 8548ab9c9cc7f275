"""Past max_events only a stack's call-site form is interned: it names the same lines as the whole stack.

The call-site table and the findings read a stack's calling frame, its first frame in the user's
own code, the module being imported and the package a draw came from. ``StackTable.capture_site``
keeps the frames those need and no more, in C and in Python alike.
"""

from __future__ import annotations

import functools
import os
import sys
import sysconfig
import types

import pytest

from rngtrace import _stack
from rngtrace._stack import StackTable
from rngtrace._yours import import_of, user_frame
from rngtrace.render.base import called_at, your_code

needs_c = pytest.mark.skipif(_stack._c_site_key is None, reason="the C accelerator is not built or is turned off")
DEPTH = 16


def _library_call(filename: str):
    """A function compiled as if installed at ``filename``: it calls ``cb`` with its own running frame."""
    namespace: dict = {"sys": sys}
    exec(compile("def call(cb):\n    return cb(sys._getframe())\n", filename, "exec"), namespace)
    return namespace["call"]


def _forms(frame, raw_limit: int = 2 * DEPTH) -> tuple[tuple, tuple]:
    """(call-site form, whole stack) of ``frame``, resolved, from one table; the whole as ``capture_flat`` walks it."""
    table = StackTable()
    site = table.resolve(table.capture_site(frame, DEPTH, raw_limit), DEPTH)
    whole = table.resolve(table.capture(frame, DEPTH), DEPTH)
    return site, whole


def _assert_same_site(site: tuple, whole: tuple) -> None:
    assert site == whole[: len(site)]
    assert user_frame(site) == user_frame(whole)
    assert import_of(site) == import_of(whole)
    cwd = os.getcwd()
    assert (called_at(site, cwd), your_code(site, cwd)) == (called_at(whole, cwd), your_code(whole, cwd))


@pytest.fixture(params=["c", "python"])
def walk(request, monkeypatch):
    """Each test runs with the C key and with the Python walk's."""
    if request.param == "c":
        if _stack._c_site_key is None:
            pytest.skip("the C accelerator is not built or is turned off")
    else:
        monkeypatch.setattr(_stack, "_c_site_key", None)
    return request.param


def test_a_draw_in_the_users_own_function_keeps_only_that_frame(walk):
    site, whole = _forms(sys._getframe())
    assert len(site) == 1 and len(whole) > 1
    _assert_same_site(site, whole)


def test_a_draw_inside_a_library_keeps_the_frames_out_to_the_users_line(walk):
    call = _library_call(os.path.join(sysconfig.get_paths()["purelib"], "somelib", "core.py"))
    site, whole = call(_forms)
    assert [f.function for f in site] == ["call", sys._getframe().f_code.co_name]
    _assert_same_site(site, whole)


def test_a_draw_at_a_modules_import_keeps_its_module_frame_and_the_import_systems(walk, tmp_path, monkeypatch):
    probe = types.ModuleType("_site_probe")
    probe.forms = _forms  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "_site_probe", probe)
    (tmp_path / "imported_here.py").write_text(
        "import sys\nimport _site_probe\ndef f():\n    return _site_probe.forms(sys._getframe())\nRESULT = f()\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "imported_here", raising=False)
    import imported_here  # type: ignore[import-not-found]

    site, whole = imported_here.RESULT
    assert [f.function for f in site[:2]] == ["f", "<module>"] and len(site) == 3
    assert import_of(site) is not None and import_of(site).module == "imported_here"
    _assert_same_site(site, whole)


def test_a_stack_with_no_user_frame_is_kept_whole(walk):
    namespace: dict = {"sys": sys}
    source = "def outer(cb):\n    return inner(cb)\ndef inner(cb):\n    return cb(sys._getframe())\n"
    exec(compile(source, os.path.join(sysconfig.get_paths()["purelib"], "somelib", "two.py"), "exec"), namespace)

    def two_frames(frame):
        # A depth of two: both recorded frames are the library's, none is the user's.
        table = StackTable()
        return table.resolve(table.capture_site(frame, 2, 0), 2), table.resolve(table.capture(frame, 2, {}), 2)

    site, whole = namespace["outer"](two_frames)
    assert site == whole and [f.function for f in site] == ["inner", "outer"]
    assert user_frame(site) is None


def test_distinct_stacks_through_one_user_line_share_one_form(walk):
    table = StackTable()
    callers = [_library_call(os.path.join(sysconfig.get_paths()["purelib"], "somelib", f"m{i}.py")) for i in range(20)]
    sids = set()

    def draw_here(_library_frame):
        sids.add(table.capture_site(sys._getframe(), DEPTH))  # one line, called from 20 distinct stacks

    for caller in callers:
        caller(draw_here)
    assert len(sids) == 1
    assert table.size() == 2  # the form's one node and its key: no node for any other frame of the 20 stacks


@needs_c
def test_the_c_key_and_the_python_key_give_the_same_forms(monkeypatch):
    call = _library_call(os.path.join(sysconfig.get_paths()["purelib"], "somelib", "core.py"))
    results = []
    for c_key in (_stack._c_site_key, None):  # from one line: the forms differ only if the keys do
        monkeypatch.setattr(_stack, "_c_site_key", c_key)
        results.append(call(_forms))
    assert results[0] == results[1]


@needs_c
def test_the_c_key_asks_python_for_a_code_it_has_not_seen():
    table = StackTable()
    frame = sys._getframe()
    assert _stack._c_site_key(frame, DEPTH, 0, table.site_state) is NotImplemented
    table.site_frames(frame, DEPTH)  # notes every code on the way
    key = _stack._c_site_key(frame, DEPTH, 0, table.site_state)
    assert isinstance(key, bytes) and len(key) == 16  # one frame: the test's own


def test_a_form_walks_no_further_than_the_flat_capture_it_stands_for(walk):
    from rngtrace._paths import PACKAGE_DIR

    # rngtrace's own frames are hidden: 20 of them between a library frame and the test's own.
    namespace: dict = {"sys": sys}
    source = "def h(cb, n):\n    return cb() if n == 0 else h(cb, n - 1)\n"
    exec(compile(source, PACKAGE_DIR + "_hidden.py", "exec"), namespace)
    call = _library_call(os.path.join(sysconfig.get_paths()["purelib"], "somelib", "deep.py"))

    def forms(frame):
        table = StackTable()
        flat = table.resolve(table.capture_flat(frame, 4), 4)  # walks 8 frames: the library's, then hidden ones
        return flat, table.resolve(table.capture_site(frame, 4, 8), 4), table.resolve(table.capture_site(frame, 4), 4)

    flat, bounded, unbounded = namespace["h"](functools.partial(call, forms), 20)
    assert [f.function for f in flat] == ["call"]  # the test's own frame is past the 8 walked
    assert bounded == flat
    assert [f.function for f in unbounded] == ["call", sys._getframe().f_code.co_name]
