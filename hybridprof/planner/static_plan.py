"""A plan from the model file's source alone (`analyze --static-only`): nothing of it is executed.

The root is the class the entry function returns or constructs (else the last nn.Module subclass
in the file); its tree comes from the children each class creates in `__init__`, recursing into
classes defined in the same file. torch's classes (other than its containers) are taken as leaves:
their source is not read in this mode. Entries that are only known as a pattern (a ModuleList
built in a comprehension) appear as one target with a `*` path and unknown calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import libcst as cst

from hybridprof.datamodel import (
    ChildDef,
    Finding,
    FindingKind,
    ModuleClassInfo,
    ModuleTarget,
    ProfilePlan,
)
from hybridprof.errors import UsageError
from hybridprof.files.loader import read_model_source
from hybridprof.planner.live_plan import (
    call_findings,
    calls_per_owner_call,
    inline_op_finding,
    times,
    with_parents_selected,
)
from hybridprof.planner.source_index import (
    FileIndex,
    SourceTooBig,
    index_source,
    is_module_base,
)
from hybridprof.planner.static import container_kind

MAX_DEPTH = 32  # a class that (wrongly) contains itself must not recurse forever


class _StaticTree:
    def __init__(self, index: FileIndex, infos: dict[int, ModuleClassInfo]) -> None:
        self.index = index
        self.infos = infos
        self.by_name = {i.qualname: line for line, i in infos.items()}
        self.functions = {s.name.value for s in index.module.body if isinstance(s, cst.FunctionDef)}
        self.other_classes = {n.name.value for n in index.classes_by_line.values()} - set(
            self.by_name
        )
        self.targets: list[ModuleTarget] = []
        self.findings: list[Finding] = []
        # per list of child defs (by id, the list kept alive with it): names, first def per name
        self._names: dict[int, tuple[list[ChildDef], list[str], dict[str, ChildDef]]] = {}
        self.inline: list[tuple[str, ModuleClassInfo]] = []  # said once the selection is known

    def build(self, line: int, path: str, count: int | None, child: ChildDef | None) -> None:
        info = self.infos[line]
        defs = self._own_defs(line)
        self._add(path, info.qualname, child, count, is_leaf=not defs)
        if info.inline_ops:
            self.inline.append((path, info))
        for name in _top_names(defs):
            self._child(info, defs, name, _join(path, name), count)

    def _by_name(self, defs: list[ChildDef]) -> tuple[list[str], dict[str, ChildDef]]:
        """The names of `defs`, and the first def of each name; worked out once per list (each
        of a class's children asks for the same one)."""
        kept = self._names.get(id(defs))
        if kept is None or kept[0] is not defs:
            first = {d.name: d for d in reversed(defs)}
            kept = self._names[id(defs)] = (defs, [d.name for d in defs], first)
        return kept[1], kept[2]

    def inline_findings(self, targets: Sequence[ModuleTarget]) -> list[Finding]:
        """The parents' inline ops, each said for the selection `targets` makes."""
        selected = {t.path for t in targets if t.selected}
        found = (inline_op_finding(path, info, path in selected) for path, info in self.inline)
        return [f for f in found if f is not None]

    def _child(
        self, caller: ModuleClassInfo, defs: list[ChildDef], rel: str, path: str, count: int | None
    ) -> None:
        names, first = self._by_name(defs)
        child = first[rel]
        local = calls_per_owner_call(caller, rel, names)
        expected = times(count, local)
        self.findings += call_findings(path, caller, rel)
        if expected == 0 and container_kind(child.class_name) not in ("modulelist", "moduledict"):
            self.findings.append(
                Finding(
                    FindingKind.NEVER_CALLED,
                    path,
                    "the forward never calls it; expect 0 calls",
                    caller.forward_span,
                )
            )
        kind = container_kind(child.class_name)
        target_line = self._local_class(child.class_name)
        if target_line is not None and path.count(".") < MAX_DEPTH:
            self.build(target_line, path, expected, child)
        elif kind is not None:
            entries = [
                d
                for d in defs
                if d.name.startswith(rel + ".") and "." not in d.name[len(rel) + 1 :]
            ]
            self._add(path, child.class_name or "", child, expected, is_leaf=not entries)
            for entry in entries:
                sub = entry.name[len(rel) + 1 :]
                inner = 1 if kind == "sequential" else None
                if kind != "sequential":
                    self._child(caller, defs, entry.name, _join(path, sub), count)
                    continue
                self._entry(entry, _join(path, sub), times(expected, inner))
        else:
            self._add(path, child.class_name or "", child, expected, is_leaf=True)

    def _entry(self, entry: ChildDef, path: str, count: int | None) -> None:
        line = self._local_class(entry.class_name)
        if line is not None and path.count(".") < MAX_DEPTH:
            self.build(line, path, count, entry)
        else:
            self._add(path, entry.class_name or "", entry, count, is_leaf=True)

    def _own_defs(self, line: int) -> list[ChildDef]:
        """Children from this class's __init__ and from its in-file base classes'."""
        defs = list(self.infos[line].children)
        for base in self.index.bases.get(line, ()):
            base_line = self._local_class(base)
            if base_line is not None and base_line != line:
                defs += [
                    d for d in self._own_defs(base_line) if d.name not in {x.name for x in defs}
                ]
        return [d for d in defs if self._is_module(d.class_name)]

    def _is_module(self, class_name: str | None) -> bool:
        """Without running anything, a guess: module classes, containers, helper functions of
        this file or methods (torchvision's `_make_layer`), and capitalized imported classes."""
        if class_name is None or class_name in self.functions:
            return True
        if self._local_class(class_name) is not None or container_kind(class_name):
            return True
        if class_name in self.other_classes:
            return False  # a class of this file that is not an nn.Module (a config, ...)
        return class_name.rpartition(".")[2][:1].isupper()

    def _local_class(self, name: str | None) -> int | None:
        if name is None:
            return None
        return self.by_name.get(name)

    def _add(
        self, path: str, qualname: str, child: ChildDef | None, count: int | None, is_leaf: bool
    ) -> None:
        self.targets.append(
            ModuleTarget(
                path=path,
                class_name=qualname.rpartition(".")[2]
                if qualname in self.by_name or qualname[:1].isupper() or "." in qualname
                else "?",
                qualname=qualname,
                depth=0 if path == "" else path.count(".") + 1,
                is_leaf=is_leaf,
                selected=False,
                reason="",
                expected_calls=count,
                source=child.span if child else None,
                has_forward=qualname.rpartition(".")[2] not in ("ModuleList", "ModuleDict"),
            )
        )


def static_plan(
    model_file: str | Path,
    entry: str = "build_model",
    paths: Sequence[Any] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    with_parents: bool = False,
    leaves_only: bool = False,
) -> ProfilePlan:
    """A plan from libcst alone: the file is read and parsed, never imported."""
    import torch

    from hybridprof.planner.compat import probe

    index = _indexed(model_file)
    infos = _module_classes(index)
    root, how = _root_class(index, infos, entry, Path(model_file).name)
    tree = _StaticTree(index, {ln: infos[ln] for ln in infos})
    tree.build(root, "", 1, None)
    from hybridprof.planner.module_tree import select_among  # imports torch: only once needed

    targets = select_among(
        tuple(tree.targets), paths, globs, depth, infos[root].qualname, leaves_only
    )
    note = Finding(
        FindingKind.STATIC_ONLY,
        "",
        f"plan made from the source alone (nothing executed); root {how}",
    )
    if with_parents:
        targets = with_parents_selected(targets, tree.inline_findings(targets))
    findings = [*tree.findings, *tree.inline_findings(targets)]
    return ProfilePlan(
        root_class=infos[root].qualname,
        targets=targets,
        compat=probe().choices(),
        classes=tuple(infos.values()),
        findings=(note, *findings),
        selectors=_selectors(paths, globs, depth, leaves_only),
        model_file=str(model_file),
        entry=entry,
        torch_version=str(torch.__version__),
        static_only=True,
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


def _indexed(model_file: str | Path) -> FileIndex:
    """The model file read and indexed (never imported); UsageError for one too big to plan."""
    source = read_model_source(model_file)
    try:
        return index_source(source, str(model_file))
    except SourceTooBig as exc:
        raise UsageError(
            f"{exc}, so --static-only cannot plan it; analyze without --static-only (the model "
            "is then planned from the live module tree, without its source facts)"
        ) from exc


def _module_classes(index: FileIndex) -> dict[int, ModuleClassInfo]:
    """The file's nn.Module subclasses (directly, through torch.nn classes, or in-file bases)."""
    infos = index.analyze(sorted(index.classes_by_line))
    names = {ln: info.qualname for ln, info in infos.items()}
    modules: set[str] = set()
    changed = True
    while changed:
        changed = False
        for line, name in names.items():
            if name not in modules and any(
                _module_base(b, modules) for b in index.bases.get(line, ())
            ):
                modules.add(name)
                changed = True
    return {ln: info for ln, info in infos.items() if info.qualname in modules}


def _module_base(base: str, local_modules: set[str]) -> bool:
    if is_module_base(base) or base in local_modules:
        return True
    return base.startswith("torch.nn.") and base.rpartition(".")[2][:1].isupper()


def _root_class(
    index: FileIndex, infos: dict[int, ModuleClassInfo], entry: str, file: str
) -> tuple[int, str]:
    from hybridprof.errors import ModelLoadError

    if not infos:
        raise ModelLoadError(
            f"no nn.Module subclass found in {file}; --static-only needs one defined there: "
            "drop --static-only to build the model (e.g. one made by torchvision or timm)"
        )
    by_name = {i.qualname: ln for ln, i in infos.items()}
    if entry in by_name:  # `--entry Net`: the class itself builds the model
        return by_name[entry], f"{entry} (the entry)"
    _check_entry_defined(index.module, entry, file)
    built = _entry_builds(index.module, entry)
    if built is not None and built in by_name:
        return by_name[built], f"{built} (built by {entry}())"
    last = max(infos)
    why = "the only" if len(infos) == 1 else "the last"
    return last, f"{infos[last].qualname} ({why} nn.Module subclass in {file})"


def _check_entry_defined(module: cst.Module, entry: str, file: str) -> None:
    """A plan names its entry, and `run --plan` calls it: a plan whose entry is not in the file
    would only fail later, so say it now (as the loader would), with the callables there."""
    from hybridprof.errors import ModelLoadError

    defined = _top_level_names(module)
    if defined is not None and entry not in defined:
        own = (s.name.value for s in module.body if isinstance(s, cst.FunctionDef | cst.ClassDef))
        listing = ", ".join(sorted(n for n in own if not n.startswith("_"))) or "none"
        raise ModelLoadError(
            f"entry '{entry}' not found in {file}; callables there: {listing}; "
            "give --entry NAME (a function returning the model)"
        )


def _top_level_names(module: cst.Module) -> set[str] | None:
    """Names the file binds at top level (def, class, assignment, import); None after an
    `import *`, which could bind anything."""
    names: set[str] = set()
    for statement in module.body:
        if isinstance(statement, cst.FunctionDef | cst.ClassDef):
            names.add(statement.name.value)
        if not isinstance(statement, cst.SimpleStatementLine):
            continue
        for small in statement.body:
            if isinstance(small, cst.Assign):
                names.update(
                    t.target.value for t in small.targets if isinstance(t.target, cst.Name)
                )
            elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
                names.add(small.target.value)
            elif isinstance(small, cst.Import | cst.ImportFrom):
                if isinstance(small.names, cst.ImportStar):
                    return None
                names.update(_bound_name(alias) for alias in small.names)
    return names


def _bound_name(alias: cst.ImportAlias) -> str:
    if alias.asname is not None and isinstance(alias.asname.name, cst.Name):
        return alias.asname.name.value
    return cst.Module([]).code_for_node(alias.name).split(".")[0]


def _entry_builds(module: cst.Module, entry: str) -> str | None:
    """The class name `def entry(): return Net(...)` (or `m = Net(); return m`) constructs."""
    function = next(
        (s for s in module.body if isinstance(s, cst.FunctionDef) and s.name.value == entry), None
    )
    if function is None:
        return None
    assigned: dict[str, str] = {}
    for statement in function.body.body:
        for small in getattr(statement, "body", ()):
            if isinstance(small, cst.Assign) and isinstance(small.targets[0].target, cst.Name):
                name = _called_name(small.value)
                if name:
                    assigned[small.targets[0].target.value] = name
            if isinstance(small, cst.Return) and small.value is not None:
                value = small.value
                if isinstance(value, cst.Tuple) and value.elements:
                    value = value.elements[0].value
                if isinstance(value, cst.Name):
                    return assigned.get(value.value)
                return _called_name(value)
    return None


def _called_name(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Call) and isinstance(node.func, cst.Name):
        return node.func.value
    return None


def _selectors(
    paths: Sequence[Any] | None, globs: Sequence[str], depth: int | None, leaves_only: bool
) -> tuple[str, ...]:
    chosen = [repr(p) for p in paths or ()] + [f"glob {g}" for g in globs]
    if depth is not None:
        chosen.append(f"depth {depth}")
    return tuple(chosen or (["leaves only"] if leaves_only else []))


def _top_names(defs: list[ChildDef]) -> list[str]:
    return list(dict.fromkeys(d.name for d in defs if "." not in d.name))


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


__all__ = ["static_plan"]
