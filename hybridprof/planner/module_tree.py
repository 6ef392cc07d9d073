"""The module tree of a live model: dotted paths, aliases, and which paths a user selected.

Paths follow `named_modules` order with the root as `""`. A module object reachable under two paths
(a shared block) gets one canonical path (the first one `named_modules` reaches) and lists the
others as `aliases`; selecting an alias selects the canonical path, so the module is patched and
counted once.

`param_count` counts a module's OWN parameters (`recurse=False`), so summing it over a tree never
counts a weight twice; a container such as `nn.Sequential` therefore has 0.
"""

from __future__ import annotations

import difflib
import fnmatch
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timezone

import torch
from torch import nn

from hybridprof.datamodel import DEFAULT_STRATEGY, ModuleTarget, ProfilePlan
from hybridprof.errors import SelectionError, UsageError
from hybridprof.planner.module_names import (
    Typed,
    check_child_name,
    checked_class_names,
    typable,
    typed_parts,
)
from hybridprof.planner.weight_holders import held_children

Selector = str | Sequence[str]


@dataclass(frozen=True, slots=True)
class TreeNode:
    """One module object: its canonical path and every other path that reaches it."""

    path: str
    module: nn.Module
    aliases: tuple[str, ...]


def walk(model: nn.Module) -> list[TreeNode]:
    """Every distinct module object once, in `named_modules` order, with its alias paths."""
    first: dict[int, str] = {}
    modules: dict[int, nn.Module] = {}
    others: dict[int, list[str]] = {}
    for path, module in named_modules(model):
        key = id(module)
        if key in first:
            others[key].append(path)
        else:
            first[key], modules[key], others[key] = path, module, []
    return [TreeNode(first[k], modules[k], tuple(others[k])) for k in first]


