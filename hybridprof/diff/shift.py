"""What moved a whole run, not one layer: the between-run shift, and knock-on changes (no torch).

Each run's confidence intervals describe its own iterations. Two runs made minutes apart can
differ as a whole: another process took a core, the CPU clocked down, the caches were shared
differently. On a busy 2-core machine, two runs of one unchanged model had every layer faster in
the second (figures: benchmarks/README.md, "Measured in passing"). Judged against each run's own
intervals alone, each of those layers
is "faster".

So the comparison first estimates that shift per time figure: the median, over the layers matched
in both runs, of new median / base median (a ratio, so big and small layers count alike; the median,
so a few layers that really changed do not move it), with an order-statistic interval over layers.
Each layer is then judged beyond the shift: is it slower than the rest of the run moved? Layers of
different kinds do not move alike, though: on that busy machine the small LayerNorm and GELU layers
of one run moved about twice as far as its Linears. So the spread of the layers' ratios around the
shift (1.4826 x their median absolute deviation, in log space: a robust standard deviation) sets a
band, SPREAD_K of those wide, within which a layer's move is the runs' own scatter, not a change;
on a quiet machine the band is about the threshold, on a busy one it widens. A change
that slows every layer alike (another dtype, fewer threads) therefore shows in the whole iteration's
figure and in the shift the summary prints, not as every layer slower.

A knock-on change is the other case where a layer moves without a change of its own: a layer after
one that got heavier runs in caches that layer filled (measured without any profiler, stepping both
variants in turn: the ReLU and LayerNorm after a Linear that does 4x the work ran slower).
A slower or faster layer whose own work is identical in both runs (class, calls, parameter count,
input and output shapes, its ops and their call counts, and the parameters of its children not
profiled, whose work runs in its self time) is marked knock-on when some other layer's own work
did change and its change stays under KNOCK_ON_MAX_PCT; reports list it apart from the
regressions. Every other layer's verdict carries what of its own work changed
(`own_work_changes`), so a GELU inside a widened MLP reads as "its input grew", not as an
unchanged layer slower.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from hybridprof.analysis.stats import CONFIDENCE, median_ci, median_or_zero
from hybridprof.datamodel import ModuleRecord, ProfileSession

MIN_SHIFT_LAYERS = 5  # fewer matched layers: no shift is estimated, verdicts stay absolute
SPREAD_K = 3.0  # a layer moving more than 3 robust standard deviations from the shift stands out
_MAD_TO_SD = 1.4826  # the median absolute deviation of normal values, times this, is their sd
KNOCK_ON_MAX_PCT = 50.0  # a bigger change of a layer whose own work is unchanged is its own


@dataclass(frozen=True, slots=True)
class RunShift:
    """How much one time figure of every layer moved together between the runs (new / base)."""

    quantity: str
    factor: float  # the median over layers of new median / base median
    low: float  # its confidence interval over layers (the factor itself with few layers)
    high: float
    layers: int  # how many layers it was estimated from
    spread: float = 0.0  # robust standard deviation of the layers' log ratios around the shift

    def pct(self) -> float:
        return 100.0 * (self.factor - 1.0)

    def band_pct(self) -> float:
        """How far (in percent) a layer may move from the shift and still be the runs' scatter."""
        return 100.0 * (math.exp(SPREAD_K * self.spread) - 1.0)


def estimate_shift(quantity: str, medians: Iterable[tuple[float, float]]) -> RunShift | None:
    """The shift of `quantity` from (base median, new median) pairs; None with too few layers."""
    logs = [math.log(new / base) for base, new in medians if base > 0 and new > 0]
    if len(logs) < MIN_SHIFT_LAYERS:
        return None
    center = median_or_zero(logs)
    interval = median_ci(logs, CONFIDENCE)
    low, high = (interval.low, interval.high) if interval else (center, center)
    spread = _MAD_TO_SD * median_or_zero([abs(v - center) for v in logs])
    return RunShift(quantity, math.exp(center), math.exp(low), math.exp(high), len(logs), spread)


def same_own_work(
    base: ModuleRecord, new: ModuleRecord, base_iterations: int, new_iterations: int
) -> bool:
    """True when a layer did the same work in both runs: the same class, calls per iteration,
    parameters, input and output shapes, and ops with the same calls per iteration."""
    return not own_work_changes(base, new, base_iterations, new_iterations)


Shapes = tuple[tuple[str, ...], tuple[str, ...]]  # a layer's input and output shapes


@dataclass(frozen=True, slots=True)
class AroundLayer:
    """What of a layer's own work its record does not hold. The parameters of its descendants
    that are not profiled: their work runs in its self time (a Block profiled at --depth 2 holds
    its MLP's matmuls). The shapes its profiled children take and give (path relative to it):
    its own code handles those tensors between their calls (nanoGPT's MLP runs `F.gelu` on its
    `fc`'s output)."""

    unprofiled_params: int = 0
    children: tuple[tuple[str, Shapes], ...] = ()


