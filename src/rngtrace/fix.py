"""``rngtrace fix``: turn a run's findings into a patch for the user's own code.

``rngtrace fix [--write] LOG`` reads a log saved by ``rngtrace run --json``;
``rngtrace fix [--write] -- script.py [args]`` runs the script traced first (in a
child ``rngtrace run``). Either prints a unified diff for the files of the user's
project the findings name, opened by what will change and what is left as it is,
and ``--write`` applies it. What changes is decided in the analysis layer
(``_fix_plan``); the rewriting is LibCST's (``_fix_rewrite``), an optional extra:
without it the command says what to install. A bad input is one line on stderr
and exit status 2, with nothing written.
"""

from __future__ import annotations

import argparse
import difflib
import io
import os
import subprocess
import sys
import tempfile
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ._errors import LogError
from ._fix_edits import Plan, Seed
from ._fix_plan import plan
from ._model import Event, Finding
from ._paths import current_dir, is_user_file, short_path
from ._say import PROG, add_max_log_size, say
from .sources import stream as stream_info
from .trace import Trace

INSTALL = "rngtrace fix rewrites with LibCST, which is not installed: pip install 'rngtrace[fix]'"
USAGE = f"{PROG} fix [--write] [--all] LOG\n       {PROG} fix [--write] [--all] -- script.py [args ...]"
DESCRIPTION = (
    "Rewrite the lines of your code that the findings of a run name: legacy draws to a generator of "
    "their own, library calls given their own seed. Prints a unified diff; --write applies it. "
    "LOG is a log saved with rngtrace run --json; after --, a script to run traced first."
)


class _Stop(Exception):
    """A bad input, said in one line; exit status 2, nothing written."""


@dataclass
class Result:
    """What a fix changes: per file its old and new text, and what is left as it is, and why."""

    texts: dict[str, tuple[str, str]] = field(default_factory=dict)  # path -> (old, new), changed files only
    notes: list[str] = field(default_factory=list)
    plan: Plan | None = None
    every_draw: bool = False  # --all: every draw at the user's lines, not only the findings'


def add_parser(subcommands: Any) -> argparse.ArgumentParser:
    """Add ``fix`` to the CLI's subcommands; its handler is ``command``."""
    parser = subcommands.add_parser(
        "fix",
        help="rewrite the lines the findings name (a diff; --write applies it)",
        usage=USAGE,
        description=DESCRIPTION,
    )
    parser.add_argument("--write", action="store_true", help="apply the change to your files (default: print it)")
    parser.add_argument(
        "--all",
        action="store_true",
        dest="every_draw",
        help="rewrite every draw and seed the run made at your lines, not only those the findings name",
    )
    add_max_log_size(parser)
    parser.add_argument("target", nargs=argparse.REMAINDER, metavar="LOG | -- script.py [args]")
    parser.set_defaults(handler=command)
    return parser


def command(args: argparse.Namespace) -> int:
    """Run ``rngtrace fix`` with parsed ``args``: 0 when done (with or without changes), 2 on a bad input."""
    try:
        write, target, script = _target(args)
        _need_libcst()
        trace, name = _run_traced(target) if script else _load(target[0], args.max_log_size)
        result = fix(trace, every_draw=args.every_draw)
    except _Stop as stop:
        say(f"{PROG}: error: {stop}")
        return 2
    _print(header(result, name) + diff(result))
    return _write_files(result) if write else 0


def _need_libcst() -> None:
    try:
        import libcst  # noqa: F401 - only whether it is there
    except ImportError:
        raise _Stop(INSTALL) from None


def _target(args: argparse.Namespace) -> tuple[bool, list[str], bool]:
    """(--write given, the log or the script and its arguments, whether it is a script)."""
    target, write = list(args.target), args.write
    split = target.index("--") if "--" in target else len(target)
    head, script = target[:split], target[split + 1 :]
    for flag in ("--write", "--all"):
        if flag in head:
            setattr(args, "every_draw" if flag == "--all" else "write", True)
            head = [word for word in head if word != flag]
    write = write or args.write
    if split < len(target):
        if head or not script:
            raise _Stop(f"give a log or -- and a script, not both; usage: {USAGE.splitlines()[0].strip()}")
        return write, script, True
    if len(head) != 1:
        raise _Stop(f"give one log to fix from, or -- script.py to run it traced first (see `{PROG} fix --help`)")
    if head[0].endswith(".py"):
        raise _Stop(f"{head[0]} is a script: to run it traced first, put -- before it: {PROG} fix -- {head[0]}")
    return write, head, False


def _load(path: str, max_size: int | None) -> tuple[Trace, str]:
    try:
        return Trace.load(path, max_size=max_size), path
    except LogError as error:
        raise _Stop(str(error)) from None


def _run_traced(argv: list[str]) -> tuple[Trace, str]:
    """Run ``script.py args`` under ``rngtrace run`` in a child process; its log, once it ran to the end."""
    script = " ".join(argv[:2]) if argv[0] == "-m" else argv[0]  # -m module runs as rngtrace run -m does
    if argv[0] != "-m" and not os.path.isfile(script):
        raise _Stop(f"no such script: {script!r}; check the path")
    with tempfile.TemporaryDirectory(prefix="rngtrace-fix-") as folder:
        log = os.path.join(folder, "run.json")
        say(f"{PROG}: running {script} traced, to see what it draws ...")
        command = [sys.executable, "-m", "rngtrace", "run", "--quiet", "--json", log, *argv]
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False)
        output = done.stdout.decode("utf-8", "replace")
        if output:  # the program's own output: stdout is the diff's
            sys.stderr.write(output if output.endswith("\n") else output + "\n")
        if done.returncode != 0:
            raise _Stop(f"{script} exited with status {done.returncode} (its output is above); make it run, then fix")
        if not os.path.isfile(log):
            raise _Stop(f"{script} ran but left no log (did it end with os._exit?); save one with rngtrace run --json")
        return _load(log, None)[0], script


