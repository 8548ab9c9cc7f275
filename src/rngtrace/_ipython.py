"""IPython and Jupyter: ``%load_ext rngtrace``, then ``%%rng_trace`` or ``%rng_trace statement``.

The magic runs the code as IPython's own ``%%time`` does (IPython syntax
transformed, the last expression's value returned so the cell shows it) inside
``rng_trace``, which prints the draw log to stderr, under the cell. Only
imported by ``load_ipython_extension``: ``import rngtrace`` never imports IPython.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class
from IPython.core.magic_arguments import MagicArgumentParser

from .tracer import RngTrace

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
            return tokens, rest[end.end():]
        name = _NAME.match(rest)
        value = _VALUE.match(rest, name.end()) if name and name.group(1) not in _FLAGS else None
        if name is None or (value is None and name.group(1) not in _FLAGS):
            return tokens, rest.strip()
        tokens += [name.group(1)] + ([value.group(1)] if value else [])
        rest = rest[(value or name).end():]


@magics_class
class RngTraceMagics(Magics):
    """``%rng_trace`` and ``%%rng_trace``."""

    @line_cell_magic
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
            raise UsageError(f"%%rng_trace takes options only on its line, not {statement!r}; "
                             "put the code in the cell")
        source = cell if cell is not None else statement
        if not source.strip():
            raise UsageError("nothing to run: %rng_trace statement, or %%rng_trace above a cell")
        streams = options.streams.split(",") if options.streams else None
        try:
            tracer = RngTrace(streams=streams, depth=options.depth, on_draw=options.on_draw,
                              print=not options.quiet, max_events=options.max_events)
        except ValueError as error:
            raise UsageError(str(error)) from None
        run, last = self._compile(source)
        namespace = self.shell.user_ns
        with tracer as trace:
            if options.trace:
                namespace[options.trace] = trace
            exec(run, namespace)
            return eval(last, namespace) if last is not None else None

    def _compile(self, source: str) -> tuple[Any, Any]:
        """Code objects for the body and for a last expression (or None), named like a cell."""
        shell = self.shell
        code = shell.transform_cell(source)
        tree = shell.transform_ast(shell.compile.ast_parse(code))
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        # A name such as <ipython-input-3-…> (a temp file under Jupyter) marks the frames as the user's.
        name = shell.compile.cache(code, shell.execution_count, raw_code=source)
        body = shell.compile(tree, name, "exec")
        return body, (shell.compile(last, name, "eval") if last is not None else None)


def load_ipython_extension(ipython: Any) -> None:
    """Register the magics on ``ipython``."""
    ipython.register_magics(RngTraceMagics)