def around_layers(session: ProfileSession) -> dict[str, AroundLayer]:
    """Per profiled path, what `AroundLayer` holds for it in this session."""
    profiled = {r.path for r in session.records}
    params: dict[str, int] = {}
    for t in session.plan.targets:
        # A selected layer that never ran did no work, in no one's self time.
        holder = None if t.selected or t.path in profiled else _nearest_ancestor(t.path, profiled)
        if holder is not None and t.param_count:
            params[holder] = params.get(holder, 0) + t.param_count
    children: dict[str, list[tuple[str, Shapes]]] = {}
    for r in session.records:
        parent = _nearest_ancestor(r.path, profiled)
        if parent is not None:
            name = r.path[len(parent) + 1 :] if parent else r.path
            children.setdefault(parent, []).append((name, (r.input_shapes, r.output_shapes)))
    return {
        path: AroundLayer(params.get(path, 0), tuple(sorted(children.get(path, []))))
        for path in profiled
    }


def _nearest_ancestor(path: str, among: set[str]) -> str | None:
    """The closest proper ancestor of `path` in `among` (the root is ""), None if none is."""
    while path:
        path = path.rpartition(".")[0]
        if path in among:
            return path
    return None


OPS_SAID = 3  # op (and children's shape) differences a line names; the rest are counted


def own_work_changes(
    base: ModuleRecord,
    new: ModuleRecord,
    base_iterations: int,
    new_iterations: int,
    around: tuple[AroundLayer, AroundLayer] = (AroundLayer(), AroundLayer()),
) -> tuple[str, ...]:
    """What of a layer's own work differs between the runs, each in a few words (`input 2x16x128
    -> 2x16x512`); empty when it did the same work. A layer whose input grew does more work
    with the same code: its verdict says so, rather than read as an unchanged layer slower.
    `around`: in each run, what its record does not hold (`around_layers`)."""
    said = []
    if base.class_name != new.class_name:
        said.append(f"class {base.class_name} -> {new.class_name}")
    if base.param_count != new.param_count:
        said.append(f"parameters {base.param_count:,} -> {new.param_count:,}")
    before, after = around
    if before.unprofiled_params != after.unprofiled_params:
        said.append(
            f"parameters of its children not profiled {before.unprofiled_params:,} -> "
            f"{after.unprofiled_params:,}"
        )
    for what, old, now in (
        ("input", base.input_shapes, new.input_shapes),
        ("output", base.output_shapes, new.output_shapes),
    ):
        if old != now:
            said.append(f"{what} {_shapes(old)} -> {_shapes(now)}")
    if not _same_rate(base.calls, base_iterations, new.calls, new_iterations):
        old_rate = base.calls / max(base_iterations, 1)
        new_rate = new.calls / max(new_iterations, 1)
        said.append(f"calls per iteration {old_rate:g} -> {new_rate:g}")
    said += _listed("its children's shapes ", _children_changes(before, after))
    said += _listed("ops ", _op_changes(base, new))
    return tuple(said)


def _listed(title: str, changes: list[str]) -> list[str]:
    if not changes:
        return []
    more = f" and {len(changes) - OPS_SAID} more" if len(changes) > OPS_SAID else ""
    return [title + ", ".join(changes[:OPS_SAID]) + more]


def _children_changes(before: AroundLayer, after: AroundLayer) -> list[str]:
    """The profiled children (in both runs) whose input or output shapes differ."""
    old, new = dict(before.children), dict(after.children)
    changed = []
    for name in sorted(old.keys() & new.keys()):
        for what, a, b in zip(("input", "output"), old[name], new[name], strict=True):
            if a != b:
                changed.append(f"{name} {what} {_shapes(a)} -> {_shapes(b)}")
    return changed


def _shapes(shapes: tuple[str, ...]) -> str:
    return ", ".join(shapes) if shapes else "(not recorded)"


def _op_changes(base: ModuleRecord, new: ModuleRecord) -> list[str]:
    """Each op whose calls per iteration differ (OpStat.calls are per iteration already)."""
    base_ops = {(o.name, o.backward): o.calls for o in base.ops}
    new_ops = {(o.name, o.backward): o.calls for o in new.ops}
    changed = []
    for name, backward in sorted(base_ops.keys() | new_ops.keys()):
        old, now = base_ops.get((name, backward), 0), new_ops.get((name, backward), 0)
        if old != now:
            side = " (backward)" if backward else ""
            changed.append(f"{name}{side} x{old} -> x{now}")
    return changed


def _same_rate(base_calls: int, base_iterations: int, new_calls: int, new_iterations: int) -> bool:
    return base_calls * max(new_iterations, 1) == new_calls * max(base_iterations, 1)


__all__ = [
    "KNOCK_ON_MAX_PCT",
    "MIN_SHIFT_LAYERS",
    "SPREAD_K",
    "AroundLayer",
    "RunShift",
    "around_layers",
    "estimate_shift",
    "own_work_changes",
    "same_own_work",
]
