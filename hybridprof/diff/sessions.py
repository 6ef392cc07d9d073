"""The comparison of two sessions: match their layers, estimate the run-wide shift, judge every
figure, mark knock-on changes, answer the gate (see the package's docstring for the method).

Sessions of a paired run (`paired=True`, from `hybridprof diff --run`) are judged pair by pair
(`hybridprof.diff.pair_ratios`), with no run-wide shift: pairing already took it out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from hybridprof.analysis.layer_table import layer_table
from hybridprof.analysis.stats import CONFIDENCE
from hybridprof.datamodel import ModuleRecord, OpStat, ProfileSession, Series
from hybridprof.diff.basis import like_with_like
from hybridprof.diff.fairness import comparability, identity, model_warnings
from hybridprof.diff.floor import Floor, default_floor
from hybridprof.diff.gate import decide
from hybridprof.diff.judge import diff_series, plain_change
from hybridprof.diff.match import Pair, match_sessions
from hybridprof.diff.pair_ratios import (
    PAIRED_METHOD,
    family_confidence,
    paired_change,
    unpaired_reason,
)
from hybridprof.diff.result import (
    DEFAULT_THRESHOLD_PCT,
    MEMORY_FIGURES,
    METHOD,
    TIME_FIGURES,
    Change,
    DiffResult,
    DiffVerdict,
    LayerDiff,
    MatchRule,
    OpChange,
    Pairing,
)
from hybridprof.diff.shift import (
    KNOCK_ON_MAX_PCT,
    RunShift,
    around_layers,
    estimate_shift,
    own_work_changes,
)


@dataclass(frozen=True, slots=True)
class _Rules:
    """How every figure is judged: the threshold, the floor, and pair by pair or not."""

    threshold_pct: float
    min_delta_us: float
    paired: bool
    confidence: float = CONFIDENCE  # of each paired interval (all of them hold with 95%)

    def change(
        self,
        quantity: str,
        base: Sequence[float] | None,
        new: Sequence[float] | None,
        shift: RunShift | None,
    ) -> Change:
        if self.paired:
            return paired_change(
                quantity, base, new, self.threshold_pct, self.min_delta_us, self.confidence
            )
        return diff_series(quantity, base, new, self.threshold_pct, shift, self.min_delta_us)


def diff_sessions(
    base: ProfileSession,
    new: ProfileSession,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    base_label: str = "base",
    new_label: str = "new",
    *,
    floor: Floor | None = None,
    paired: bool = False,
    across_models: bool = False,
) -> DiffResult:
    """Match the layers of two sessions and judge every change against noise, the threshold and
    the min-delta floor (default: `default_floor(None)`), on like figures (`diff.basis`: both
    compensated, or both raw, and a note says which); `paired`: the sessions come from one
    paired run (`runtime.runs.interleaved`), their i-th iterations taken back to back. Layers of
    different models are paired only with `across_models`."""
    floor = floor or default_floor(None)
    basis = like_with_like(base, new)  # both compensated, or both raw
    base, new = basis.base, basis.new
    unpaired = unpaired_reason(base, new) if paired else None
    pairs = match_sessions(base, new, across_models)
    rules = _rules(pairs, threshold_pct, floor, paired and unpaired is None)
    shifts = {} if rules.paired else run_shifts(pairs)
    layers = [_layer_diff(b, n, rule, rules, shifts) for b, n, rule in pairs]
    layers = _mark_knock_on(layers, pairs, base, new)
    layers.sort(key=_layer_order)
    shift = shifts.get("self_cpu_us")
    total_shift = _total_shift(base, new, shift, threshold_pct)
    iterations = (_series_or_none(base.iteration_cpu_us), _series_or_none(new.iteration_cpu_us))
    total = as_headline(rules.change("iteration_cpu_us", *iterations, total_shift), base, new)
    warnings, notes = comparability(base, new)
    notes = [basis.note, *notes]
    warnings = [*model_warnings(base, new, across_models), *warnings]
    warnings += _shift_warnings(shift, total_shift, threshold_pct)
    warnings += [f"not judged pair by pair: {unpaired}"] if unpaired is not None else []
    result = DiffResult(
        base=identity(base, base_label),
        new=identity(new, new_label),
        threshold_pct=threshold_pct,
        method=PAIRED_METHOD if rules.paired else METHOD,
        total=total,
        layers=tuple(layers),
        warnings=tuple(warnings),
        notes=tuple(notes),
        shifts=tuple(shifts.values()),
        min_delta_us=floor.us,
        min_delta_basis=floor.basis,
        pairing=Pairing("ABBA", new.iterations, new.stop_reason) if paired else None,
    )
    return replace(result, gate=decide(result, base, new, unpaired))


def as_headline(change: Change, base: ProfileSession, new: ProfileSession) -> Change:
    """The whole iteration's change stated in each run's headline (its rows' sum, as every other
    view states it): judged on the measured iterations, its interval scaled by the same factor
    as its base, so the judged change in % is kept."""
    base_us, new_us = layer_table(base).iteration_us, layer_table(new).iteration_us
    if change.base is None or change.new is None or change.base <= 0 or base_us <= 0:
        return change
    scale = base_us / change.base
    return replace(
        change,
        base=base_us,
        new=new_us,
        delta=new_us - base_us,
        ratio=new_us / base_us,
        low=None if change.low is None else change.low * scale,
        high=None if change.high is None else change.high * scale,
    )


def _rules(pairs: Sequence[Pair], threshold_pct: float, floor: Floor, paired: bool) -> _Rules:
    """How this comparison judges: pair by pair, each interval at the confidence that keeps the
    whole family of figures at 95%; else each run on its own iterations."""
    rules = _Rules(threshold_pct, floor.us, paired)
    if not paired:
        return rules
    return replace(rules, confidence=family_confidence(_judged_figures(pairs)))


def _judged_figures(pairs: Sequence[Pair]) -> int:
    """How many figures can fail the gate: each self time of a layer in both runs, and the whole
    iteration."""
    own = [getter for _, _, getter, is_self in TIME_FIGURES if is_self]
    return 1 + sum(
        1
        for b, n, _ in pairs
        if b is not None and n is not None
        for getter in own
        if _series(b, getter) is not None and _series(n, getter) is not None
    )


def run_shifts(pairs: Sequence[Pair]) -> dict[str, RunShift]:
    """The run-wide shift of each time figure, from the layers matched in both runs."""
    shifts = {}
    for quantity, attr, _, _ in TIME_FIGURES:
        medians = [
            (b_stat.median, n_stat.median)
            for b, n, _ in pairs
            if b is not None and n is not None
            if (b_stat := getattr(b, attr)) is not None and (n_stat := getattr(n, attr)) is not None
        ]
        found = estimate_shift(quantity, medians)
        if found is not None:
            shifts[quantity] = found
    return shifts


def _total_shift(
    base: ProfileSession, new: ProfileSession, shift: RunShift | None, threshold_pct: float
) -> RunShift | None:
    """The shift the whole iteration is judged beyond: only when a run was noisy and every layer
    moved by the threshold or more, so the machine and the code cannot be told apart."""
    noisy = any(s.stability is not None and s.stability.verdict == "noisy" for s in (base, new))
    if shift is None or not noisy or abs(shift.pct()) < threshold_pct:
        return None
    return shift


def _shift_warnings(
    shift: RunShift | None, total_shift: RunShift | None, threshold_pct: float
) -> list[str]:
    if shift is None or abs(shift.pct()) < threshold_pct:
        return []
    way = "slower" if shift.factor > 1 else "faster"
    said = (
        f"every layer moved together: the median layer's self CPU time is {abs(shift.pct()):.0f}% "
        f"{way} in new ({shift.layers} layers): a busier or slower machine, or a change that "
        "touches every layer (dtype, threads, torch); layer verdicts are judged beyond that shift"
    )
    if total_shift is not None:
        said += (
            ", and so is the whole iteration's, as a run was noisy (run both again on a quiet "
            "machine with --threads 1 to tell the machine from the code)"
        )
    return [said]


def _mark_knock_on(
    layers: list[LayerDiff], pairs: Sequence[Pair], base: ProfileSession, new: ProfileSession
) -> list[LayerDiff]:
    """Say what of each matched layer's own work changed, and mark the slower/faster layers
    whose own work is unchanged as knock-on, when another layer's own work changed (added,
    removed, or different ops, shapes, calls or parameters, with what its record does not hold:
    its unprofiled children's parameters, its profiled children's shapes)."""
    base_around, new_around = around_layers(base), around_layers(new)

    def changes_of(b: ModuleRecord, n: ModuleRecord) -> tuple[str, ...]:
        around = (base_around[b.path], new_around[n.path])
        return own_work_changes(b, n, base.iterations, new.iterations, around)

    changes = [changes_of(b, n) if b is not None and n is not None else None for b, n, _ in pairs]
    layers = [replace(layer, own_work=c) for layer, c in zip(layers, changes, strict=True)]
    same = [c == () for c in changes]
    changed_elsewhere = any(
        not unchanged and layer.verdict in ("slower", "faster", "added", "removed")
        for layer, unchanged in zip(layers, same, strict=True)
    )
    if not changed_elsewhere:
        return layers
    return [
        replace(layer, knock_on=True) if unchanged and _modest_change(layer) else layer
        for layer, unchanged in zip(layers, same, strict=True)
    ]


def _modest_change(layer: LayerDiff) -> bool:
    if layer.verdict not in ("slower", "faster"):
        return False
    changes = [c for c in layer.times if c.verdict in ("slower", "faster")]
    sizes = [c.beyond_shift_pct() or c.delta_pct() for c in changes]
    return all(size is not None and abs(size) < KNOCK_ON_MAX_PCT for size in sizes)


def _series_or_none(values: Sequence[float]) -> tuple[float, ...] | None:
    return tuple(values) if values else None


_RANK = {
    "slower": 0,
    "inconclusive": 1,
    "faster": 2,
    "added": 4,
    "removed": 4,
    "unknown": 5,
    "within noise": 6,
}


def _layer_order(layer: LayerDiff) -> tuple[int, float, str]:
    """Regressions first (biggest delta first), then the inconclusive layers, improvements,
    knock-on changes, added and removed layers, the rest."""
    delta = layer.self_delta()
    key = -delta if layer.verdict != "faster" else delta
    return (
        3 if layer.knock_on else _RANK[layer.verdict],
        key if layer.verdict != "within noise" else -abs(delta),
        layer.path,
    )


def _layer_diff(
    base: ModuleRecord | None,
    new: ModuleRecord | None,
    rule: MatchRule,
    rules: _Rules,
    shifts: dict[str, RunShift],
) -> LayerDiff:
    record = new or base
    assert record is not None
    times = tuple(
        change
        for quantity, attr, getter, _ in TIME_FIGURES
        if (change := _time_change(quantity, attr, getter, base, new, rules, shifts.get(quantity)))
        is not None
    )
    memory = tuple(
        _memory_change(name, base, new)
        for name in MEMORY_FIGURES
        if (base and getattr(base, name)) or (new and getattr(new, name))
    )
    verdict = _layer_verdict(times, self_quantities={q for q, _, _, own in TIME_FIGURES if own})
    if rule in ("added", "removed"):
        verdict = rule  # type: ignore[assignment]
    shift = shifts.get("self_cpu_us")
    moved = _OpNoise(rules.threshold_pct, rules.min_delta_us, shift.factor if shift else 1.0)
    ops = _op_changes(base, new, moved) if verdict != "within noise" else ()
    return LayerDiff(
        base_path=base.path if base else None,
        new_path=new.path if new else None,
        class_name=record.class_name,
        match=rule,
        verdict=verdict,
        times=times,
        memory=memory,
        ops=ops,
    )


def _layer_verdict(times: Sequence[Change], self_quantities: set[str]) -> DiffVerdict:
    """A layer is slower when any self time is; else inconclusive when one is; else faster when
    one is."""
    verdicts = {c.verdict for c in times if c.quantity in self_quantities}
    for verdict in ("slower", "inconclusive", "faster", "within noise"):
        if verdict in verdicts:
            return verdict
    return "unknown"


def _time_change(
    quantity: str,
    attr: str,
    getter: str,
    base: ModuleRecord | None,
    new: ModuleRecord | None,
    rules: _Rules,
    shift: RunShift | None,
) -> Change | None:
    stats = [getattr(r, attr) if r is not None else None for r in (base, new)]
    if all(s is None for s in stats):
        return None
    series = [_series(r, getter) for r in (base, new)]
    if series[0] is not None and series[1] is not None:
        return rules.change(quantity, series[0], series[1], shift)
    medians = [s.median if s is not None else None for s in stats]
    return plain_change(quantity, medians[0], medians[1])


def _series(record: ModuleRecord | None, getter: str) -> tuple[float, ...] | None:
    if record is None or record.per_iteration is None:
        return None
    found = getattr(record.per_iteration, getter)
    value = found() if callable(found) else found
    return value.values if isinstance(value, Series) else None


def _memory_change(name: str, base: ModuleRecord | None, new: ModuleRecord | None) -> Change:
    values = [float(getattr(r, name)) if r is not None else None for r in (base, new)]
    return plain_change(name, values[0], values[1])


@dataclass(frozen=True, slots=True)
class _OpNoise:
    """When an op of a layer changed: its calls differ, or its median moved (beyond the run-wide
    shift) by more than both the threshold and the floor. An op has no per-iteration series to
    judge, so a smaller move is the runs' scatter, not a change."""

    threshold_pct: float
    min_delta_us: float
    shift: float  # new / base for every layer's self time (1.0 when not estimated)

    def changed(self, base: OpStat, new: OpStat) -> bool:
        if base.calls != new.calls:
            return True
        delta = abs(new.self_cpu_us / self.shift - base.self_cpu_us)
        return delta >= self.min_delta_us and delta >= base.self_cpu_us * self.threshold_pct / 100


def _op_changes(
    base: ModuleRecord | None, new: ModuleRecord | None, noise: _OpNoise
) -> tuple[OpChange, ...]:
    """The ops of a layer side by side, the biggest change first."""
    before = {(o.name, o.backward): o for o in (base.ops if base else ())}
    after = {(o.name, o.backward): o for o in (new.ops if new else ())}
    changes = []
    for key in list(before) + [k for k in after if k not in before]:
        b, n = before.get(key), after.get(key)
        status: Literal["changed", "same", "appeared", "vanished"]
        if b is None:
            status = "appeared"
        elif n is None:
            status = "vanished"
        else:
            status = "changed" if noise.changed(b, n) else "same"
        changes.append(
            OpChange(
                name=key[0],
                backward=key[1],
                base_calls=b.calls if b else 0,
                new_calls=n.calls if n else 0,
                base_us=b.self_cpu_us if b else 0.0,
                new_us=n.self_cpu_us if n else 0.0,
                status=status,
            )
        )
    changes.sort(key=lambda c: -abs(c.new_us - c.base_us))
    return tuple(changes)
