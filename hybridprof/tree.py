"""The tree of rows every table shows (each profiled path plus its ancestors, in module order),
and the iteration totals its percentages are shares of. Pure Python: no pandas, no torch.

Part of the data layer: the data model uses it (`ProfileSession.to_dataframe`), so it imports
`datamodel` for types only.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the data model's to_dataframe uses this module; types only, no cycle
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


def total_profiled_us(session: ProfileSession) -> float:
    """Median whole-iteration time; else the sum of the outermost records (no profiled ancestor).

    Summing only outermost records never counts a nested layer twice, whatever their depths.
    """
    if session.iteration_cpu_us:
        return float(statistics.median(session.iteration_cpu_us))  # as Stat.of
    profiled = {r.path for r in session.records}
    return sum(
        r.total_cpu_us.median
        for r in session.records
        if not any(a in profiled for a in ancestors(r.path))
    )


def step_share_us(rec: ModuleRecord) -> float:
    """A layer's part of an iteration: its forward total, plus its backward total in a training step
    (the iteration's total then holds both passes)."""
    backward = rec.backward_total_cpu_us.median if rec.backward_total_cpu_us else 0.0
    return rec.total_cpu_us.median + backward
