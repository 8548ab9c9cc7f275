"""IPython and Jupyter: ``%load_ext rngtrace``, then ``%%rng_trace`` or ``%rng_trace statement``.

The magic runs the code as IPython's own ``%%time`` does (IPython syntax
transformed, the last expression's value returned so the cell shows it) inside
``rng_trace``, which prints the draw log to stderr, under the cell. The code
is compiled as part of the cell that holds it, under IPython's name for that
cell and at its lines there, so the log and tracebacks name the cell and line
IPython shows; no stack or traceback goes past the magic into IPython. Only
imported by ``load_ipython_extension``: ``import rngtrace`` never imports IPython.
"""

from __future__ import annotations

import ast
import linecache
import os
import re
import sys
from types import FrameType, TracebackType
from typing import Any

import IPython
from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser

from ._codes import program_entry
from ._paths import is_own, label_cells
from .tracer import RngTrace

_IPYTHON_DIR = os.path.dirname(os.path.abspath(IPython.__file__)) + os.sep

# Leading ``--name value``, ``--name=value`` and flag options; the rest of a line is Python.
_NAME = re.compile(r"\s*(--?[A-Za-z][\w-]*)(?=[=\s]|$)")
_VALUE = re.compile(r"(?:=|\s+)(\S+)")
_END_OF_OPTIONS = re.compile(r"\s*--(?:\s+|$)")
_FLAGS = ("-q", "--quiet")


def _parser() -> MagicArgumentParser:
    parser = MagicArgumentParser(prog="%rng_trace", add_help=False)
    parser.add_argument("-s", "--streams", help="comma-separated: random, numpy, torch (default: all)")
    parser.add_argument("-d", "--depth", type=int, default=16, help="frames kept per event")
    parser.add_argument("--on-draw", default="log", help="log, warn or raise")
    parser.add_argument("--max-events", type=int, default=100_000, help="events kept one by one")
    parser.add_argument("-t", "--trace", metavar="NAME", help="store the Trace in the namespace as NAME")
    parser.add_argument(*_FLAGS, action="store_true", help="print no log (useful with --trace)")
    return parser


def split_options(line: str) -> tuple[list[str], str]:
    """Split a magic's line into its leading option tokens and the Python statement after them."""
    tokens: list[str] = []
    rest = line
    while True:
        end = _END_OF_OPTIONS.match(rest)
        if end:
            return tokens, rest[end.end() :]
        name = _NAME.match(rest)
        value = _VALUE.match(rest, name.end()) if name and name.group(1) not in _FLAGS else None
        if name is None or (value is None and name.group(1) not in _FLAGS):
            return tokens, rest.strip()
        tokens += [name.group(1)] + ([value.group(1)] if value else [])
        rest = rest[(value or name).end() :]


