"""Static facts about nn.Module classes, read from their source with libcst.

Each file is parsed once (cached by content hash). Metadata resolution (scopes for
`QualifiedNameProvider`, positions) is the expensive part of libcst, so it never runs over a whole
file: a small synthetic module is built from the file's import statements plus only the top-level
statements that hold the classes asked for, and metadata is resolved over that. Line numbers are
then shifted back to the real file with the `class` line that `ast` (much faster) reports.

Names are resolved (`import torch.nn as tnn`, `from torch.nn import Linear as L`), never matched as
text. The per-class walk of `__init__` and `forward` lives in `static.py`.
"""

from __future__ import annotations

import ast
import hashlib
import inspect
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider, QualifiedNameProvider

from hybridprof.datamodel import ModuleClassInfo, SourceSpan
from hybridprof.planner.static import ClassWalker

CONTAINERS = {"Sequential", "ModuleList", "ModuleDict"}
MODULE_BASES = {"torch.nn.Module", "torch.nn.modules.module.Module"}


@dataclass(slots=True)
class FileIndex:
    """One parsed source file: its libcst tree, imports, and where each class starts."""

    path: str
    digest: str
    module: cst.Module
    class_lines: dict[int, int]  # id(ClassDef node) -> real 1-based line of `class`
    classes_by_line: dict[int, cst.ClassDef]
    tops: dict[int, cst.CSTNode]  # id(ClassDef) -> the top-level statement holding it
    imports: tuple[cst.BaseStatement, ...]
    package: str = ""
    infos: dict[int, ModuleClassInfo] = field(default_factory=dict)  # by class line
    bases: dict[int, tuple[str, ...]] = field(default_factory=dict)  # resolved, by class line

    def classes_named(self, name: str) -> list[int]:
        return [ln for ln, node in self.classes_by_line.items() if node.name.value == name]

    def analyze(self, lines: Sequence[int], module_name: str = "") -> dict[int, ModuleClassInfo]:
        """ModuleClassInfo for the classes starting at `lines` (cached per class)."""
        todo = [ln for ln in lines if ln not in self.infos and ln in self.classes_by_line]
        if todo:
            self.infos.update(self._resolve(todo, module_name))
        return {ln: self.infos[ln] for ln in lines if ln in self.infos}

    def _resolve(self, lines: list[int], module_name: str) -> dict[int, ModuleClassInfo]:
        wanted = [self.classes_by_line[ln] for ln in lines]
        tops: list[cst.CSTNode] = []
        for node in wanted:
            top = self.tops[id(node)]
            if all(top is not t for t in tops):
                tops.append(top)
        body = [*self.imports, *_in_file_order(self.module, tops)]
        synthetic = self.module.with_changes(body=body)
        collector = _ClassCollector(self, {id(n) for n in wanted}, module_name)
        MetadataWrapper(synthetic, unsafe_skip_copy=True).visit(collector)
        return collector.infos


def _in_file_order(module: cst.Module, tops: list[cst.CSTNode]) -> list[cst.BaseStatement]:
    ids = {id(t) for t in tops}
    return [s for s in module.body if id(s) in ids]


class _ClassCollector(cst.CSTVisitor):
    """Runs the class walker on each wanted class with resolved names and positions."""

    METADATA_DEPENDENCIES = (PositionProvider, QualifiedNameProvider)

    def __init__(self, index: FileIndex, wanted: set[int], module_name: str) -> None:
        super().__init__()
        self.index = index
        self.wanted = wanted
        self.module_name = module_name
        self.infos: dict[int, ModuleClassInfo] = {}

    def visit_ClassDef(self, node: cst.ClassDef) -> bool:
        if id(node) in self.wanted:
            real = self.index.class_lines[id(node)]
            shift = real - self.get_metadata(PositionProvider, node.name).start.line
            walker = ClassWalker(node, self, shift, self.index.path, self.index.package)
            qual = f"{self.module_name}.{node.name.value}" if self.module_name else node.name.value
            self.infos[real] = walker.info(qual)
            self.index.bases[real] = walker.bases()
        return True


# --------------------------------------------------------------------------- parsing, cached


_CACHE: dict[tuple[str, str], FileIndex] = {}


def index_source(source: str, path: str, package: str = "") -> FileIndex:
    """Parse `source` once (cached by path and content hash) and locate its classes."""
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    cached = _CACHE.get((path, digest))
    if cached is not None:
        return cached
    module = cst.parse_module(source)
    nodes, tops = _class_nodes(module)
    lines = _ast_class_lines(source)
    if len(lines) != len(nodes):  # cannot happen for one source; keep the walk honest
        raise ValueError(f"{path}: libcst and ast disagree on the classes")
    index = FileIndex(
        path=path,
        digest=digest,
        module=module,
        class_lines={id(n): ln for n, ln in zip(nodes, lines, strict=True)},
        classes_by_line=dict(zip(lines, nodes, strict=True)),
        tops=tops,
        imports=_import_statements(module),
        package=package,
    )
    _CACHE[(path, digest)] = index
    return index


