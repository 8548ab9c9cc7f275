"""LibCST pieces ``rngtrace fix`` rewrites with: a file's imports, names spelled its way, a call's arguments.

A face: imported only by ``_fix_rewrite``, once ``fix`` has found LibCST installed.
Every change keeps the file's own formatting: an argument is appended in the
call's style (one line, or one per line with a trailing comma), and a name the
fix adds is spelled through the file's imports (``np.random.default_rng``,
``npr.default_rng``, ``default_rng``), importing its module only where none does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import libcst as cst
from libcst import matchers as m

from ._fix_edits import MARK


def dotted(node: cst.BaseExpression) -> str | None:
    """``np.random.rand`` for that attribute chain, or None where the expression is not a dotted name."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head else None
    return None


def last_name(call: cst.Call) -> str | None:
    """The name a call is made through: ``KMeans`` for ``KMeans(...)``, ``fit`` for ``km.fit(...)``."""
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def is_none(node: cst.BaseExpression) -> bool:
    return m.matches(node, m.Name("None"))


def keyword(call: cst.Call, name: str) -> cst.Arg | None:
    """The call's ``name=`` argument, or None."""
    return next((a for a in call.args if a.keyword is not None and a.keyword.value == name), None)


def positional(call: cst.Call) -> list[cst.Arg]:
    """The call's plain positional arguments, in order."""
    return [a for a in call.args if a.keyword is None and not a.star]