@magics_class
class RngTraceMagics(Magics):
    """``%rng_trace`` and ``%%rng_trace``."""

    @property
    def _shell(self) -> Any:
        """The shell running the magic (IPython types it optional; a registered magic always has one)."""
        return self.shell

    @line_cell_magic
    @program_entry  # IPython's frames and the cell's call of the magic are not the cell's code
    def rng_trace(self, line: str = "", cell: str | None = None) -> Any:
        """Run a statement or a cell under rng_trace and print its draw log under it.

        Usage::

          %rng_trace [options] statement
          %%rng_trace [options]
          cell body

        Options, as for rngtrace.rng_trace:
          -s, --streams S     comma-separated: random, numpy, torch (default: all)
          -d, --depth N       frames kept per event (default 16)
          --on-draw MODE      log, warn or raise (default log)
          --max-events N      events kept one by one (default 100000)
          -t, --trace NAME    store the Trace in the namespace as NAME
          -q, --quiet         print no log (useful with --trace)

        The value of a last expression is returned, as %time does. ``--`` ends
        the options when a statement itself starts with ``-``.
        """
        tokens, statement = split_options(line)
        options = _parser().parse_args(tokens)
        if cell is not None and statement:
            raise UsageError(f"%%rng_trace takes options only on its line, not {statement!r}; put the code in the cell")
        source = cell if cell is not None else statement
        if not source.strip():
            raise UsageError("nothing to run: %rng_trace statement, or %%rng_trace above a cell")
        streams = options.streams.split(",") if options.streams else None
        try:
            tracer = RngTrace(
                streams=streams,
                depth=options.depth,
                on_draw=options.on_draw,
                print=not options.quiet,
                max_events=options.max_events,
            )
        except ValueError as error:
            raise UsageError(str(error)) from None
        run, last = self._compile(source, cell is not None, sys._getframe())
        namespace = self._shell.user_ns
        with tracer as trace:
            if options.trace:
                namespace[options.trace] = trace
            try:
                exec(run, namespace)
                return eval(last, namespace) if last is not None else None
            except BaseException as error:
                _show_from_cell(self._shell, error)
                raise

    def _compile(self, source: str, cell_magic: bool, magic: FrameType) -> tuple[Any, Any]:
        """Code objects for the body and for a last expression (or None), placed in their cell."""
        shell = self._shell
        code = shell.transform_cell(source)
        name, first = self._place(source, code, cell_magic, magic)
        # Blank lines before the code put it at its line in the cell, SyntaxErrors included.
        tree = shell.compile.ast_parse("\n" * (first - 1) + code, filename=name)
        tree = shell.transform_ast(tree)
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        body = shell.compile(tree, name, "exec")
        return body, (shell.compile(last, name, "eval") if last is not None else None)

    def _place(self, source: str, code: str, cell_magic: bool, magic: FrameType) -> tuple[str, int]:
        """(filename, first line) of the code: IPython's name for the cell it is in, and its line there.

        IPython runs a cell magic as a one-line cell, ``get_ipython().run_cell_magic(…)``,
        numbered as the cell it stands for; the body's lines follow that line.
        Where no cell called the magic (``run_cell_magic`` from a file), the code
        is cached as a cell of its own.
        """
        shell = self._shell
        caller = magic.f_back
        while caller is not None and caller.f_code.co_filename.startswith(_IPYTHON_DIR):
            caller = caller.f_back
        name = caller.f_code.co_filename if caller is not None else ""
        if caller is not None and self._is_cell(name):
            if not cell_magic:
                return name, caller.f_lineno  # a line magic: the statement is on the magic's line
            entry = linecache.cache.get(name)
            lines = entry[2] if entry is not None else []  # type: ignore[misc]
            if len(lines) == 1 and lines[0].rstrip().endswith(repr(source) + ")"):
                # transform_cell dropped the body's leading blank lines; count them back in.
                skipped = next((i for i, text in enumerate(source.splitlines()) if text.strip()), 0)
                first = caller.f_lineno + 1 + skipped
                # The cell's source as the body's lines see it, for tracebacks and debuggers.
                body = [text + "\n" for text in code.splitlines()]
                cached = [lines[0], *["\n"] * (first - 2), *body]
                linecache.cache[name] = (sum(map(len, cached)), None, cached, name)
                return name, first
        return shell.compile.cache(code, shell.execution_count, raw_code=source), 1

    def _is_cell(self, filename: str) -> bool:
        """Tell whether IPython compiled ``filename`` as a cell."""
        label = getattr(self._shell.compile, "format_code_name", None)
        return label(filename) is not None if label is not None else filename.startswith("<ipython-input-")


def _show_from_cell(shell: Any, error: BaseException) -> None:
    """Have IPython show ``error``'s traceback from the cell's code inward, as without the magic.

    The exception's own traceback is left whole (``%debug``, ``%tb``): IPython asks
    an exception for ``_render_traceback_`` before formatting its traceback, so the
    frames from the cell outward (the magic's, IPython's call of it) are left out
    of what it shows, once, and rngtrace's frames with them.
    """
    head = error.__traceback__  # the magic's own frame; outer frames are prepended as it leaves
    existing = getattr(error, "_render_traceback_", None)
    if head is None or existing is not None and not getattr(existing, "rngtrace", False):
        return  # the exception renders itself (ipyparallel's remote errors)

    def render() -> list[str]:
        # One use: an exception kept and raised again elsewhere is shown as IPython would.
        vars(error).pop("_render_traceback_", None)
        tb = error.__traceback__
        while tb is not None and tb is not head:
            tb = tb.tb_next
        inner = _without_own(head.tb_next) if tb is head else None
        return shell.InteractiveTB.structured_traceback(
            type(error), error, inner or error.__traceback__, tb_offset=0 if inner else None
        )

    render.rngtrace = True  # type: ignore[attr-defined]
    try:
        error._render_traceback_ = render  # type: ignore[attr-defined]
    except (AttributeError, TypeError):  # an exception type that takes no attributes
        pass


def _without_own(tb: TracebackType | None) -> TracebackType | None:
    """A copy of the traceback chain ``tb`` without rngtrace's frames (a draw wrapper's, on_draw="raise")."""
    kept = []
    while tb is not None:
        if not is_own(tb.tb_frame.f_code.co_filename):
            kept.append(tb)
        tb = tb.tb_next
    copy = None
    for entry in reversed(kept):
        copy = TracebackType(copy, entry.tb_frame, entry.tb_lasti, entry.tb_lineno)
    return copy


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics on ``ipython``; logs label its cells as it does ("In[3]")."""
    ipython.register_magics(RngTraceMagics)
    if hasattr(ipython.compile, "format_code_name"):  # IPython 8+
        # Jupyter's kernel names cells as files: only the shell knows their number.
        label_cells(lambda filename: (ipython.compile.format_code_name(filename) or (None, None))[1])
