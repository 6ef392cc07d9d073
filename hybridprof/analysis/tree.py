"""The tree of rows every table shows (each profiled path plus its ancestors, in module order),
and the iteration totals its percentages are shares of. Pure Python: no pandas, no torch.

A container that never runs itself (ModuleList, ModuleDict) has no record, but its time is exactly
its children's: its row carries a record made from theirs (`derived`), so every parent shows a
total. A parent that does run a forward but was not selected (a narrowed selection) stays blank:
its own ops were not measured. The time in no profiled module is the `outside_label` row; a
training step's optimizer has the `OPTIMIZER_ROW` rows, which hold no module's time.

A table too big to show whole keeps its heaviest rows, each under its ancestors so it still reads
as a tree (`heaviest_with_ancestors`: the printed table, the PDF and the notebook), and a
`... N more` row where rows were left out (`with_cuts`).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol, TypeVar

from hybridprof.datamodel import ModuleRecord, ProfileSession, Stat

OUTSIDE_ROW = "(outside modules)"
OUTSIDE_SELECTED_ROW = "(outside profiled modules)"
OPTIMIZER_ROW = "(optimizer)"


@dataclass(frozen=True, slots=True)
class TreeRow:
    path: str  # dotted; "" is the root
    name: str  # the last path component, or the root's class name
    depth: int  # root is 0
    record: ModuleRecord | None  # None for an ancestor that was not profiled
    has_children: bool
    derived: bool = False  # record summed from the children's (a container that never runs)


def outside_label(session: ProfileSession) -> str:
    """The name of the row of time in no profiled module: with the root profiled, that time is
    outside the model (the loss, backward glue, the user's code); else also unselected parents'."""
    return OUTSIDE_ROW if session.record("") is not None else OUTSIDE_SELECTED_ROW


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


def parents_of(paths: Iterable[str]) -> dict[str, str | None]:
    """Every path and each of its ancestors, with its parent (the root's is None).

    Each path walks up only until it meets a node already seen: a chain of 3,000 nested layers
    costs 3,000 steps, not the 4.5 million of listing every record's ancestors.
    """
    parent: dict[str, str | None] = {}
    for path in paths:
        node: str | None = path
        while node is not None and node not in parent:
            up = parent_of(node)
            parent[node] = up
            node = up
    return parent


def _deepest_first(parent: dict[str, str | None]) -> list[str]:
    return sorted(parent, key=depth_of, reverse=True)


def tree_rows(session: ProfileSession) -> list[TreeRow]:
    """Rows in module-tree order, ancestors before descendants.

    Order comes from the plan's targets (named_modules order); a path the plan does not know (a
    hand-made session) ranks by its first record, and an ancestor by its first descendant.
    """
    by_path = {r.path: r for r in session.records}
    order = {t.path: i for i, t in enumerate(session.plan.targets)}
    parent = parents_of(by_path)
    # a node the plan does not know ranks by the first record at or below it (children first)
    first_below = {p: (order.get(p, len(order)), i) for i, p in enumerate(by_path)}
    for node in _deepest_first(parent):
        up = parent[node]
        if up is not None and (up not in first_below or first_below[node] < first_below[up]):
            first_below[up] = first_below[node]
    rank = {n: (order[n], 0) if n in order else first_below[n] for n in parent}
    ordered = _depth_first(rank)
    parents = {parent_of(p) for p in ordered}
    derived = _container_records(session, ordered, by_path)
    return [
        TreeRow(
            path=p,
            name=session.plan.root_class if p == "" else p.rsplit(".", 1)[-1],
            depth=depth_of(p),
            record=by_path.get(p) or derived.get(p),
            has_children=p in parents,
            derived=p in derived,
        )
        for p in ordered
    ]


def _depth_first(rank: dict[str, tuple[int, int]]) -> list[str]:
    """The paths parents first, each one's children in (rank, path) order: the order of sorting
    every path by the (rank, path) chain from the root down to it, in one pass over the tree."""
    children: dict[str | None, list[str]] = {}
    for node in rank:
        children.setdefault(parent_of(node), []).append(node)

    def later_first(nodes: list[str]) -> list[str]:
        return sorted(nodes, key=lambda n: (*rank[n], n), reverse=True)

    ordered: list[str] = []
    pending = later_first(children.get(None, []))  # a stack: the next path is on top
    while pending:
        node = pending.pop()
        ordered.append(node)
        pending.extend(later_first(children.get(node, [])))
    return ordered


def _container_records(
    session: ProfileSession, ordered: list[str], by_path: dict[str, ModuleRecord]
) -> dict[str, ModuleRecord]:
    """Records for the shown containers without a forward, summed from their children's (deepest
    first, so a container of containers adds up too); one with an unmeasured child gets none."""
    containers = {t.path: t for t in session.plan.targets if not t.has_forward}
    children: dict[str, list[str]] = {}
    for path in ordered:
        parent = parent_of(path)
        if parent is not None:
            children.setdefault(parent, []).append(path)
    made: dict[str, ModuleRecord] = {}
    for path in sorted(set(ordered) & containers.keys(), key=depth_of, reverse=True):
        kids = [by_path.get(k) or made.get(k) for k in children.get(path, [])]
        known = [k for k in kids if k is not None]
        if path not in by_path and known and len(known) == len(kids):
            made[path] = summed_record(path, containers[path].class_name, known)
    return made


def summed_record(path: str, class_name: str, parts: Sequence[ModuleRecord]) -> ModuleRecord:
    """A container's record: no calls or self time of its own, totals the sum of its parts'
    (medians summed; min and max summed too, a bound rather than an observed iteration)."""
    first = parts[0]
    zero = replace(first.self_cpu_us, median=0.0, min=0.0, max=0.0)

    def add(stats: Sequence[Stat | None]) -> Stat | None:
        known = [s for s in stats if s is not None]
        if not known:
            return None
        return replace(
            known[0],
            median=sum(s.median for s in known),
            min=sum(s.min for s in known),
            max=sum(s.max for s in known),
        )

    backward = add([p.backward_total_cpu_us for p in parts])
    return replace(
        first,
        path=path,
        class_name=class_name,
        calls=0,
        self_cpu_us=zero,
        total_cpu_us=add([p.total_cpu_us for p in parts]) or zero,
        self_device_us=zero if first.self_device_us is not None else None,
        total_device_us=add([p.total_device_us for p in parts]),
        self_cpu_mem=0,
        cpu_mem=sum(p.cpu_mem for p in parts),
        self_device_mem=0,
        device_mem=sum(p.device_mem for p in parts),
        backward_self_cpu_us=zero if backward is not None else None,
        backward_total_cpu_us=backward,
        backward_self_device_us=zero if first.backward_self_device_us is not None else None,
        param_count=0,
        input_shapes=(),
        output_shapes=(),
        ops=(),
        aliases=(),
        is_leaf=False,
        per_iteration=None,  # no series of its own: its intervals are its children's
    )


def total_profiled_us(session: ProfileSession) -> float:
    """Median whole-iteration time; else the sum of the outermost records (no profiled ancestor).

    Summing only outermost records never counts a nested layer twice, whatever their depths.
    """
    totals = [(r.path, r.total_cpu_us.median) for r in session.records]
    return measured_total_us(session.iteration_cpu_us, totals)


def measured_total_us(iteration_us: Sequence[float], totals: Sequence[tuple[str, float]]) -> float:
    """`total_profiled_us` of a session's iteration times and its records' (path, total median)
    pairs, in record order (the history reads these without building the records)."""
    if iteration_us:
        return float(statistics.median(iteration_us))  # as Stat.of
    profiled = {path for path, _ in totals}
    return sum(total for path, total in totals if _outermost(path, profiled))


def _outermost(path: str, profiled: set[str]) -> bool:
    """No ancestor of `path` is profiled (walked up only to the first one that is)."""
    up = parent_of(path)
    while up is not None:
        if up in profiled:
            return False
        up = parent_of(up)
    return True


def step_share_us(rec: ModuleRecord) -> float:
    """A layer's part of an iteration: its forward total, plus its backward total in a training step
    (the iteration's total then holds both passes)."""
    backward = rec.backward_total_cpu_us.median if rec.backward_total_cpu_us else 0.0
    return rec.total_cpu_us.median + backward


def inclusive_us(session: ProfileSession) -> dict[str, float]:
    """Per row, the time its share of the iteration counts: with the outside time measured, the
    own times of its subtree (its self and every profiled descendant's, so a parent's share is
    the sum of its rows' shares); else its total, forward plus backward (`step_share_us`)."""
    if session.outside_cpu_us is None:
        return {r.path: step_share_us(r) for r in session.records}
    return subtree_sums(session.records, step_self_us)


def subtree_sums(
    records: Sequence[ModuleRecord], own: Callable[[ModuleRecord], float]
) -> dict[str, float]:
    """Per path (each record's and each of its ancestors'), `own` summed over its subtree's
    records: the figure a parent's total is when totals are the sums of their rows."""
    return sums_over_subtrees([r.path for r in records], [own(r) for r in records])


def sums_over_subtrees(paths: Sequence[str], values: Sequence[float]) -> dict[str, float]:
    """`subtree_sums` of each record's path and value, in record order (the history reads these
    without building the records)."""
    sums: dict[str, float] = {}
    for path, value in zip(paths, values, strict=True):
        sums[path] = sums.get(path, 0.0) + value
    parent = parents_of(sums)
    for path in _deepest_first(parent):  # a subtree is complete before it is added to its parent
        up = parent[path]
        if up is not None:
            sums[up] = sums.get(up, 0.0) + sums.get(path, 0.0)
    return sums


def step_self_us(rec: ModuleRecord) -> float:
    """A layer's own part of an iteration: its forward self time plus its backward self time."""
    backward = rec.backward_self_cpu_us.median if rec.backward_self_cpu_us else 0.0
    return rec.self_cpu_us.median + backward


class TreeNode(Protocol):
    """A row of a tree table: its path, its parent's (None at a root) and its depth."""

    @property
    def path(self) -> str: ...

    @property
    def parent(self) -> str | None: ...

    @property
    def depth(self) -> int: ...


Node = TypeVar("Node", bound=TreeNode)


@dataclass(frozen=True, slots=True)
class CutRows:
    """Rows a table left out, shown as one `... N more` row where they stood: `count` rows (whole
    subtrees, siblings next to each other) under `parent`, so the table never reads as a tree
    with holes."""

    parent: str | None
    depth: int
    count: int
    first: str  # the path of the first row left out

    @property
    def path(self) -> str:
        return f"{self.first}\u2026"  # the first row's path and an ellipsis: a key of its own

    @property
    def label(self) -> str:
        return f"... {self.count} more"


def heaviest_with_ancestors(
    rows: Sequence[Node], candidates: Iterable[Node], weight: Callable[[Node], float], limit: int
) -> tuple[list[Node], set[str]]:
    """The heaviest of `candidates` (by `weight`, heaviest first; ties keep their order), each
    taken with its ancestors among `rows` (in tree order) that are not kept yet, while the lines
    shown stay within `limit`: the rows kept and one `... N more` line per run of siblings left
    out (`with_cuts`); the first that would pass it ends the choice. Returns the candidates taken
    and the paths of every row kept (theirs and their ancestors')."""
    parents: Mapping[str, str | None] = {row.path: row.parent for row in rows}
    siblings = _Siblings(rows)
    taken: list[Node] = []
    kept: set[str] = set()
    cuts = 1 if rows else 0  # nothing kept: every row is one run left out
    for row in sorted(candidates, key=lambda r: -weight(r)):
        chain = _unkept_chain(row.path, parents, kept)
        more = siblings.cuts_added(list(reversed(chain)), kept)
        if len(kept) + len(chain) + cuts + more > limit:
            break
        kept.update(chain)
        cuts += more
        taken.append(row)
    return taken, kept


class _Siblings:
    """Each row's place among its parent's children, to count the runs of siblings left out as
    rows are kept (a change of at most one run per row, worked out from its two neighbours)."""

    def __init__(self, rows: Sequence[TreeNode]) -> None:
        paths = {row.path for row in rows}
        self.children: dict[str | None, list[str]] = {}
        for row in rows:
            parent = row.parent if row.parent in paths else None
            self.children.setdefault(parent, []).append(row.path)
        self.place = {p: (up, i) for up, kids in self.children.items() for i, p in enumerate(kids)}

    def cuts_added(self, chain: list[str], kept: set[str]) -> int:
        """How many more runs left out there are once `chain` (top down, each the parent of the
        next, none kept yet) is kept too."""
        added = 0
        for path in chain:
            parent, i = self.place[path]
            kids = self.children[parent]
            cut_left = i > 0 and kids[i - 1] not in kept
            cut_right = i + 1 < len(kids) and kids[i + 1] not in kept
            added += int(cut_left) + int(cut_right) - 1  # its run splits, shrinks or ends
            added += 1 if path in self.children else 0  # its children: one run left out
        return added


def with_cuts(rows: Sequence[Node], kept: set[str]) -> list[Node | CutRows]:
    """The rows kept in tree order, with a `CutRows` where each run of siblings left out stood
    (`kept` holds every kept row's ancestors among `rows`, as `heaviest_with_ancestors` gives)."""
    paths = {row.path for row in rows}
    lines: list[Node | CutRows] = []
    for row in rows:
        parent = row.parent if row.parent in paths else None
        if row.path in kept:
            lines.append(row)
        elif parent is None or parent in kept:  # the top of a subtree left out
            last = lines[-1] if lines else None
            if isinstance(last, CutRows) and last.parent == parent:
                lines[-1] = replace(last, count=last.count + 1)
            else:
                lines.append(CutRows(parent, row.depth, 1, row.path))
        else:  # inside a subtree left out: counted in its top's line
            top = lines[-1]
            assert isinstance(top, CutRows)
            lines[-1] = replace(top, count=top.count + 1)
    return lines


def _unkept_chain(path: str, parents: Mapping[str, str | None], kept: set[str]) -> list[str]:
    """`path` and its ancestors among the rows, up to the first one kept already."""
    chain: list[str] = []
    current: str | None = path
    while current is not None and current not in kept:
        chain.append(current)
        up = parents.get(current)
        current = up if up in parents else None
    return chain
