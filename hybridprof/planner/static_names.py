"""The names a source file's imports bind, and Python's builtins: how `nn.Linear` is read as
`torch.nn.Linear`.

libcst's `QualifiedNameProvider` answers the same question through a full scope analysis, whose
cost grows with the square of a name's assignments in one scope: `x = self.layer_i(x)` 4,000
times in a forward took 44 s and 870 MB before the class was even walked. The static planner
needs only what imports and builtins make of a name, so this reads the import statements once
and looks each name up: linear in the source.

The answers are libcst's for every name bound by an import or a builtin: `import torch.nn as
tnn` (`tnn.Linear` -> torch.nn.Linear), `from torch import nn`, `from .layers import Block`
(relative: `.layers.Block`, made absolute by the caller), an import in a `try:` or inside a
method (taken as the file's), a builtin not redefined at the top of the file (`getattr` ->
builtins.getattr). Where several imports bind one name (`try: from apex import X except: from
torch.nn import X`), the first name in sorted order, as the planner took libcst's. A name the
function binds itself (a parameter `input`, a variable) is local there (`local_names`), as
Python and libcst have it.
"""

from __future__ import annotations

import builtins
from collections.abc import Collection, Iterable, Iterator

import libcst as cst
from libcst.helpers import get_full_name_for_node

BUILTIN_NAMES = frozenset(dir(builtins))


class ImportNames:
    """Per name bound by an import, the dotted names it stands for."""

    def __init__(self, statements: Iterable[cst.CSTNode], defined: Iterable[str] = ()) -> None:
        self.bound: dict[str, set[str]] = {}
        self.defined = frozenset(defined)  # top-level names of the file: they hide builtins
        for statement in statements:
            for node in import_nodes(statement):
                self._bind(node)

    def resolve(self, node: cst.CSTNode, local: Collection[str] = ()) -> str | None:
        """The dotted name a node stands for through the imports or the builtins (see
        `full_name`), or None (a name `local` to the function it is in, another expression)."""
        name = full_name(node)
        if name is None:
            return None
        head, dot, rest = name.partition(".")
        if head in local:  # a parameter or variable (`input`, a local `F`): hides the others
            return None
        targets = self.bound.get(head)
        if targets:
            return min(f"{target}{dot}{rest}" for target in targets)
        if head in BUILTIN_NAMES and head not in self.defined:
            return f"builtins.{name}"
        return None

    def _bind(self, node: cst.Import | cst.ImportFrom) -> None:
        if isinstance(node, cst.Import):
            for alias in node.names:
                full = get_full_name_for_node(alias.name) or ""
                if alias.asname is not None:
                    self._add(_as_name(alias), full)
                else:  # `import torch.nn` binds `torch`
                    head = full.partition(".")[0]
                    self._add(head, head)
            return
        if isinstance(node.names, cst.ImportStar):
            return  # what `*` binds is not in the source
        module = get_full_name_for_node(node.module) if node.module is not None else ""
        base = "." * len(node.relative) + (module or "")
        for alias in node.names:
            name = get_full_name_for_node(alias.name) or ""
            local = _as_name(alias) if alias.asname is not None else name
            joined = f"{base}.{name}" if base and not base.endswith(".") else f"{base}{name}"
            self._add(local, joined)

    def _add(self, local: str, target: str) -> None:
        if local and target:
            self.bound.setdefault(local, set()).add(target)


