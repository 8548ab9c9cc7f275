"""Which frames are the user's own code, and how to print a path short."""

from __future__ import annotations

import functools
import os
import site
import sysconfig

from ..trace import Frame

# Directory names that hold installed third-party packages, on every platform.
_PACKAGE_DIRS = ("site-packages", "dist-packages")
# Code typed at a prompt is the user's, though its filename is not a path.
_INTERACTIVE = ("<stdin>", "<console>", "<ipython-input-")
_RNGTRACE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@functools.lru_cache(maxsize=None)
def _library_dirs() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Return (stdlib dirs, installed-package dirs), normalised, longest first."""
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
    return os.path.normcase(os.path.abspath(path))


def _under(path: str, directory: str) -> bool:
    return path.startswith(directory.rstrip(os.sep) + os.sep)


def _package_tail(filename: str) -> str | None:
    """The part of ``filename`` after its last site-packages/dist-packages directory."""
    parts = filename.replace("\\", "/").split("/")
    for i in range(len(parts) - 2, -1, -1):
        if parts[i] in _PACKAGE_DIRS:
            return "/".join(parts[i + 1 :])
    return None


@functools.lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """Tell whether ``filename`` is code the user can change.

    Not the standard library, not an installed package, not rngtrace itself,
    and not generated code such as ``<string>`` or ``<frozen ...>``.
    """
    if filename.startswith("<"):
        return filename.startswith(_INTERACTIVE)
    if _package_tail(filename) is not None:
        return False
    path = _norm(filename)
    stdlib, packages = _library_dirs()
    if any(_under(path, d) for d in (*packages, *stdlib)):
        return False
    return not _under(path, _norm(_RNGTRACE_DIR))


def user_frame(stack: tuple[Frame, ...]) -> Frame | None:
    """The first (innermost) frame of ``stack`` in the user's own code, or None."""
    for frame in stack:
        if is_user_file(frame.filename):
            return frame
    return None


@functools.lru_cache(maxsize=4096)
def _short_path(filename: str, cwd: str) -> str:
    if filename.startswith("<") or not os.path.isabs(filename):
        return filename  # generated code, or already relative to where Python started
    tail = _package_tail(filename)
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


def _relative(filename: str, directory: str) -> str:
    return os.path.relpath(os.path.abspath(filename), directory).replace(os.sep, "/")


def short_path(filename: str, cwd: str | None = None) -> str:
    """Shorten ``filename``: after site-packages, relative to ``cwd``, or under ``<stdlib>/``."""
    if cwd is None:
        cwd = current_dir()
    return _short_path(filename, cwd)


def current_dir() -> str:
    """The working directory, or "" where it no longer exists."""
    try:
        return os.getcwd()
    except OSError:
        return ""


def describe(frame: Frame | None, cwd: str) -> str:
    """``path:line in function`` with the path shortened, or an em dash for no frame."""
    if frame is None:
        return "—"
    return f"{short_path(frame.filename, cwd)}:{frame.lineno} in {frame.function}"


@functools.lru_cache(maxsize=4096)
def package_of(filename: str) -> str | None:
    """The top-level installed package ``filename`` belongs to ("sklearn"), "stdlib", or None.

    None is code that is neither installed nor the standard library: the user's
    own files and generated code such as ``<string>``.
    """
    if filename.startswith("<"):
        return None
    tail = _package_tail(filename)
    if tail is None:
        path = _norm(filename)
        stdlib, packages = _library_dirs()
        tail = next((_relative(filename, d) for d in packages if _under(path, d)), None)
        if tail is None:
            return "stdlib" if any(_under(path, d) for d in stdlib) else None
    top = tail.split("/", 1)[0]
    return top[:-3] if top.endswith(".py") else top
