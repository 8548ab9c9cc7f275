"""Around every test: prove rngtrace left nothing behind."""

from __future__ import annotations

import atexit
import os
import random
import sys
import textwrap
import threading

import pytest

from rngtrace._hub import HUB
from rngtrace.sources import declared

# Every namespace a source patches; compared attribute by attribute, by identity. Each declared
# stream's module is one (a package's stream too); these are the rest of what the built-in ones patch.
_PATCHED = (
    "random",
    "numpy.random",
    "numpy.random.mtrand",
    "torch",
    "torch.random",
    "torch.nn.functional",
    "torch.nn.init",
    "torch.cuda",
    "torch.cuda.random",
)
_WATCHED = tuple(dict.fromkeys((*_PATCHED, *(info.module for info in declared().values()))))


def _namespaces() -> dict[str, dict[str, object]]:
    out = {}
    for name in _WATCHED:
        module = sys.modules.get(name)
        if module is not None:
            # Not __warningregistry__: CPython's warnings write it in the module whose code runs when a
            # warning comes (a coroutine collected unawaited while random.py runs), rngtrace or not.
            out[name] = {k: v for k, v in vars(module).items() if k != "__warningregistry__"}
    mtrand = sys.modules.get("numpy.random.mtrand")
    if mtrand is not None:
        out["numpy.random.RandomState"] = dict(vars(mtrand.RandomState))
    out["random.Random"] = dict(vars(random.Random))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "Tensor"):
        out["torch.Tensor"] = dict(vars(torch.Tensor))
        out["torch.Generator"] = dict(vars(torch._C.Generator))
    return out


def _registered_with_atexit(fn: object) -> bool:
    """Whether ``fn`` is registered with atexit: asked by taking it out (atexit's reference goes), and put back."""
    held = sys.getrefcount(fn)
    atexit.unregister(fn)
    if sys.getrefcount(fn) == held:
        return False
    atexit.register(fn)
    return True


def _process_hooks() -> dict[str, object]:
    """What the hooks for child processes replace or register: os._exit, atexit, BaseProcess.start, the queues."""
    hooks: dict[str, object] = {
        "os._exit": os._exit,
        "rngtrace's atexit handler": _registered_with_atexit(HUB.hooks.at_exit),
    }
    process = sys.modules.get("multiprocessing.process")
    if process is not None:
        hooks["BaseProcess.start"] = vars(process.BaseProcess).get("start")
    queues = sys.modules.get("multiprocessing.queues")
    if queues is not None:
        for cls in (queues.SimpleQueue, queues.Queue):
            for name in ("put", "get"):
                hooks[f"{cls.__name__}.{name}"] = vars(cls).get(name)
    return hooks


def _global_hooks() -> dict[str, object]:
    hooks: dict[str, object] = {
        "profile": sys.getprofile(),
        "threading.profile": threading.getprofile() if hasattr(threading, "getprofile") else None,
        **_process_hooks(),
    }
    if sys.version_info >= (3, 12):
        hooks["monitoring"] = tuple(sys.monitoring.get_tool(i) for i in range(6))
    torch = sys.modules.get("torch")
    if torch is not None and hasattr(torch, "_C"):
        hooks["torch function modes"] = torch._C._len_torch_function_stack()
    speedups = sys.modules.get("rngtrace._speedups")
    if speedups is not None:
        hooks["builtins recording in place"] = speedups.hooked_builtins()
    from rngtrace import _postimport

    hooks["post-import hooks"] = _postimport.describe()
    hooks["post-import finder"] = _postimport.installed()
    return hooks


@pytest.fixture(autouse=True)
def nothing_left_behind():
    """Fail a test that leaves a hook, a patched attribute or an active trace behind."""
    before_ns = _namespaces()
    before_hooks = _global_hooks()
    yield
    assert HUB.hooked() == {}, f"the hub still holds hooks: {HUB.hooked()}"
    assert not [t for t in threading.enumerate() if t.name == "rngtrace-sweeper"], (
        "the sweeper thread outlived the trace"
    )
    speedups = sys.modules.get("rngtrace._speedups")
    if speedups is not None and not HUB.rec.hot.now.active:
        # Past max_events the C recorder remembers the frames that drew: none once nothing records.
        assert speedups.forget_sites(False) == 0, "the call-site memo still holds frames"
    after_hooks = _global_hooks()
    for key, value in before_hooks.items():
        assert after_hooks.get(key) == value, f"{key} changed: {value!r} -> {after_hooks.get(key)!r}"
    if "post-import hooks" in after_hooks:
        assert not any(after_hooks["post-import hooks"].values()), after_hooks["post-import hooks"]
    ours = [key for key, value in _process_hooks().items() if getattr(value, "__module__", "").startswith("rngtrace")]
    assert not ours and not after_hooks["rngtrace's atexit handler"], f"rngtrace's hooks left in place: {ours}"
    after_ns = _namespaces()
    for name, attrs in before_ns.items():
        now = after_ns.get(name, {})
        changed = [k for k, v in attrs.items() if k in now and now[k] is not v and callable(v)]
        assert not changed, f"{name} attributes not restored: {changed}"


@pytest.fixture
def here(tmp_path, monkeypatch):
    """Work in a fresh directory; returns a function making a user file path inside it."""
    monkeypatch.chdir(tmp_path)
    return lambda *parts: str(tmp_path.joinpath(*parts))


@pytest.fixture
def package(tmp_path, monkeypatch):
    """Write ``name.py`` with ``source`` into a site-packages folder on sys.path; return the module."""
    folder = tmp_path / "site-packages"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))

    def make(name: str, source: str):
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
        __import__(name)
        monkeypatch.setitem(sys.modules, name, sys.modules[name])
        return sys.modules[name]

    return make