def index_file(path: str | Path, package: str = "") -> FileIndex:
    file = Path(path)
    return index_source(file.read_text(encoding="utf-8"), str(file), package)


def clear_cache() -> None:
    _CACHE.clear()


def _class_nodes(module: cst.Module) -> tuple[list[cst.ClassDef], dict[int, cst.CSTNode]]:
    """Every ClassDef in pre-order (the order `ast` reports them), with its top-level statement."""
    found: list[cst.ClassDef] = []
    tops: dict[int, cst.CSTNode] = {}

    class Finder(cst.CSTVisitor):
        top: cst.CSTNode | None = None

        def visit_ClassDef(self, node: cst.ClassDef) -> bool:
            found.append(node)
            return True

    for statement in module.body:
        before = len(found)
        statement.visit(Finder())
        for node in found[before:]:
            tops[id(node)] = statement
    return found, tops


def _ast_class_lines(source: str) -> list[int]:
    lines: list[int] = []

    class Lines(ast.NodeVisitor):
        def visit_ClassDef(self, node: ast.ClassDef) -> None:
            lines.append(node.lineno)
            for child in [*node.bases, *node.keywords, *node.body]:
                self.visit(child)

    Lines().visit(ast.parse(source))
    return lines


def _import_statements(module: cst.Module) -> tuple[cst.BaseStatement, ...]:
    """Top-level imports, including those in `try:` / `if` blocks (e.g. optional dependencies)."""
    kept: list[cst.BaseStatement] = []
    for statement in module.body:
        if isinstance(statement, cst.SimpleStatementLine):
            if any(isinstance(s, cst.Import | cst.ImportFrom) for s in statement.body):
                kept.append(statement)
        elif isinstance(statement, cst.If | cst.Try) and _holds_import(statement):
            kept.append(statement)
    return tuple(kept)


def _holds_import(statement: cst.CSTNode) -> bool:
    class Seen(cst.CSTVisitor):
        hit = False

        def visit_Import(self, node: cst.Import) -> None:
            self.hit = True

        def visit_ImportFrom(self, node: cst.ImportFrom) -> None:
            self.hit = True

    seen = Seen()
    statement.visit(seen)
    return seen.hit


# --------------------------------------------------------------------------- live classes


def builtin_container_info(cls: type) -> ModuleClassInfo | None:
    """torch's own containers, understood without reading their source."""
    if cls.__module__ == "torch.nn.modules.container" and cls.__name__ in CONTAINERS:
        return ModuleClassInfo(qualname=f"torch.nn.{cls.__name__}", span=None, builtin=True)
    return None


def class_info(cls: type) -> ModuleClassInfo:
    """What the source of `cls` says; a `note` (never an exception) when it cannot be read."""
    qual = f"{cls.__module__}.{cls.__qualname__}"
    builtin = builtin_container_info(cls)
    if builtin is not None:
        return builtin
    located = _locate(cls)
    if isinstance(located, str):
        return ModuleClassInfo(qualname=qual, span=None, note=located)
    file, line = located
    try:
        index = index_file(file, _package_of(cls))
    except (OSError, UnicodeDecodeError, cst.ParserSyntaxError, SyntaxError, ValueError) as exc:
        return ModuleClassInfo(qualname=qual, span=None, note=f"cannot parse {file}: {exc}")
    infos = index.analyze([line], cls.__module__)
    if line not in infos:
        return ModuleClassInfo(
            qualname=qual, span=SourceSpan(file, line), note="class not found at its line"
        )
    return _with_qualname(infos[line], qual)


def _with_qualname(info: ModuleClassInfo, qual: str) -> ModuleClassInfo:
    from dataclasses import replace

    return replace(info, qualname=qual)


def _locate(cls: type) -> tuple[str, int] | str:
    """(file, line of `class`) or why the source is not readable."""
    try:
        file = inspect.getsourcefile(cls)
        _, start = inspect.getsourcelines(cls)
    except (OSError, TypeError) as exc:
        return f"source not readable ({exc})"
    if file is None or not Path(file).is_file():
        return "source not readable (no .py file: compiled, builtin or typed in a REPL)"
    return file, _class_keyword_line(file, start)


def _class_keyword_line(file: str, start: int) -> int:
    """inspect's line may be a decorator's; ast reports the `class` line."""
    lines = Path(file).read_text(encoding="utf-8").splitlines()
    line = start
    while line <= len(lines) and not lines[line - 1].lstrip().startswith("class "):
        line += 1
    return line


def _package_of(cls: type) -> str:
    import sys

    module = sys.modules.get(cls.__module__)
    if module is None:
        return ""
    package = getattr(module, "__package__", None)
    return package or ""


def is_module_base(qualified: str) -> bool:
    return qualified in MODULE_BASES


__all__ = [
    "CONTAINERS",
    "FileIndex",
    "builtin_container_info",
    "class_info",
    "clear_cache",
    "index_file",
    "index_source",
    "is_module_base",
]