def with_keyword(call: cst.Call, name: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` given ``name=value``: its present value replaced, else appended in the call's style."""
    present = keyword(call, name)
    if present is not None:
        return call.with_changes(args=[a.with_changes(value=value) if a is present else a for a in call.args])
    new = cst.Arg(
        value=value, keyword=cst.Name(name), equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    )
    return call.with_changes(args=appended(call, list(call.args), new))


def appended(call: cst.Call, args: list[cst.Arg], new: cst.Arg) -> list[cst.Arg]:
    """``args`` with ``new`` last, commas laid out as the call lays them (a trailing comma stays last)."""
    if not args:
        return [new]
    last = args[-1]
    if isinstance(last.comma, cst.Comma):  # a trailing comma: the new argument goes on its own line
        between = args[-2].comma if len(args) > 1 and isinstance(args[-2].comma, cst.Comma) else None
        if between is None:
            between = cst.Comma(whitespace_after=call.whitespace_before_args)
        return [*args[:-1], last.with_changes(comma=between), new.with_changes(comma=last.comma)]
    return [*args[:-1], last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))), new]


def shape_tuple(args: Sequence[cst.Arg]) -> list[cst.Arg]:
    """``rand(d0, d1)``'s arguments as ``random((d0, d1))`` takes them; ``rand(*shape)`` as ``random(shape)``."""
    if len(args) <= 1:
        return [cst.Arg(value=a.value) for a in args]
    elements: list[cst.BaseElement] = []
    for i, a in enumerate(args):
        comma = a.comma if i < len(args) - 1 else cst.MaybeSentinel.DEFAULT
        if a.star == "*":
            elements.append(cst.StarredElement(value=a.value, comma=comma))
        else:
            elements.append(cst.Element(value=a.value, comma=comma))
    return [cst.Arg(value=cst.Tuple(elements))]


def shape_problem(call: cst.Call) -> str | None:
    """Why ``call``'s shape arguments cannot become one tuple, or None."""
    if any(a.keyword is not None or a.star == "**" for a in call.args):
        return "it passes keywords, which it does not take"
    return None


def inclusive_args(call: cst.Call) -> list[cst.Arg] | None:
    """``random_integers``' arguments as ``integers(..., endpoint=True)`` takes them; None where unsure.

    A lone bound is the high end, from 1: ``random_integers(5)`` is ``integers(1, 5, endpoint=True)``.
    """
    if any(a.star or (a.keyword is not None and a.keyword.value not in ("high", "size")) for a in call.args):
        return None
    plain = positional(call)
    high = keyword(call, "high")
    if len(plain) >= 2 and is_none(plain[1].value) and high is None:
        one = cst.Arg(value=cst.Integer("1"), comma=plain[0].comma)
        args = [one, plain[0].with_changes(comma=plain[1].comma), *call.args[2:]]
    elif len(plain) == 1 and high is None:
        one = cst.Arg(value=cst.Integer("1"), comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        args = [one, *call.args]
    elif plain and (len(plain) >= 2 or high is not None):
        args = list(call.args)
    else:
        return None
    equal = cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))
    return appended(call, args, cst.Arg(value=cst.Name("True"), keyword=cst.Name("endpoint"), equal=equal))


class Spelling:
    """How one file names things: its top-level imports, every name it uses, and the imports a fix adds."""

    def __init__(self, module: cst.Module, aliases: Mapping[str, str]) -> None:
        #: canonical dotted name -> (the name the file binds it to, the index of the statement binding it)
        self.bound: dict[str, tuple[str, int]] = {}
        #: every name the file uses: a name the fix introduces must not be one
        self.used: set[str] = set()
        #: canonical module -> alias, for the modules the fix imports: ``import numpy as np``
        self.added: dict[str, str] = {}
        self.aliases = aliases  # module -> the alias its declaration writes (numpy -> np)
        self.leading = -1  # index of the last statement of the file's opening imports (docstring, imports)
        self._read(module)

    def _read(self, module: cst.Module) -> None:
        opening = True
        for i, statement in enumerate(module.body):
            imports = _imports(statement)
            if imports is None:
                docstring = i == 0 and m.matches(statement, m.SimpleStatementLine([m.Expr(m.SimpleString())]))
                opening = opening and docstring
                if docstring:
                    self.leading = i
                continue
            if opening:
                self.leading = i
            for name, local in imports:
                self.bound.setdefault(name, (local, i))
        collector = _Names()
        module.visit(collector)
        self.used = collector.names

    def spell(self, name: str) -> str:
        """``name`` (canonical, ``numpy.random.default_rng``) as the file writes it, importing it if need be."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            found = self.bound.get(".".join(parts[:i]))
            if found is not None:
                return ".".join([found[0], *parts[i:]])
        top = parts[0]
        alias = self.added.get(top) or self.fresh(self.aliases.get(top, top), top)
        self.added[top] = alias
        return ".".join([alias, *parts[1:]])

    def spell_text(self, text: str) -> str:
        """``text`` with each marked name (``<torch.Generator>``) spelled."""
        return MARK.sub(lambda match: self.spell(match.group(1)), text)

    def where(self, name: str) -> int:
        """The index of the top-level statement after which ``name`` (canonical) can be used."""
        parts = name.split(".")
        for i in range(len(parts), 0, -1):
            found = self.bound.get(".".join(parts[:i]))
            if found is not None:
                return max(found[1], self.leading)
        return self.leading

    def fresh(self, *wanted: str) -> str:
        """The first of ``wanted`` the file does not use, else the first with a number: ``rng2``."""
        for name in wanted:
            if name not in self.used:
                self.used.add(name)
                return name
        n = 2
        while f"{wanted[0]}{n}" in self.used:
            n += 1
        self.used.add(f"{wanted[0]}{n}")
        return f"{wanted[0]}{n}"

    def import_lines(self) -> list[cst.SimpleStatementLine]:
        """The imports the fix adds: ``import numpy as np``."""
        lines = []
        for module, alias in self.added.items():
            text = f"import {module}" if alias == module else f"import {module} as {alias}"
            lines.append(cst.parse_statement(text))
        return lines  # type: ignore[return-value]


def _imports(statement: cst.CSTNode) -> list[tuple[str, str]] | None:
    """(canonical name, local name) for each name a top-level import statement binds; None: not an import."""
    if not isinstance(statement, cst.SimpleStatementLine) or not statement.body:
        return None
    found: list[tuple[str, str]] = []
    for small in statement.body:
        if isinstance(small, cst.Import):
            for alias in small.names:
                name = dotted(alias.name) or ""
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else None
                found.append((name, local) if local else (name.split(".")[0], name.split(".")[0]))
        elif isinstance(small, cst.ImportFrom):
            if small.relative or small.module is None or isinstance(small.names, cst.ImportStar):
                continue
            source = dotted(small.module) or ""
            for alias in small.names:
                name = dotted(alias.name) or ""
                local = alias.asname.name.value if alias.asname and isinstance(alias.asname.name, cst.Name) else name
                found.append((f"{source}.{name}", local))
        else:
            return None
    return found


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)
