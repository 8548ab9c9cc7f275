"""Which files are rngtrace's own, the user's, the standard library's or an installed package's.

One place for every question about a code filename: the stack capture asks
whether a frame is left out of stacks, the renderers whether it is the user's
code and how to print it short, the diff which name two checkouts agree on. Every
function takes a filename, so this module imports nothing from rngtrace, and
none of them reads the working directory unless given it: a program may have
deleted it, and ``os.path.abspath`` of a relative name would raise then.
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

#: rngtrace's own directory, with a trailing separator so ``rngtrace_extra/`` is not inside it
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep

# Directory names that hold installed third-party packages, on every platform.
_PACKAGE_DIRS = ("site-packages", "dist-packages")
#: the import system's own frames: a ``<module>`` frame right inside them is a module being imported
IMPORT_MACHINERY = ("<frozen importlib._bootstrap", "<frozen importlib._bootstrap_external")
# Code typed at a prompt is the user's, though its filename is not a path.
_INTERACTIVE = ("<stdin>", "<console>", "<ipython-input-")
# runpy's code: frozen since 3.11 ("<frozen runpy>"), a file beside os.py otherwise (3.10,
# -X frozen_modules=off). Named, not imported: most programs never load runpy.
_RUNPY = ("<frozen runpy>", os.path.join(os.path.dirname(getattr(os, "__file__", "")), "runpy.py"))
# IPython's name for cell N in a terminal shell; IPython shows it as In[N].
_IPYTHON_INPUT = r"<ipython-input-(\d+)-[0-9a-f]+>"  # compiled when first matched: no start pays for it
# Names cells that IPython gives no number in their name (Jupyter's kernel names them as files);
# set by the IPython extension, None elsewhere.
_cell_labeller: Callable[[str], str | None] | None = None


def is_own(filename: str) -> bool:
    """Tell whether code from ``filename`` is rngtrace's own; never raises."""
    # Python imports from absolute paths, so a relative name is generated code
    # (``<string>``, ``<frozen runpy>``) or the user's, never one of our modules.
    return os.path.isabs(filename) and os.path.normpath(filename).startswith(PACKAGE_DIR)


def is_hidden(filename: str) -> bool:
    """Tell whether frames of ``filename`` are left out of recorded stacks; never raises.

    rngtrace's own and runpy's: the stack of a program run with ``python -m``,
    ``runpy`` or ``rngtrace run`` ends at the program's own first frame. And
    torch.compile's machinery between a compiled call and the op it runs (see
    ``is_compile_machinery``): a dozen frames nobody edits, which would push the
    user's line past the recorded depth.
    """
    return filename in _RUNPY or is_own(filename) or is_compile_machinery(filename)


# Inductor's and AOTAutograd's packages; torch._dynamo's frames stay: they mark compiled code.
_COMPILE_PACKAGES = ("torch/_inductor/", "torch/_functorch/")


def is_compile_machinery(filename: str) -> bool:
    """Tell whether ``filename`` is torch.compile's: Inductor, AOTAutograd, or code they generated; never raises."""
    if filename.startswith("<eval_with_key>") or ":codegen(" in filename:
        return True  # FX's generated forward, AOTAutograd's generated wrappers
    tail = package_tail(filename)
    if tail is not None:
        return tail.startswith(_COMPILE_PACKAGES)
    return in_inductor_cache(filename)


def in_inductor_cache(filename: str) -> bool:
    """Tell whether ``filename`` is code Inductor wrote into its cache (``/tmp/torchinductor_<user>/...``)."""
    parts = filename.replace("\\", "/").split("/")
    if any(part.startswith("torchinductor_") for part in parts[:-1]):
        return True
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    return bool(cache) and os.path.isabs(filename) and _under(_norm(filename), _norm(cache or ""))


def label_cells(labeller: Callable[[str], str | None] | None) -> None:
    """Print code whose filename ``labeller`` names ("In[3]") by that name; None for only IPython's own form."""
    global _cell_labeller
    _cell_labeller = labeller
    _short_path.cache_clear()


