"""The distinct ways players solved a round, for its close: passing code grouped by a
normalised form, so two answers that differ only in names, formatting, comments, docstrings,
type annotations or imports count as one approach.

Players learn most from seeing another correct way, so the close shows up to three, the most
common first, each with how many players found it and the first solver's code.
"""
from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence
from dataclasses import dataclass

MAX_APPROACHES = 3
MAX_EXAMPLE_LINES = 30
MAX_EXAMPLE_CHARS = 1500


@dataclass(frozen=True)
class Solve:
    """One player's first passing answer of a round."""

    answer_id: int  # submission order
    player: str
    code: str


@dataclass(frozen=True)
class Approach:
    count: int  # players whose first passing answer has this form
    first: Solve  # the earliest of them


class _Bound(ast.NodeVisitor):
    """Every name the code binds itself (defs, arguments, assignments, loop and comprehension
    targets, `except ... as`, `with ... as`), in order of first appearance."""

    def __init__(self) -> None:
        self.names: dict[str, None] = {}

    def _bind(self, name: str) -> None:
        self.names.setdefault(name, None)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        self._bind(node.name)
        self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._bind(node.name)
        self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> None:
        self._bind(node.arg)

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self._bind(node.id)

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> None:
        if node.name:
            self._bind(node.name)
        self.generic_visit(node)


class _Canon(ast.NodeTransformer):
    """Rename the code's own names to v0, v1, ... (the entrypoint keeps its name), drop
    docstrings, annotations and imports."""

    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def _body(self, body: list[ast.stmt]) -> list[ast.stmt]:
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        return [s for s in body if not isinstance(s, (ast.Import, ast.ImportFrom))] or [ast.Pass()]

    def visit_Module(self, node: ast.Module) -> ast.AST:
        node.body = self._body(node.body)
        return self.generic_visit(node)

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        node.body = self._body(node.body)
        node.returns = None
        return self.generic_visit(node)

    visit_AsyncFunctionDef = visit_FunctionDef  # type: ignore[assignment]

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        node.name = self.names.get(node.name, node.name)
        node.body = self._body(node.body)
        return self.generic_visit(node)

    def visit_arg(self, node: ast.arg) -> ast.AST:
        node.arg = self.names.get(node.arg, node.arg)
        node.annotation = None
        return node

    def visit_AnnAssign(self, node: ast.AnnAssign) -> ast.AST | None:
        if node.value is None:
            return None  # a bare annotation does nothing
        return self.visit(ast.Assign(targets=[node.target], value=node.value, lineno=node.lineno))

    def visit_Name(self, node: ast.Name) -> ast.AST:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        if node.name:
            node.name = self.names.get(node.name, node.name)
        return self.generic_visit(node)


def normalise_code(source: str, entrypoint: str = "") -> str | None:
    """A canonical form of the code: equal for two answers that differ only in the names they
    chose, formatting, comments, docstrings, annotations or imports; None if it does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    finder = _Bound()
    finder.visit(tree)
    keep = set(dir(builtins)) | {entrypoint}
    own = [n for n in finder.names if n not in keep]
    canon = _Canon({name: f"v{i}" for i, name in enumerate(own)})
    try:
        tree = canon.visit(tree)
        return ast.dump(ast.fix_missing_locations(tree), annotate_fields=False, include_attributes=False)
    except RecursionError:
        return None


def group_approaches(solves: Sequence[Solve], entrypoint: str = "") -> list[Approach]:
    """Every distinct form among the round's solves, the most common first (ties: the one found
    first), each with its earliest solve. Code that does not parse is its own approach."""
    groups: dict[str, list[Solve]] = {}
    for solve in sorted(solves, key=lambda s: s.answer_id):
        key = normalise_code(solve.code, entrypoint) or f"raw:{solve.answer_id}"
        groups.setdefault(key, []).append(solve)
    ranked = sorted(groups.values(), key=lambda g: (-len(g), g[0].answer_id))
    return [Approach(len(g), g[0]) for g in ranked]


def example_text(code: str) -> str:
    """The example as shown: cut to a readable length, saying so."""
    lines = code.strip("\n").splitlines()
    text = "\n".join(lines[:MAX_EXAMPLE_LINES])
    cut = len(lines) > MAX_EXAMPLE_LINES or len(text) > MAX_EXAMPLE_CHARS
    text = text[:MAX_EXAMPLE_CHARS]
    return text + ("\n# ... (cut)" if cut else "")
