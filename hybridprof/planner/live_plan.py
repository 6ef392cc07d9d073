"""The plan: the live module tree merged with what the source says about each module.

`plan_model(model)` walks the tree (module_tree), reads the source of every non-leaf module's class
(source_index; leaves need no reading: their caller's source says how often they run) and sets,
per target, where it is created, how often it is expected to run per forward, and findings.

Expected calls per forward: the root runs once; a child runs (its caller's count) x (call sites in
the caller's forward). A call in a loop or a branch, or a module passed as an argument, makes the
count unknown (None); a child that the forward never calls gets 0. A ModuleList/ModuleDict is not
callable, so its entries are counted in the forward of the module that holds the container.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from hybridprof.datamodel import (
    DEFAULT_STRATEGY,
    ChildCall,
    ChildDef,
    Finding,
    FindingKind,
    ModuleClassInfo,
    ModuleTarget,
    ProfilePlan,
    SourceSpan,
)
from hybridprof.planner.source_index import class_info

NOT_CALLABLE = ("ModuleList", "ModuleDict")
MAX_OPS_SHOWN = 4


# --------------------------------------------------------------------------- counting (shared)


def calls_per_owner_call(
    info: ModuleClassInfo, rel: str, children: Sequence[str] = ()
) -> int | None:
    """How often `info`'s forward runs the module at relative path `rel` (None: unknown)."""
    if info.builtin:
        return 1 if info.qualname.endswith("Sequential") and "." not in rel else None
    if info.note or info.forward_span is None:
        return None
    hits = matching_calls(info, rel)
    if not hits:
        return None if _calls_unknown_helpers(info, children) else 0
    if any(_uncertain(c) for c in hits):
        return None
    return len(hits)


def matching_calls(info: ModuleClassInfo, rel: str) -> list[ChildCall]:
    """The calls of `info`'s forward that run its child `rel`: by that name, or by a pattern
    (`layers.*`) that matches it; in source order."""
    index = _call_index(info)
    found = index.exact.get(rel, [])
    matched = [i for i in index.patterns if fnmatch.fnmatchcase(rel, info.calls[i].name)]
    positions = sorted([*found, *matched]) if matched else found
    return [info.calls[i] for i in positions]


def matching_def(defs: Sequence[ChildDef], rel: str) -> ChildDef | None:
    exact = next((d for d in defs if d.name == rel), None)
    return exact or next((d for d in defs if fnmatch.fnmatchcase(rel, d.name)), None)


@dataclass(frozen=True, slots=True)
class _CallIndex:
    """A class's forward calls by child name, so that asking for each of its children is not a
    pass over all its calls (4,000 children: 16 million comparisons)."""

    exact: dict[str, list[int]]  # name -> positions in `calls` of the calls by that name
    patterns: list[int]  # positions of the calls whose name is a pattern
    attr_names: frozenset[str]  # names called as `self.name(...)`, "*" left out


# One index per class info, the info kept with it so that its id stays its own; a few hundred
# classes at most per plan, and the oldest dropped past that.
_CALL_INDEXES: dict[int, tuple[ModuleClassInfo, _CallIndex]] = {}
_MAX_CALL_INDEXES = 512


def _call_index(info: ModuleClassInfo) -> _CallIndex:
    kept = _CALL_INDEXES.get(id(info))
    if kept is not None and kept[0] is info:
        return kept[1]
    exact: dict[str, list[int]] = {}
    patterns: list[int] = []
    for i, call in enumerate(info.calls):
        if any(ch in call.name for ch in "*?["):
            patterns.append(i)
        else:
            exact.setdefault(call.name, []).append(i)
    attrs = frozenset(c.name for c in info.calls if c.via == "attr" and c.name != "*")
    index = _CallIndex(exact, patterns, attrs)
    if len(_CALL_INDEXES) >= _MAX_CALL_INDEXES:
        _CALL_INDEXES.pop(next(iter(_CALL_INDEXES)))
    _CALL_INDEXES[id(info)] = (info, index)
    return index


def _uncertain(call: ChildCall) -> bool:
    wildcard = "*" in call.name and call.via != "loop"
    return call.in_loop or call.in_branch or call.via == "arg" or wildcard


def _calls_unknown_helpers(info: ModuleClassInfo, children: Sequence[str]) -> bool:
    """forward calls `self.name(...)` that is neither a child nor a method of this class's source:
    a method inherited from elsewhere, which may call the children."""
    attrs = _call_index(info).attr_names
    if not attrs:
        return False
    known = _first_parts(children)
    return not attrs <= known


_FIRST_PARTS: list[tuple[Sequence[str], frozenset[str]]] = []  # the last children list asked