def named_modules(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """`named_modules(remove_duplicate=False)`, except that a TorchScript module is a leaf, a
    `torch.compile` wrapper is its eager module under the wrapper's path, and a cycle is cut.

    A scripted (or traced) module runs its children inside TorchScript, where no Python `forward`
    is ever called, so they cannot be measured one by one: the module is profiled as one layer.
    `torch.compile(module)` wraps the module in an `OptimizedModule` whose only child is the
    module itself (`_orig_mod`): its layers keep the paths they have without the wrapper, and are
    measured from the kernels compiled for them (runtime/compiled/). A child that is one of its
    own ancestors (`self.child.root = self`) is yielded at that path, an alias of the ancestor,
    and not walked into again: torch's own walk stops there too (its memo), where a plain
    recursion would never end. Iterative, so a chain thousands of modules deep needs no deep
    Python stack. Child names that no path can spell are refused (see `check_child_name`).
    """
    return _walk(model, eager_module, check_names=True)


def every_module(model: nn.Module) -> Iterator[tuple[str, nn.Module]]:
    """torch's `named_modules(remove_duplicate=False)` with a cycle cut, iterative: every path,
    `torch.compile` wrappers included (their paths hold `_orig_mod`). torch's own walk without its
    memo never ends on a cycle, and recurses once per level."""
    return _walk(model, lambda module: module, check_names=False)


def _walk(
    model: nn.Module, unwrap: Callable[[nn.Module], nn.Module], *, check_names: bool
) -> Iterator[tuple[str, nn.Module]]:
    pending: list[tuple[str, nn.Module, int]] = [("", unwrap(model), 0)]
    above: list[int] = []  # ids of the modules on the path to the one being walked, by depth
    on_path: set[int] = set()  # the same ids, to look up (never one twice: see below)
    yielded = 0
    while pending:
        path, module, depth = pending.pop()
        while len(above) > depth:
            on_path.discard(above.pop())
        yielded += 1
        if yielded > MAX_PATHS:
            raise UsageError(
                f"the model's module tree has over {MAX_PATHS:,} paths (modules shared under "
                "many parents, each of their children counted under every path); profile a "
                "part of it"
            )
        yield path, module
        if is_scripted(module) or id(module) in on_path:
            continue
        above.append(id(module))
        on_path.add(id(module))
        children = [(n, c) for n, c in module._modules.items() if c is not None]
        for name, child in reversed(children):
            if check_names:
                check_child_name(path, name)
            pending.append((f"{path}.{name}" if path else name, unwrap(child), depth + 1))


# More paths than any real model has (a 10,000-layer model has ~11,000): beyond it, a tree whose
# shared modules multiply the paths at every level would take the walk forever.
MAX_PATHS = 1_000_000


def is_scripted(module: nn.Module) -> bool:
    return isinstance(module, torch.jit.ScriptModule)


def eager_module(module: nn.Module) -> nn.Module:
    """The module a `torch.compile` wrapper (dynamo's `OptimizedModule`) holds; else itself."""
    if not type(module).__module__.startswith("torch._dynamo"):
        return module
    inner = module._modules.get("_orig_mod")
    return eager_module(inner) if isinstance(inner, nn.Module) else module


def class_name_of(module: nn.Module) -> str:
    """The class a user wrote: a scripted module reports its original class."""
    if is_scripted(module):
        return f"{getattr(module, 'original_name', type(module).__name__)} (TorchScript)"
    return type(module).__name__


def _class_names(module: nn.Module) -> tuple[str, str]:
    return class_name_of(module), qualname_of(module)


def qualname_of(module: nn.Module) -> str:
    cls = type(module)
    return f"{cls.__module__}.{cls.__qualname__}"


def depth_of(path: str) -> int:
    return 0 if path == "" else path.count(".") + 1


def module_targets(model: nn.Module) -> tuple[ModuleTarget, ...]:
    """The whole tree as unselected targets (`selected=False`, reason "")."""
    return tuple(
        ModuleTarget(
            path=node.path,
            class_name=names[0],
            qualname=names[1],
            depth=depth_of(node.path),
            is_leaf=is_scripted(node.module) or next(iter(node.module.children()), None) is None,
            selected=False,
            reason="",
            aliases=node.aliases,
            param_count=sum(p.numel() for p in node.module.parameters(recurse=False)),
            has_forward=has_forward(node.module),
        )
        for node in walk(model)
        for names in [checked_class_names(node.path, _class_names(node.module))]
    )


def has_forward(module: nn.Module) -> bool:
    """Whether calling the module runs a forward (ModuleList and ModuleDict have none)."""
    if "forward" in vars(module):  # an instance-level forward
        return True
    owner = next(k for k in type(module).__mro__ if "forward" in vars(k))
    return owner is not nn.Module


def module_at(model: nn.Module, path: str) -> nn.Module:
    """The module at a dotted path ("" is the root); SelectionError with close matches if absent."""
    if path == "":
        return model
    found = dict(named_modules(model))
    if path not in found:
        raise SelectionError(_no_match_message(repr(path), list(found), path))
    return found[path]


def select_targets(
    model: nn.Module,
    paths: Sequence[Selector] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    root_name: str | None = None,
    leaves_only: bool = False,
) -> tuple[ModuleTarget, ...]:
    """All modules, with `selected`/`reason` set.

    Without selectors every module that runs a forward is selected (the complete selection: each
    row's self time is its own ops and Python, so the rows add up to the whole forward), or only
    the leaves with `leaves_only` (torchprof's default). `paths` are dotted strings
    (`"features.0"`) or torchprof tuples whose first element is the root class name
    (`("AlexNet", "features", "0")`); `globs` are fnmatch patterns (`features.*`, `blocks.*.attn`);
    `depth=N` selects the modules N levels below the root plus any shallower leaf. The union of all
    selectors is selected. A selector that matches nothing raises `SelectionError`. A leaves-only
    selection also takes a parent that uses a child's weights without calling it (see
    `weight_holders`): it does that child's work itself; and every FSDP2 unit (a module
    `fully_shard` sharded): its row holds its gathers and reduce-scatters, which FSDP2 runs in
    its hooks, outside its children.
    """
    return select_among(
        module_targets(model),
        paths,
        globs,
        depth,
        root_name or type(eager_module(model)).__name__,
        leaves_only,
        weight_holders(model) if leaves_only else {},
        fsdp_units(model) if leaves_only else frozenset(),
    )


def fsdp_units(model: nn.Module) -> frozenset[str]:
    """The paths of the FSDP2 units of `model` (none when torch has no FSDP2)."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return frozenset()
    return frozenset(path for path, m in named_modules(model) if isinstance(m, FSDPModule))


def weight_holders(model: nn.Module) -> dict[str, tuple[str, ...]]:
    """Each module that uses some children's weights without calling them, with those children."""
    return {path: held for path, module in named_modules(model) if (held := held_children(module))}


def select_among(
    targets: tuple[ModuleTarget, ...],
    paths: Sequence[Selector] | None,
    globs: Sequence[str],
    depth: int | None,
    root: str,
    leaves_only: bool = False,
    holders: Mapping[str, tuple[str, ...]] | None = None,
    units: frozenset[str] = frozenset(),
) -> tuple[ModuleTarget, ...]:
    """Mark `targets` selected or not, with the reason (also used by the static-only planner).
    `holders`: the parents that use children's weights without calling them (`weight_holders`);
    `units`: the FSDP2 units (`fsdp_units`)."""
    if not paths and not globs and depth is None:
        held = holders or {}

        def choose(t: ModuleTarget) -> tuple[bool, str]:
            if not leaves_only:
                return _complete_reason(t)
            return _leaf_reason(t, held.get(t.path, ()), t.path in units)

        return tuple(replace(t, selected=s, reason=r) for t in targets for s, r in [choose(t)])
    reasons = _selection_reasons(targets, paths or (), globs, depth, root)
    return tuple(
        replace(t, selected=t.path in reasons, reason=reasons.get(t.path, "not selected"))
        for t in targets
    )


def _leaf_reason(target: ModuleTarget, held: tuple[str, ...], unit: bool) -> tuple[bool, str]:
    if target.is_leaf:
        return True, "leaf"
    if unit:
        return True, "an FSDP2 unit: its row holds its communication"
    if held:
        return True, f"uses {', '.join(held)}'s weights without calling it: a leaf in effect"
    return False, "not a leaf (--leaves-only)"


def _complete_reason(target: ModuleTarget) -> tuple[bool, str]:
    if target.is_leaf:
        return True, "leaf"
    if target.has_forward:
        return True, "runs its own forward"
    return False, "container without a forward (its children are measured)"


def _selection_reasons(
    targets: tuple[ModuleTarget, ...],
    paths: Sequence[Selector],
    globs: Sequence[str],
    depth: int | None,
    root: str,
) -> dict[str, str]:
    canonical = {alias: t.path for t in targets for alias in (t.path, *t.aliases)}
    typed = [part for s in paths if isinstance(s, Typed) for part in typed_parts(s, canonical)]
    paths = [s for s in paths if not isinstance(s, Typed)] + [p for p, glob in typed if not glob]
    globs = [*globs, *(p for p, glob in typed if glob)]
    by_path = {t.path: t for t in targets}
    children = _children_of(targets)
    reasons: dict[str, str] = {}
    for selector in paths:
        path = _dotted(selector, root)
        if path not in canonical:
            raise SelectionError(_no_match_message(_show(selector), list(canonical), path))
        found = _runs_for(by_path[canonical[path]], children, f"path {path or '(root)'}")
        for hit, reason in found.items():
            reasons.setdefault(hit, reason)
    for pattern in globs:
        hits = [canonical[p] for p in canonical if fnmatch.fnmatchcase(p, pattern)]
        if not hits:
            raise SelectionError(_no_match_message(f"glob {pattern!r}", list(canonical), pattern))
        for hit in hits:
            reasons.setdefault(hit, f"matches {pattern}")
    if depth is not None:
        reasons.update(_depth_reasons(targets, depth, reasons))
    return reasons


def _depth_reasons(
    targets: tuple[ModuleTarget, ...], depth: int, taken: dict[str, str]
) -> dict[str, str]:
    if depth < 0:
        raise SelectionError(f"depth must be 0 or more, got {depth}; 0 is the root, 1 its children")
    # A depth past a branch's bottom keeps that branch's leaves, as torchinfo's depth does.
    chosen = [
        t
        for t in targets
        if t.path not in taken and (t.depth == depth or (t.is_leaf and t.depth < depth))
    ]
    reasons: dict[str, str] = {}
    children = _children_of(targets)
    for target in chosen:
        reasons.update(_runs_for(target, children, f"depth {depth}"))
    return reasons


def _children_of(targets: tuple[ModuleTarget, ...]) -> dict[str, list[ModuleTarget]]:
    kids: dict[str, list[ModuleTarget]] = {}
    for t in targets:
        if t.path:
            kids.setdefault(t.path.rpartition(".")[0], []).append(t)
    return kids


def _runs_for(
    target: ModuleTarget, children: dict[str, list[ModuleTarget]], reason: str
) -> dict[str, str]:
    """`target`, or, for a container that never runs (a ModuleList, a ModuleDict), its entries
    in its place (theirs if they are containers too): a never-called layer would leave its time
    to "(outside profiled modules)"."""
    if target.has_forward or target.is_leaf or not children.get(target.path):
        return {target.path: reason}
    stand_in = f"{reason}, in place of {target.path} ({target.class_name}, which never runs)"
    found: dict[str, str] = {}
    for child in children[target.path]:
        found.update(_runs_for(child, children, stand_in))
    return found


def _dotted(selector: Selector, root: str) -> str:
    """A dotted path from a string or a torchprof tuple (root class name first)."""
    if isinstance(selector, str):
        return selector
    parts = [str(p) for p in selector]
    if not parts or parts[0] != root:
        raise SelectionError(
            f"path {_show(selector)} must start with the root class name {root!r}, "
            f"e.g. ({root!r}, 'features', '0'), or be a dotted string like 'features.0'"
        )
    return ".".join(parts[1:])


def _show(selector: Selector) -> str:
    return repr(selector) if isinstance(selector, str) else repr(tuple(selector))


def partition_selectors(
    model: nn.Module, paths: Sequence[Selector]
) -> tuple[list[Selector], list[tuple[Selector, list[str]]]]:
    """Split `paths` into the selectors naming a module and the others, each with its closest
    dotted paths (for torchprof's mode, which ignored an unknown path instead of failing)."""
    root = type(eager_module(model)).__name__
    known_paths = [p for t in module_targets(model) for p in (t.path, *t.aliases)]
    known: list[Selector] = []
    unknown: list[tuple[Selector, list[str]]] = []
    for selector in paths:
        parts = [selector] if isinstance(selector, str) else [str(p) for p in selector]
        rooted = isinstance(selector, str) or (bool(parts) and parts[0] == root)
        path = selector if isinstance(selector, str) else ".".join(parts[1:])
        if rooted and path in known_paths:
            known.append(selector)
        else:
            close = difflib.get_close_matches(path, [k for k in known_paths if k], n=3, cutoff=0.5)
            unknown.append((selector, close))
    return known, unknown


def _no_match_message(what: str, known: Sequence[str], query: str | None = None) -> str:
    query = what.strip("'\"") if query is None else query
    others = [k for k in known if k and k != query]  # never suggest what was typed
    close = difflib.get_close_matches(query, others, n=4, cutoff=0.5)
    hint = f"; did you mean: {', '.join(map(typable, close))}?" if close else ""
    return f"no module matches {what}{hint} (list the paths with `hybridprof analyze`)"


def tree_plan(
    model: nn.Module,
    paths: Sequence[Selector] | None = None,
    globs: Sequence[str] = (),
    depth: int | None = None,
    strategy: str = DEFAULT_STRATEGY,
    leaves_only: bool = False,
) -> ProfilePlan:
    """A ProfilePlan from the live model alone (no source reading); the static planner enriches
    it."""
    import torch

    from hybridprof.planner.compat import probe
    from hybridprof.planner.name_bounds import checked_names

    selectors = [_show(p) for p in paths or ()] + [f"glob {g}" for g in globs]
    if depth is not None:
        selectors.append(f"depth {depth}")
    if leaves_only and not selectors:
        selectors.append("leaves only")
    return ProfilePlan(
        root_class=type(eager_module(model)).__name__,
        targets=checked_names(select_targets(model, paths, globs, depth, leaves_only=leaves_only)),
        compat=probe().choices(),
        strategy=strategy,
        selectors=tuple(selectors),
        torch_version=str(torch.__version__),
        created_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
    )


__all__ = [
    "TreeNode",
    "Typed",
    "depth_of",
    "has_forward",
    "module_at",
    "module_targets",
    "partition_selectors",
    "qualname_of",
    "select_targets",
    "tree_plan",
    "typed_parts",
    "walk",
]
