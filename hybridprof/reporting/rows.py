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
    """Rows in module-tree order (the plan's order), ancestors before descendants."""
    by_path = {r.path: r for r in session.records}
    wanted: set[str] = set()
    for path in by_path:
        wanted.add(path)
        wanted.update(ancestors(path))
    order = {t.path: i for i, t in enumerate(session.plan.targets)}
    rank = {p: (order.get(p, len(order)), i) for i, p in enumerate(by_path)}
    ordered = sorted(wanted, key=lambda p: _sort_key(p, order, rank))
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


def _sort_key(
    path: str, order: dict[str, int], rank: dict[str, tuple[int, int]]
) -> tuple[tuple[int, int, str], ...]:
    # Sort by the chain of (plan position) from the root, so children follow their parent even
    # when a parent is missing from the plan (a hand-made session).
    chain = [*ancestors(path), path]
    return tuple((*rank.get(p, (order.get(p, len(order)), 0)), p) for p in chain)