def full_name(node: cst.CSTNode) -> str | None:
    """The dotted name libcst resolves for a node: a Name or Attribute chain, where a call or a
    subscript stands for what is called or indexed (`nn.ReLU()` -> nn.ReLU, `F.relu(x).mean` ->
    F.relu.mean); None for anything else."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = full_name(node.value)
        return f"{head}.{node.attr.value}" if head is not None else None
    if isinstance(node, cst.Call):
        return full_name(node.func)
    if isinstance(node, cst.Subscript):
        return full_name(node.value)
    return None


def _as_name(alias: cst.ImportAlias) -> str:
    asname = alias.asname
    if asname is not None and isinstance(asname.name, cst.Name):
        return asname.name.value
    return ""


# Statements, and the parts of compound ones that hold statements: where an import or a class can
# stand (never inside an expression).
_HOLDERS = (
    cst.SimpleStatementLine,
    cst.BaseSuite,
    cst.BaseCompoundStatement,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Else,
    cst.Finally,
    cst.MatchCase,
)


def statements_in(node: cst.CSTNode) -> Iterator[cst.CSTNode]:
    """`node` and every statement inside it, in source order, without entering expressions: a
    walk over the statements alone, far cheaper than visiting every node."""
    pending = [node]
    while pending:
        current = pending.pop()
        yield current
        inner = [c for c in current.children if isinstance(c, _HOLDERS)]
        pending.extend(reversed(inner))


def import_nodes(statement: cst.CSTNode) -> Iterator[cst.Import | cst.ImportFrom]:
    """The import statements in `statement` (at any depth of its statements)."""
    for node in statements_in(statement):
        if isinstance(node, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            for small in node.body:
                if isinstance(small, cst.Import | cst.ImportFrom):
                    yield small


def local_names(function: cst.FunctionDef) -> frozenset[str]:
    """The names a function binds itself (Python's rule: then they are local everywhere in it):
    its parameters, assignment, loop, `with` and `except` targets, nested functions and classes;
    less those declared `global`/`nonlocal`. Names it imports are left out: they resolve through
    the imports (`ImportNames` reads imports inside functions too)."""
    params = function.params
    every = [*params.posonly_params, *params.params, *params.kwonly_params]
    every += [p for p in (params.star_arg, params.star_kwarg) if isinstance(p, cst.Param)]
    names = {p.name.value for p in every}
    declared: set[str] = set()
    pending: list[cst.CSTNode] = [function.body]
    while pending:
        node = pending.pop()
        if isinstance(node, cst.FunctionDef | cst.ClassDef):
            names.add(node.name.value)
            continue  # its own body is its own scope
        names.update(_bound_by(node))
        if isinstance(node, cst.SimpleStatementLine | cst.SimpleStatementSuite):
            for small in node.body:
                names.update(_bound_by(small))
                if isinstance(small, cst.Global | cst.Nonlocal):
                    declared.update(n.name.value for n in small.names)
        pending.extend(c for c in node.children if isinstance(c, _HOLDERS))
    return frozenset(names - declared)


def _bound_by(node: cst.CSTNode) -> list[str]:
    """The plain names a statement (or a part of one) assigns."""
    targets: list[cst.CSTNode] = []
    if isinstance(node, cst.Assign):
        targets = [t.target for t in node.targets]
    elif isinstance(node, cst.AugAssign | cst.AnnAssign | cst.For):
        targets = [node.target]
    elif isinstance(node, cst.With):
        targets = [i.asname.name for i in node.items if i.asname is not None]
    elif isinstance(node, cst.ExceptHandler | cst.ExceptStarHandler) and node.name is not None:
        targets = [node.name.name]
    found: list[str] = []
    while targets:
        target = targets.pop()
        if isinstance(target, cst.Name):
            found.append(target.value)
        elif isinstance(target, cst.Tuple | cst.List):
            targets.extend(e.value for e in target.elements)
        elif isinstance(target, cst.StarredElement):
            targets.append(target.value)
    return found


def top_level_names(module: cst.Module) -> set[str]:
    """Names the file defines at its top level (functions, classes, plain assignments)."""
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef | cst.ClassDef):
            names.add(statement.name.value)
        elif isinstance(statement, cst.SimpleStatementLine):
            for small in statement.body:
                targets = (
                    [t.target for t in small.targets]
                    if isinstance(small, cst.Assign)
                    else [small.target]
                    if isinstance(small, cst.AnnAssign)
                    else []
                )
                names.update(t.value for t in targets if isinstance(t, cst.Name))
    return names


__all__ = [
    "BUILTIN_NAMES",
    "ImportNames",
    "full_name",
    "import_nodes",
    "local_names",
    "statements_in",
    "top_level_names",
]
