"""Rewrite one file as ``_fix_plan`` says, with LibCST: find each edit's call at its line, then change it.

Two steps, so that a legacy seed goes only where every draw it served was rewritten,
in whichever file: ``FileFix(plan, source)`` parses the file and finds each edit's
call (``notes`` says what it could not find or map, and why; ``failed``, the
streams whose seeds must then stay), and ``apply(keep)`` returns the new source.
Comments and formatting survive: only the calls named change.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import libcst as cst
from libcst.metadata import MetadataWrapper

from ._fix_edits import MARK, AddArgument, Draw, Edit, FilePlan, GiveSeed, PassGenerator, Seed, SeedBefore, legacy
from ._fix_find import Finder, FoundCall
from ._fix_syntax import (
    Spelling,
    dotted,
    inclusive_args,
    is_none,
    keyword,
    last_name,
    positional,
    shape_problem,
    shape_tuple,
    with_keyword,
)
from ._paths import short_path
from .sources import declared
from .sources import stream as stream_info

_STATEMENT = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


class Unparsable(Exception):
    """The file is not Python that LibCST can parse; it is named and left alone."""


class FileFix:
    """One file parsed and its edits found; ``apply`` rewrites it."""

    def __init__(self, plan: FilePlan, source: str) -> None:
        self.plan = plan
        self.where = short_path(plan.path)
        try:
            self.wrapper = MetadataWrapper(cst.parse_module(source))
        except cst.ParserSyntaxError as error:
            raise Unparsable(f"{self.where} does not parse (line {error.raw_line}): left as it is") from None
        self.finder = Finder()
        self.wrapper.visit(self.finder)
        aliases = {module: alias for info in declared().values() for alias, module in info.import_names.items()}
        self.spelling = Spelling(self.wrapper.module, aliases)
        self.notes: list[str] = []
        self.failed: dict[str, str] = {}  # stream -> why its seeds must stay
        self.changes = 0
        self.calls: dict[int, list[Callable[[cst.Call], cst.Call]]] = {}  # id(call) -> what becomes of it
        self.before: dict[int, list[str]] = {}  # id(statement) -> statements to put before it
        self.seeds: dict[int, tuple[cst.Expr, Seed]] = {}  # id(statement) -> the seed expression in it
        self.names = {s: self.spelling.fresh(g.name, f"{s}_{g.name}") for s, g in plan.generators.items()}
        self.at_seeds = {s: g.at_seeds for s, g in plan.generators.items()}
        self.used: set[str] = set()  # the streams whose generator some change draws from
        for edit in plan.edits:
            if not isinstance(edit, Seed):
                self.locate(edit)
        self.generators = {s: g for s, g in plan.generators.items() if s in self.used}
        for edit in plan.edits:
            if isinstance(edit, Seed) and edit.stream in self.generators:
                self.find_seed(edit)
        self.leftovers()

    # -- finding each edit's call -----------------------------------------------------------

    def candidates(self, edit: Edit) -> list[FoundCall]:
        """The calls of ``edit.api`` at its line: those starting on it first, else the tightest around it."""
        around = [c for c in self.finder.calls if c.start <= edit.line <= c.end]
        found = [c for c in around if edit.api in c.names]
        owner, _, method = edit.api.rpartition(".")
        if not found and owner.rpartition(".")[2][:1].isupper():  # a method of an object: torch.Tensor.uniform_
            found = [c for c in around if last_name(c.node) == method and isinstance(c.node.func, cst.Attribute)]
        starting = [c for c in found if c.start == edit.line]
        if starting:
            return starting
        tightest = min((c.end - c.start for c in found), default=0)
        return [c for c in found if c.end - c.start == tightest]

    def fail(self, edit: Edit, why: str) -> None:
        self.notes.append(f"{self.where}:{edit.line}: {edit.api} left as it is: {why}")
        self.failed.setdefault(edit.stream, f"{edit.api} at {self.where}:{edit.line} was not rewritten")

    def change(self, call: cst.Call, how: Callable[[cst.Call], cst.Call]) -> None:
        self.calls.setdefault(id(call), []).append(how)
        self.changes += 1

    def locate(self, edit: Edit) -> None:
        """Find the call ``edit`` changes and say how; a call not found or not safely mappable is noted."""
        if isinstance(edit, SeedBefore):
            return self.seed_before(edit)
        if isinstance(edit, AddArgument):
            return self.add_argument(edit)
        found = self.candidates(edit)
        if not found:
            return self.fail(edit, "no call of it found at that line (the file changed since the run?)")
        for call in found:
            why = self.map(edit, call.node)
            if why:
                return self.fail(edit, why)

    def map(self, edit: Edit, call: cst.Call) -> str | None:
        """Say how ``call`` changes for ``edit``; return why it cannot, instead, where it cannot."""
        if isinstance(edit, Draw):
            return self.draw(edit, call)
        if isinstance(edit, PassGenerator):
            present = keyword(call, "generator")
            if present is not None and not is_none(present.value):
                return "it passes generator= already"
            name = self.names[edit.stream]
            self.change(call, lambda c: with_keyword(c, "generator", cst.Name(name)))
            self.used.add(edit.stream)
        elif isinstance(edit, GiveSeed):
            return self.give_seed(edit, call)
        return None

    def draw(self, edit: Draw, call: cst.Call) -> str | None:
        if edit.shape and shape_problem(call):
            return shape_problem(call)
        if edit.inclusive and inclusive_args(call) is None:
            return "its arguments are not low[, high][, size] as written"
        name = self.names[edit.stream]

        def how(c: cst.Call) -> cst.Call:
            args = shape_tuple(c.args) if edit.shape else (inclusive_args(c) if edit.inclusive else c.args)
            func = cst.Attribute(value=cst.Name(name), attr=cst.Name(edit.method))
            return c.with_changes(func=func, args=args)

        self.change(call, how)
        self.used.add(edit.stream)
        return None

    def give_seed(self, edit: GiveSeed, call: cst.Call) -> str | None:
        seed = cst.Integer(edit.seed)
        if not edit.method:
            first = positional(call)
            if call.args and not (first and is_none(first[0].value) and first[0] is call.args[0]):
                return "it is given arguments already"
            rest = list(call.args[1:])
            self.change(
                call,
                lambda c: c.with_changes(
                    args=[cst.Arg(value=seed, comma=c.args[0].comma), *rest] if rest else [cst.Arg(seed)]
                ),
            )
            return None
        if not isinstance(call.func, cst.Attribute) or call.args:
            return f"it is not a call of .{edit.api.rsplit('.', 1)[-1]}() as written"
        if id(call) not in self.finder.expression_calls:
            return f"its value is used: call .{edit.method}({edit.seed}) instead, which returns another value"
        method = cst.Name(edit.method)
        self.change(call, lambda c: c.with_changes(func=c.func.with_changes(attr=method), args=[cst.Arg(seed)]))
        return None

    def add_argument(self, edit: AddArgument) -> None:
        """``random_state=0`` (or ``generator=``) to the call at the line, or to the object its method drew in."""
        target = self.argument_target(edit)
        if target is None:
            return self.fail(edit, f"no call of {' or '.join(edit.names)} found at that line to give {edit.keyword}=")
        present = keyword(target, edit.keyword)
        if present is not None and not is_none(present.value):
            return self.fail(edit, f"it passes {edit.keyword}= already")
        if "{generator}" in edit.value:
            self.used.add(edit.stream)
        value = edit.value.replace("{generator}", self.names.get(edit.stream, "rng"))
        expression = cst.parse_expression(self.spelling.spell_text(value))
        self.change(target, lambda c: with_keyword(c, edit.keyword, expression))

    def argument_target(self, edit: AddArgument) -> cst.Call | None:
        around = [c for c in self.finder.calls if c.start <= edit.line <= c.end]
        for call in sorted(around, key=lambda c: (c.start != edit.line, c.end - c.start)):
            name = last_name(call.node)
            if name not in edit.names:
                continue
            if edit.constructor and name and name[:1].islower() and isinstance(call.node.func, cst.Attribute):
                made = self.made_by(call.node.func.value, edit.line)  # km.fit(X): the keyword goes to KMeans(...)
                if made is not None:
                    return made
            return call.node
        for name, line in self.finder.names:  # for xb in loader: the loader's DataLoader(...)
            made = self.made_by(cst.Name(name), edit.line) if line == edit.line else None
            if made is not None and last_name(made) in edit.names:
                return made
        return None

    def made_by(self, receiver: cst.BaseExpression, line: int) -> cst.Call | None:
        """The call that made ``receiver``: itself if it is a call, else the last assignment of its name above."""
        if isinstance(receiver, cst.Call):
            return receiver
        name = dotted(receiver) if isinstance(receiver, cst.Name) else None
        values = [v for n, at, v in self.finder.assigned if n == name and at <= line]
        return values[-1] if values and isinstance(values[-1], cst.Call) else None

    def seed_before(self, edit: SeedBefore) -> None:
        """The seed goes right before the innermost statement holding the line (where the model is built)."""
        holding = [s for s in self.finder.statements if s[1] <= edit.line <= s[2]]
        if not holding:
            return self.fail(edit, "no statement found at that line")
        statement = min(holding, key=lambda s: s[2] - s[1])[0]
        self.before.setdefault(id(statement), []).append(self.spelling.spell_text(edit.statement))
        self.changes += 1

    def find_seed(self, edit: Seed) -> cst.Expr | None:
        """The statement ``np.random.seed(...)`` at the edit's line; None (its stream's seeds stay) if none."""
        for call in self.candidates(edit):
            statement = self.finder.expression_calls.get(id(call.node))
            if statement is not None:
                self.seeds[id(statement[0])] = (statement[1], edit)
                return statement[1]
        self.fail(edit, "it is not a statement of its own")
        self.at_seeds[edit.stream] = False
        return None

    def leftovers(self) -> None:
        """A legacy call the run did not reach still draws from the global stream: its stream's seeds stay."""
        handled = set(self.calls) | {id(expression.value) for expression, _edit in self.seeds.values()}
        for stream, generator in self.generators.items():
            info = stream_info(stream)
            if info is None or not legacy(info):
                continue
            prefix, maker = info.module + ".", MARK.findall(generator.make)
            for call in self.finder.calls:
                if id(call.node) in handled:
                    continue
                for name in sorted(call.names):
                    tail = name[len(prefix) :] if name.startswith(prefix) else ""
                    if tail[:1].islower() and "." not in tail and name not in maker:
                        why = f"{name} at {self.where}:{call.start} did not run in the traced run"
                        self.failed.setdefault(stream, why)

    # -- rewriting ---------------------------------------------------------------------------

    def apply(self, keep: Mapping[str, str]) -> str:
        """The file's new source; the seeds of the streams in ``keep`` stay."""
        return self.wrapper.module.visit(_Rewriter(self, keep)).code

    def generator_line(self, stream: str, seed: str | None = None) -> str:
        generator = self.generators[stream]
        made = self.spelling.spell_text(generator.make).replace("{seed}", seed or generator.seed)
        return f"{self.names[stream]} = {made}"


