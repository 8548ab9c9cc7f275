"""Where ``rngtrace fix`` can change a file: every call, statement, name and assignment, with its lines.

A face, imported only by ``_fix_rewrite`` once LibCST is known to be installed: one pass of
LibCST's visitor over a file, with each call's qualified names as the file's imports resolve
them (``np.random.rand`` and ``from numpy.random import rand`` both name ``numpy.random.rand``).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider

_STATEMENT = (cst.SimpleStatementLine, cst.BaseCompoundStatement)


@dataclass
class FoundCall:
    """A call of the file and the lines it spans."""

    node: cst.Call
    start: int
    end: int
    names: frozenset[str]  # the qualified names it calls, as the file's imports resolve them


class Finder(cst.CSTVisitor):
    """Every call, statement, name and assignment of a file, with the lines it spans."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self) -> None:
        self.calls: list[FoundCall] = []
        self.statements: list[tuple[cst.CSTNode, int, int]] = []  # (statement, first line, last line)
        self.names: list[tuple[str, int]] = []
        self.assigned: list[tuple[str, int, cst.BaseExpression]] = []  # (name, line, value)
        self.expression_calls: dict[int, tuple[cst.SimpleStatementLine, cst.Expr]] = {}  # id(call) -> statement
        self.nested: set[int] = set()  # id(statement) of those inside a function or class body
        self._depth = 0

    def _lines(self, node: cst.CSTNode) -> tuple[int, int]:
        where = self.get_metadata(PositionProvider, node)
        return where.start.line, where.end.line

    def visit_Call(self, node: cst.Call) -> None:
        names = frozenset(q.name for q in self.get_metadata(QualifiedNameProvider, node, set()))
        self.calls.append(FoundCall(node, *self._lines(node), names))

    def visit_Name(self, node: cst.Name) -> None:
        self.names.append((node.value, self._lines(node)[0]))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._depth += 1

    def leave_FunctionDef(self, original_node: cst.FunctionDef) -> None:
        self._depth -= 1

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._depth += 1

    def leave_ClassDef(self, original_node: cst.ClassDef) -> None:
        self._depth -= 1

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if self._depth:
            self.nested.add(id(node))
        for small in node.body:
            if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
                self.expression_calls[id(small.value)] = (node, small)
            targets = small.targets if isinstance(small, cst.Assign) else []
            value = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
            if isinstance(small, cst.AnnAssign):
                targets = [cst.AssignTarget(small.target)]
            for target in targets:
                if isinstance(target.target, cst.Name) and value is not None:
                    self.assigned.append((target.target.value, self._lines(node)[0], value))

    def on_visit(self, node: cst.CSTNode) -> bool:
        if isinstance(node, _STATEMENT):
            self.statements.append((node, *self._lines(node)))
        return super().on_visit(node)
