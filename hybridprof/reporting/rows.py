"""The tree of rows every table shows: each profiled path plus its ancestors, in module order."""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.datamodel import ModuleRecord, ProfileSession


@dataclass(frozen=True, slots=True)
class TreeRow:
    path: str  # dotted; "" is the root
    name: str  # the last path component, or the root's class name
    depth: int  # root is 0
    record: ModuleRecord | None  # None for an ancestor that was not profiled
    has_children: bool


def parent_of(path: str) -> str | None:
    if path == "":
        return None
    return path.rsplit(".", 1)[0] if "." in path else ""


def ancestors(path: str) -> list[str]:
    """From the root down to the parent of `path`."""
    chain: list[str] = []
    parent = parent_of(path)
    while parent is not None:
        chain.append(parent)
        parent = parent_of(parent)
    return list(reversed(chain))


def depth_of(path: str) -> int:
    return 0 if path == "" else path.count(".") + 1


def tree_rows(session: ProfileSession) -> list[TreeRow]:
    """Rows in module-tree order, ancestors before descendants.

    Order comes from the plan's targets (named_modules order); a path the plan does not know (a
    hand-made session) ranks by its first record, and an ancestor by its first descendant.
    """
    by_path = {r.path: r for r in session.records}
    order = {t.path: i for i, t in enumerate(session.plan.targets)}
    rank: dict[str, tuple[int, int]] = {}
    for index, path in enumerate(by_path):
        own = (order.get(path, len(order)), index)
        for node in [*ancestors(path), path]:
            known = order.get(node)
            candidate = (known, 0) if known is not None else own
            rank[node] = min(rank.get(node, candidate), candidate)
    ordered = sorted(rank, key=lambda p: tuple((*rank[n], n) for n in [*ancestors(p), p]))
    parents = {parent_of(p) for p in ordered}
    return [
        TreeRow(
            path=p,
            name=session.plan.root_class if p == "" else p.rsplit(".", 1)[-1],
            depth=depth_of(p),
            record=by_path.get(p),
            has_children=p in parents,
        )
        for p in ordered
    ]