class _Rewriter(cst.CSTTransformer):
    """Applies what ``FileFix`` found: the calls, the seeds, and the lines added before statements."""

    def __init__(self, fix: FileFix, keep: Mapping[str, str]) -> None:
        super().__init__()
        self.fix = fix
        self.keep = keep
        self.top: dict[int, list[str]] = {}  # id(top-level statement) -> the lines added after it
        self.first: list[str] = []  # lines added before everything (a file with no imports at its top)
        self.prepare()

    def prepare(self) -> None:
        """Spell every generator first: the imports they need are known before any is placed."""
        fix, body = self.fix, self.fix.wrapper.module.body
        lines = {s: fix.generator_line(s) for s in fix.generators}
        imports = [cst.Module([]).code_for_node(line) for line in fix.spelling.import_lines()]
        self.place(body, fix.spelling.leading, imports)
        for stream, line in lines.items():
            if not fix.at_seeds[stream]:
                made = MARK.findall(fix.generators[stream].make)
                self.place(body, fix.spelling.where(made[0] if made else ""), [line])

    def place(self, body: Sequence[cst.CSTNode], at: int, lines: list[str]) -> None:
        target = self.top.setdefault(id(body[at]), []) if 0 <= at < len(body) else self.first
        target.extend(line.strip() for line in lines)

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        for how in self.fix.calls.get(id(original_node), ()):
            updated_node = how(updated_node)
        return updated_node

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        result = super().on_leave(original_node, updated_node)
        if not isinstance(original_node, _STATEMENT):
            return result
        key = id(original_node)
        result = self.seeded(original_node, result)
        before = [_statement(text) for text in self.fix.before.get(key, ())]
        added = _spaced([_statement(text) for text in self.top.get(key, ())])
        if not (before or added):
            return result
        if isinstance(result, cst.FlattenSentinel):
            statements = list(result.nodes)
        else:
            statements = [] if isinstance(result, cst.RemovalSentinel) else [result]
        if before and statements:  # the comments above the statement stay above what goes before it
            before[0] = before[0].with_changes(leading_lines=getattr(statements[0], "leading_lines", ()))
            statements[0] = statements[0].with_changes(leading_lines=())
        return cst.FlattenSentinel([*before, *statements, *added])

    def seeded(self, original: cst.CSTNode, result: Any) -> Any:
        """A seed statement: the generator made (again) in its place, or after it where the seed must stay.

        Inside a function the name is declared ``global``: the generator is the file's, and the seed
        made it anew at that moment, as the legacy seed reset the stream.
        """
        found = self.fix.seeds.get(id(original))
        if found is None or not isinstance(result, cst.SimpleStatementLine):
            return result
        expression, edit = found
        call = expression.value
        args = positional(call) if isinstance(call, cst.Call) else []
        seed = self.fix.wrapper.module.code_for_node(args[0].value) if args and not is_none(args[0].value) else None
        made = _statement(self.fix.generator_line(edit.stream, seed))
        lines = [made]
        if id(original) in self.fix.finder.nested:
            lines.insert(0, _statement(f"global {self.fix.names[edit.stream]}"))
        if edit.stream in self.keep:
            return cst.FlattenSentinel([result, *lines])
        at = next(i for i, small in enumerate(original.body) if small is expression)  # type: ignore[attr-defined]
        body = list(result.body)
        if len(body) > 1:  # other statements share its line: the generator's go in its place on that line
            body[at : at + 1] = [small for line in lines for small in line.body]
            return result.with_changes(body=body)
        lines[0] = lines[0].with_changes(leading_lines=result.leading_lines)
        return cst.FlattenSentinel(lines)

    def leave_Module(self, original_node: cst.Module, updated_node: cst.Module) -> cst.Module:
        if not self.first:
            return updated_node
        return updated_node.with_changes(body=[*_spaced([_statement(t) for t in self.first]), *updated_node.body])


def _statement(text: str) -> cst.SimpleStatementLine:
    statement = cst.parse_statement(text)
    assert isinstance(statement, cst.SimpleStatementLine)
    return statement


def _is_import(line: cst.SimpleStatementLine) -> bool:
    return isinstance(line.body[0], (cst.Import, cst.ImportFrom))


def _spaced(lines: list[cst.SimpleStatementLine]) -> list[cst.SimpleStatementLine]:
    """Lines added after the imports: the first that is not an import starts a paragraph of its own."""
    return [
        line.with_changes(leading_lines=[cst.EmptyLine()])
        if not _is_import(line) and (i == 0 or _is_import(lines[i - 1]))
        else line
        for i, line in enumerate(lines)
    ]