def fix(trace: Trace, every_draw: bool = False) -> Result:
    """The change ``trace``'s findings call for: each file's new text, and what is left as it is.

    ``every_draw``: also every draw and seed at the user's lines that no finding names (``--all``).
    """
    return fix_findings(trace.events, trace.findings, every_draw)


def fix_findings(events: Sequence[Event], findings: Sequence[Finding], every_draw: bool = False) -> Result:
    """The change ``findings`` call for, made from the ``events`` they rest on."""
    from ._fix_rewrite import FileFix, Unparsable  # LibCST: only once it is known to be installed

    decided = plan(events, findings, every_draw)
    result = Result(notes=list(decided.notes), plan=decided, every_draw=every_draw)
    fixes: dict[str, FileFix] = {}
    for path, file_plan in decided.files.items():
        try:
            fixes[path] = FileFix(file_plan, _read(path))
        except (OSError, UnicodeDecodeError, SyntaxError) as error:
            result.notes.append(f"{short_path(path)} cannot be read ({error}): left as it is")
        except Unparsable as error:
            result.notes.append(str(error))
    keep = dict(decided.keep_seeds)
    for one in fixes.values():
        for stream, why in one.failed.items():
            keep.setdefault(stream, why)
    for path, one in fixes.items():
        old = _read(path)
        new = one.apply(keep)
        result.notes += one.notes
        if new == old or not is_user_file(path):  # never a library's file, the standard library's or rngtrace's
            continue
        if not _in_working_directory(path):  # a log names any path it likes: only the project's files change
            result.notes.append(f"{path} is outside the working directory: left as it is (run fix from there)")
            continue
        result.texts[path] = (old, new)
    result.notes += _kept_seeds(decided, keep)
    return result


def _kept_seeds(decided: Plan, keep: dict[str, str]) -> list[str]:
    seeded = {e.stream for f in decided.files.values() for e in f.edits if isinstance(e, Seed)}
    return [
        f"{stream}'s seed stays, the generator made beside it: {keep[stream]}" for stream in seeded if stream in keep
    ]


def _read(path: str) -> str:
    """A source file's text as Python reads it (its coding line honoured), newlines kept."""
    with open(path, "rb") as source:
        data = source.read()
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(encoding)


def header(result: Result, name: str) -> str:
    """What the diff changes and why, as ``#`` lines a patch tool skips."""
    decided = result.plan
    found = decided.addressed if decided is not None else []
    kinds = ", ".join(dict.fromkeys(f.kind for f in found))
    files = ", ".join(_shown(path) for path in result.texts) or "nothing to change"
    what = f"{len(found)} finding{'s' * (len(found) != 1)} of {name}" + (f" ({kinds})" if kinds else "")
    if result.every_draw:
        what = f"every draw at your lines in {name}" + (
            f" and {len(found)} finding{'s' * (len(found) != 1)}" if found else ""
        )
    lines = [f"rngtrace fix: {what}: {files}"]
    if result.texts:
        changes = [stream_info(s) for s in (decided.moved if decided else [])]
        said = [info.values_change for info in changes if info is not None and info.values_change]
        lines.append(
            "Each rewritten call draws from a seed of its own now, so results move once, then stay put run to run"
            + (": " + "; ".join(said) + "." if said else ".")
        )
    if result.notes:
        lines.append("Left as it is:")
        lines += [f"  - {note}" for note in dict.fromkeys(result.notes)]
    return "".join(f"# {line}\n" for line in lines)


def diff(result: Result) -> str:
    """The unified diff of every changed file, paths as ``a/`` and ``b/`` from the working directory."""
    out: list[str] = []
    for path, (old, new) in result.texts.items():
        shown = _shown(path)
        out += difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), f"a/{shown}", f"b/{shown}"
        )
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in out)


def _in_working_directory(path: str) -> bool:
    cwd = current_dir()
    return bool(cwd) and os.path.realpath(path).startswith(os.path.join(os.path.realpath(cwd), ""))


def _shown(path: str) -> str:
    cwd = current_dir()
    relative = os.path.relpath(path, cwd) if cwd else path
    return path if relative.startswith("..") else relative


def _write_files(result: Result) -> int:
    """Write each changed file; 2 where one cannot be written (said, and the rest left as they are)."""
    written = []
    for path, (_old, new) in result.texts.items():
        try:
            with open(path, "rb") as source:
                encoding, _ = tokenize.detect_encoding(source.readline)
            with open(path, "w", encoding=encoding, newline="") as out:
                out.write(new)
        except (OSError, UnicodeError) as error:
            say(f"{PROG}: error: cannot write {_shown(path)} ({getattr(error, 'strerror', None) or error}); check it")
            return 2
        written.append(_shown(path))
    if written:
        say(f"{PROG}: wrote {', '.join(written)}")
    return 0


def _print(text: str) -> None:
    try:
        sys.stdout.write(text)
    except UnicodeEncodeError:  # an ASCII terminal: characters it lacks as escapes
        encoding = getattr(sys.stdout, "encoding", None) or "ascii"
        sys.stdout.write(text.encode(encoding, "backslashreplace").decode(encoding))
    sys.stdout.flush()