def _first_parts(children: Sequence[str]) -> frozenset[str]:
    """The first dotted part of each child name; the same list is asked once per child, so its
    answer is kept."""
    if _FIRST_PARTS and _FIRST_PARTS[0][0] is children:
        return _FIRST_PARTS[0][1]
    parts = frozenset(c.split(".")[0] for c in children)
    _FIRST_PARTS[:] = [(children, parts)]
    return parts


def times(outer: int | None, inner: int | None) -> int | None:
    if outer == 0 or inner == 0:
        return 0
    return None if outer is None or inner is None else outer * inner


def total(counts: Sequence[int | None]) -> int | None:
    return None if any(c is None for c in counts) else sum(c for c in counts if c is not None)


def inline_op_finding(path: str, info: ModuleClassInfo, selected: bool) -> Finding | None:
    """The ops a parent's forward runs itself; what to do only while there is something left to
    do (a selected parent's row already holds their time)."""
    if not info.inline_ops:
        return None
    names = sorted(dict.fromkeys(op.name for op in info.inline_ops), key=_private_last)
    shown = ", ".join(names[:MAX_OPS_SHOWN]) + (", ..." if len(names) > MAX_OPS_SHOWN else "")
    short = info.qualname.rpartition(".")[2]
    where = (
        "its own row (its self time) holds their time"
        if selected
        else f"their time is its self time, not any child's: select it too ({_how_to_select(path)})"
    )
    return Finding(
        FindingKind.INLINE_OPS,
        path,
        f"{short}.forward runs {len(info.inline_ops)} op(s) directly ({shown}); {where}",
        info.forward_span,
    )


def _how_to_select(path: str) -> str:
    return f"--with-parents, or --paths '{path}'" if path else "--with-parents"


def _private_last(name: str) -> bool:
    return name.rpartition(".")[2].startswith("_")


def call_findings(path: str, info: ModuleClassInfo, rel: str) -> list[Finding]:
    found = []
    for call in matching_calls(info, rel):
        where = SourceSpan(info.forward_span.file, call.line) if info.forward_span else None
        if call.in_loop:
            found.append(
                Finding(
                    FindingKind.LOOP_CALL,
                    path,
                    f"called in a loop ({call.via}); calls per forward vary",
                    where,
                )
            )
        elif call.in_branch or call.via == "arg":
            how = "in a branch" if call.in_branch else "passed as an argument"
            found.append(
                Finding(FindingKind.BRANCH_CALL, path, f"called {how}; may run or not", where)
            )
    return found


def with_parents_selected(
    targets: tuple[ModuleTarget, ...], findings: Sequence[Finding]
) -> tuple[ModuleTarget, ...]:
    owners = {f.path for f in findings if f.kind == FindingKind.INLINE_OPS}
    return tuple(
        replace(t, selected=True, reason="parent with inline ops (--with-parents)")
        if t.path in owners and not t.selected
        else t
        for t in targets
    )


# --------------------------------------------------------------------------- live model


@dataclass(frozen=True, slots=True)
class _Edge:
    """How one path is reached: the module whose forward calls it, and the path relative to it."""

    caller: str
    rel: str
    definer: str  # the module whose __init__ creates it (skips every builtin container)
    def_rel: str


def plan_model(
    model: Any,
    paths: Sequence[Any] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    with_parents: bool = False,
    strategy: str = DEFAULT_STRATEGY,
    model_file: str | None = None,
    entry: str | None = None,
    leaves_only: bool = False,
) -> ProfilePlan:
    """The plan for a live nn.Module: tree, selection, static facts, findings and compat."""
    from hybridprof.planner.module_tree import named_modules, tree_plan

    base = tree_plan(model, paths, globs, depth, strategy, leaves_only=leaves_only)
    modules = dict(named_modules(model))
    infos = _class_infos(modules)
    facts = _LiveFacts(modules, infos)
    targets = tuple(facts.enrich(t) for t in base.targets)
    findings = facts.findings(targets)
    if with_parents:
        targets = with_parents_selected(targets, findings)
        findings = facts.findings(targets)  # what is left to do, now that they are selected
    return replace(
        base,
        targets=targets,
        classes=tuple(dict.fromkeys(infos.values())),
        findings=tuple(findings),
        model_file=model_file,
        entry=entry,
    )


def forward_class(module: Any) -> type:
    return next(k for k in type(module).__mro__ if "forward" in vars(k))


def _init_classes(module: Any) -> list[type]:
    import torch

    stop = torch.nn.Module
    return [k for k in type(module).__mro__ if k is not stop and "__init__" in vars(k)]