def cell_label(filename: str) -> str | None:
    """The label IPython shows for a cell's code ("In[3]"), or None where ``filename`` is no cell."""
    match = re.fullmatch(_IPYTHON_INPUT, filename)  # re caches the compiled pattern
    if match:
        return f"In[{match.group(1)}]"
    return _cell_labeller(filename) if _cell_labeller is not None else None


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """Tell whether ``filename`` is code the user can change.

    Not the standard library, not an installed package, not rngtrace itself,
    and not generated code such as ``<string>`` or ``<frozen ...>``.
    """
    if filename.startswith("<"):
        return filename.startswith(_INTERACTIVE)
    if package_tail(filename) is not None or is_own(filename) or is_compile_machinery(filename):
        return False
    path = _norm(filename)
    stdlib, packages = _library_dirs()
    return not any(_under(path, d) for d in (*packages, *stdlib))


@functools.lru_cache(maxsize=4096)
def package_of(filename: str) -> str | None:
    """The top-level installed package ``filename`` belongs to ("sklearn"), "stdlib", or None.

    None is code that is neither installed nor the standard library: the user's
    own files and generated code such as ``<string>``.
    """
    if filename.startswith("<"):
        return None
    tail = package_tail(filename)
    if tail is None:
        path = _norm(filename)
        stdlib, packages = _library_dirs()
        tail = next((_relative(filename, d) for d in packages if _under(path, d)), None)
        if tail is None:
            return "stdlib" if any(_under(path, d) for d in stdlib) else None
    top = tail.split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top


def package_tail(filename: str) -> str | None:
    """The part of ``filename`` after its last site-packages/dist-packages directory, or None."""
    parts = filename.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _PACKAGE_DIRS:
            return "/".join(parts[i + 1 :])
    return None


def short_path(filename: str, cwd: str | None = None) -> str:
    """Shorten ``filename``: a cell's label, after site-packages, relative to ``cwd``, or under ``<stdlib>/``."""
    if cwd is None:
        cwd = current_dir()
    return _short_path(filename, cwd)


def current_dir() -> str:
    """Return the working directory, or "" where it no longer exists."""
    try:
        return os.getcwd()
    except OSError:
        return ""


@functools.lru_cache(maxsize=4096)
def _short_path(filename: str, cwd: str) -> str:
    label = cell_label(filename)
    if label is not None:
        return label
    if filename.startswith("<") or not os.path.isabs(filename):
        return filename  # generated code, or already relative to where Python started
    tail = package_tail(filename)
    if tail is not None:
        return tail
    path = _norm(filename)
    stdlib, packages = _library_dirs()
    for d in packages:
        if _under(path, d):
            return _relative(filename, d)
    for d in stdlib:
        if _under(path, d):
            return "<stdlib>/" + _relative(filename, d)
    if cwd and _under(path, _norm(cwd)):
        return _relative(filename, cwd)
    return filename


@functools.cache
def _library_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return (stdlib dirs, installed-package dirs), normalised, longest first."""
    # Imported here: the stack capture imports this module with rngtrace, and only rendering needs these.
    import site
    import sysconfig

    paths = sysconfig.get_paths()
    stdlib = {paths.get(k) for k in ("stdlib", "platstdlib")}
    packages = {paths.get(k) for k in ("purelib", "platlib")}
    try:
        packages.update(site.getsitepackages())
        packages.add(site.getusersitepackages())
    except AttributeError:  # site replaced by an embedding application
        pass

    def norm(dirs: set) -> tuple[str, ...]:
        return tuple(sorted({_norm(d) for d in dirs if d}, key=len, reverse=True))

    return norm(stdlib), norm(packages)


def _norm(path: str) -> str:
    # normpath, not abspath: a relative name stays relative (under no library directory)
    # instead of being read against a working directory that may be gone.
    return os.path.normcase(os.path.normpath(path))


def _under(path: str, directory: str) -> bool:
    return os.path.isabs(path) and path.startswith(directory.rstrip(os.sep) + os.sep)


def _relative(filename: str, directory: str) -> str:
    """``filename`` relative to ``directory``, with forward slashes; both are absolute."""
    return os.path.relpath(os.path.normpath(filename), directory).replace(os.sep, "/")
