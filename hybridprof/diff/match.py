"""Which layer of one run is which layer of the other: by path, then by class and shape, then by
class and position; what is left is added or removed. Runs of different models (other root
classes) are not paired at all unless asked: a CNN's Conv2d is no earlier version of a GPT's."""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.datamodel import ModuleRecord, ProfileSession
from hybridprof.diff.result import MatchRule

Pair = tuple[ModuleRecord | None, ModuleRecord | None, MatchRule]


def same_model(base: ProfileSession, new: ProfileSession) -> bool:
    """Both runs profile the same model class (their roots' classes are one)."""
    return base.plan.root_class == new.plan.root_class


def match_sessions(
    base: ProfileSession, new: ProfileSession, across_models: bool = False
) -> list[Pair]:
    """The records' pairs; none across different models unless `across_models`."""
    if across_models or same_model(base, new):
        return match_records(base.records, new.records)
    return [(r, None, "removed") for r in base.records] + [(None, r, "added") for r in new.records]


def match_records(base: Sequence[ModuleRecord], new: Sequence[ModuleRecord]) -> list[Pair]:
    """Pairs of records (base, new, rule); a record of one run only is paired with None."""
    new_by_path = {r.path: r for r in new}
    pairs: list[Pair] = []
    left_base: list[tuple[int, ModuleRecord]] = []
    taken: set[str] = set()
    for index, record in enumerate(base):
        other = new_by_path.get(record.path)
        if other is None:
            left_base.append((index, record))
        else:
            pairs.append((record, other, "path"))
            taken.add(record.path)
    left_new = [(i, r) for i, r in enumerate(new) if r.path not in taken]
    for rule in ("class and shape", "class and position"):
        left_base = _match_by(rule, left_base, left_new, pairs)
        matched = {id(n) for _, n, _ in pairs if n is not None}
        left_new = [(i, r) for i, r in left_new if id(r) not in matched]
    pairs.extend((r, None, "removed") for _, r in left_base)
    pairs.extend((None, r, "added") for _, r in left_new)
    return pairs


def _match_by(
    rule: MatchRule,
    left_base: list[tuple[int, ModuleRecord]],
    left_new: list[tuple[int, ModuleRecord]],
    pairs: list[Pair],
) -> list[tuple[int, ModuleRecord]]:
    """Match what is left by `rule`; returns the base records still unmatched."""
    free = list(left_new)
    unmatched = []
    for index, record in left_base:
        fits = [(i, r) for i, r in free if _fits(rule, record, r, index, i)]
        if not fits:
            unmatched.append((index, record))
            continue
        best = min(fits, key=lambda item: abs(item[0] - index))
        free.remove(best)
        pairs.append((record, best[1], rule))
    return unmatched


def _fits(rule: MatchRule, a: ModuleRecord, b: ModuleRecord, ia: int, ib: int) -> bool:
    if a.class_name != b.class_name or a.is_leaf != b.is_leaf:
        return False
    if rule == "class and shape":
        return (a.input_shapes, a.output_shapes, a.param_count) == (
            b.input_shapes,
            b.output_shapes,
            b.param_count,
        ) and bool(a.input_shapes or a.output_shapes or a.param_count)
    return ia == ib  # class and position: the same place in the run's layer order