def _class_infos(modules: dict[str, Any]) -> dict[type, ModuleClassInfo]:
    """Source facts for the classes of non-leaf modules (forward's class and __init__ classes)."""
    wanted: dict[type, None] = {}
    import torch

    for module in modules.values():
        if isinstance(module, torch.jit.ScriptModule):
            continue  # its source is TorchScript's wrapper, not the user's class
        if next(iter(module.children()), None) is not None:
            wanted.update(dict.fromkeys([forward_class(module), *_init_classes(module)]))
    return {cls: class_info(cls) for cls in wanted if cls.__module__ != "torch.nn.modules.module"}


class _LiveFacts:
    def __init__(self, modules: dict[str, Any], infos: dict[type, ModuleClassInfo]) -> None:
        self.modules = modules
        self.infos = infos
        self.counts: dict[str, int | None] = {"": 1}
        self._children: dict[str, list[str]] = {}  # per caller: its children's names

    def children_of(self, path: str) -> list[str]:
        """The names of a module's children, listed once per module: a model's root can have
        thousands, each asking for the same list."""
        names = self._children.get(path)
        if names is None:
            names = self._children[path] = [n for n, _ in self.modules[path].named_children()]
        return names

    def info_of(self, path: str) -> ModuleClassInfo | None:
        return self.infos.get(forward_class(self.modules[path]))

    def edge(self, path: str) -> _Edge:
        parts = path.split(".")
        caller = definer = None
        for cut in range(len(parts) - 1, -1, -1):
            prefix = ".".join(parts[:cut])
            name = type(self.modules[prefix]).__name__
            is_container = type(self.modules[prefix]).__module__ == "torch.nn.modules.container"
            if caller is None and not (is_container and name in NOT_CALLABLE):
                caller = prefix
            if definer is None and not is_container:
                definer = prefix
        caller, definer = caller or "", definer or ""
        return _Edge(caller, _rel(path, caller), definer, _rel(path, definer))

    def expected(self, path: str) -> int | None:
        if path not in self.counts:
            edge = self.edge(path)
            info = self.info_of(edge.caller)
            children = self.children_of(edge.caller)
            local = calls_per_owner_call(info, edge.rel, children) if info else None
            self.counts[path] = times(self.expected(edge.caller), local)
        return self.counts[path]

    def source(self, path: str) -> SourceSpan | None:
        if path == "":
            return None
        edge = self.edge(path)
        for cls in _init_classes(self.modules[edge.definer]):
            info = self.infos.get(cls)
            found = matching_def(info.children, edge.def_rel) if info else None
            if found is not None:
                return found.span
        return None

    def enrich(self, target: ModuleTarget) -> ModuleTarget:
        every = [target.path, *target.aliases]
        return replace(
            target,
            expected_calls=total([self.expected(p) for p in every]),
            source=self.source(target.path),
        )

    def findings(self, targets: Sequence[ModuleTarget]) -> list[Finding]:
        found: list[Finding] = []
        for target in targets:
            found += self._path_findings(target)
        return found

    def _path_findings(self, target: ModuleTarget) -> list[Finding]:
        found: list[Finding] = []
        info = self.info_of(target.path)
        if target.class_name.endswith("(TorchScript)"):
            found.append(
                Finding(
                    FindingKind.OPAQUE,
                    target.path,
                    "TorchScript module: its children run inside TorchScript, where no Python "
                    "forward is called, so it is measured as one layer; profile the eager module "
                    "for a per-layer view",
                )
            )
        if not target.is_leaf and info is not None:
            if info.note:
                found.append(
                    Finding(
                        FindingKind.NO_SOURCE,
                        target.path,
                        f"{info.qualname}: {info.note}; expected calls of its children are unknown",
                    )
                )
            inline = (
                inline_op_finding(target.path, info, target.selected) if not info.builtin else None
            )
            found += [inline] if inline else []
        if target.path:
            edge = self.edge(target.path)
            caller = self.info_of(edge.caller)
            if caller is not None:
                found += call_findings(target.path, caller, edge.rel)
                if target.expected_calls == 0 and target.class_name not in NOT_CALLABLE:
                    found.append(_never_called(target, caller))
        for alias in target.aliases:
            found.append(
                Finding(
                    FindingKind.ALIAS,
                    target.path,
                    f"the same module object is also '{alias}'; it is measured once, here",
                )
            )
        return found


def _never_called(target: ModuleTarget, caller: ModuleClassInfo) -> Finding:
    owner = caller.qualname.rpartition(".")[2]
    return Finding(
        FindingKind.NEVER_CALLED,
        target.path,
        f"{owner}.forward never calls it (used another way, e.g. through its weights, or "
        "left over); it stays selected but expect 0 calls",
        caller.forward_span,
    )


def _rel(path: str, owner: str) -> str:
    return path[len(owner) + 1 :] if owner else path


__all__ = [
    "calls_per_owner_call",
    "forward_class",
    "matching_calls",
    "matching_def",
    "plan_model",
]
