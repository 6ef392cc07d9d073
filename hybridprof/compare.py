"""Compare two saved sessions: which layer got slower or faster, beyond noise (no torch).

Layers are matched by path first; a path found in only one run is then matched by class and shape
(input, output shapes and parameter count), the nearest position in the run's layer order winning
when several fit; then by class and position alone. What is still unmatched is added or removed.

Each time figure gets a verdict from both runs' per-iteration values, not from the medians alone:
the 95% confidence interval of the difference of medians is built from each run's distribution-free
order-statistic interval of its median (`hybridprof.stats`) at sqrt(0.95) ~ 97.5% coverage; the two
runs are independent, so both hold their true medians with probability >= 95%, and then the true
difference lies in [new.low - base.high, new.high - base.low]. The figure is "slower" when that
interval lies above 0 and the median grew by at least the threshold (default 5%); "faster" the
mirror image; else "within noise". Without per-iteration values (old files, too few iterations)
the verdict is "unknown", never a regression.

Layers are judged beyond the run-wide shift (`hybridprof.run_shift`): with 5 or more matched layers,
the base figures are scaled by the median new/base ratio over layers, and a layer must move beyond
the layers' own scatter around it as well as the threshold, so a machine that got busier between
the runs does not make every layer "faster" or "slower". The whole iteration is judged as
measured, unless a run was noisy and the shift reaches the threshold: then the machine and the code
cannot be told apart, it is judged beyond the shift too, and a warning says so. A slower or faster
layer whose own work did not change, next to one whose did, is marked knock-on and is not a
regression of its own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from hybridprof.datamodel import ModuleRecord, ProfileSession, Series
from hybridprof.jsonio import dump, load
from hybridprof.run_shift import KNOCK_ON_MAX_PCT, RunShift, estimate_shift, same_own_work
from hybridprof.stats import CONFIDENCE, median, median_ci

DIFF_KIND = "hybridprof-diff"
DIFF_SCHEMA_VERSION = 2  # 2: run-wide shifts, knock-on layers (files of version 1 still load)
DEFAULT_THRESHOLD_PCT = 5.0
METHOD = (
    "95% confidence interval of the difference of medians, from each run's distribution-free "
    "order-statistic interval of its median at sqrt(0.95) coverage (binomial ranks), layers judged "
    "beyond the run-wide shift (the median new/base ratio over layers); slower/faster only when "
    "the interval excludes 0 and the change is at least the threshold"
)
_PER_RUN_CONFIDENCE = math.sqrt(CONFIDENCE)

DiffVerdict = Literal["slower", "faster", "within noise", "unknown"]
MatchRule = Literal["path", "class and shape", "class and position", "added", "removed"]

# (quantity, ModuleRecord field, series getter name on IterationSeries, is a self figure)
_TIMES: tuple[tuple[str, str, str, bool], ...] = (
    ("self_cpu_us", "self_cpu_us", "self_cpu_us", True),
    ("total_cpu_us", "total_cpu_us", "total_cpu", False),
    ("backward_self_cpu_us", "backward_self_cpu_us", "backward_self_cpu_us", True),
    ("backward_total_cpu_us", "backward_total_cpu_us", "backward_total_cpu", False),
    ("self_device_us", "self_device_us", "self_device_us", True),
    ("total_device_us", "total_device_us", "total_device", False),
)
_MEMORY = ("self_cpu_mem", "cpu_mem", "self_device_mem", "device_mem")


@dataclass(frozen=True, slots=True)
class Change:
    """One figure in both runs: medians, delta (new - base), ratio and the delta's interval."""

    quantity: str
    base: float | None
    new: float | None
    delta: float
    ratio: float | None  # new / base; None when base is 0 or absent
    low: float | None = None  # the delta's confidence interval, when both runs have enough data
    high: float | None = None
    verdict: DiffVerdict = "unknown"
    # The run-wide shift the verdict was judged beyond: low/high are then the interval of
    # new - shift * base. None: judged as measured.
    shift: float | None = None

    def delta_pct(self) -> float | None:
        return None if self.ratio is None else 100.0 * (self.ratio - 1.0)

    def beyond_shift_pct(self) -> float | None:
        """The change beyond the run-wide shift, in percent (None when not judged against one)."""
        if self.ratio is None or self.shift is None or self.shift <= 0:
            return None
        return 100.0 * (self.ratio / self.shift - 1.0)


@dataclass(frozen=True, slots=True)
class OpChange:
    """One op of a layer in both runs (median self CPU time per iteration)."""

    name: str
    backward: bool
    base_calls: int
    new_calls: int
    base_us: float
    new_us: float
    status: Literal["changed", "same", "appeared", "vanished"]


@dataclass(frozen=True, slots=True)
class LayerDiff:
    """A layer in both runs (or one), how it was matched, its figures and its verdict."""

    base_path: str | None
    new_path: str | None
    class_name: str
    match: MatchRule
    verdict: DiffVerdict | Literal["added", "removed"]
    times: tuple[Change, ...] = ()
    memory: tuple[Change, ...] = ()
    ops: tuple[OpChange, ...] = ()  # only for a changed, added or removed layer
    # Slower or faster with its own work unchanged, while another layer's changed: not its own.
    knock_on: bool = False

    @property
    def path(self) -> str:
        return self.new_path if self.new_path is not None else (self.base_path or "")

    def change(self, quantity: str) -> Change | None:
        return next((c for c in self.times + self.memory if c.quantity == quantity), None)

    def self_delta(self) -> float:
        """The forward self CPU time's delta (added: its time, removed: minus it)."""
        found = self.change("self_cpu_us")
        return found.delta if found else 0.0

    def self_delta_beyond_shift(self) -> float:
        """The forward self CPU time's delta beyond the run-wide shift (new - shift x base)."""
        found = self.change("self_cpu_us")
        if found is None or found.shift is None or found.base is None or found.new is None:
            return self.self_delta()
        return found.new - found.shift * found.base


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """What identifies a run in a review: its file, model, machine and how it was measured."""

    label: str
    model_file: str | None
    model_hash: str | None
    started_at: str
    hybridprof_version: str
    torch_version: str
    python_version: str
    cpu: str
    device: str
    threads: int
    strategy: str
    iterations: int
    stability: str  # "stable", "noisy" or "unknown" (old files)

    def short(self) -> str:
        return (
            f"{self.label} ({self.started_at or 'no date'}, torch {self.torch_version}, "
            f"{self.threads} thread(s), {self.device}, {self.iterations} iterations)"
        )


@dataclass(frozen=True, slots=True)
class DiffResult:
    """The comparison of two sessions, saved as JSON (`hybridprof report` re-renders it)."""

    base: RunIdentity
    new: RunIdentity
    threshold_pct: float
    method: str
    total: Change  # the whole iteration's time
    layers: tuple[LayerDiff, ...]
    warnings: tuple[str, ...] = ()  # what makes the comparison unfair, said before any verdict
    notes: tuple[str, ...] = ()  # facts worth knowing that do not make it unfair
    schema_version: int = DIFF_SCHEMA_VERSION
    confidence: float = field(default=CONFIDENCE)
    shifts: tuple[RunShift, ...] = ()  # per time figure, when enough layers were matched

    def regressions(self) -> tuple[LayerDiff, ...]:
        return tuple(
            layer for layer in self.layers if layer.verdict == "slower" and not layer.knock_on
        )

    def improvements(self) -> tuple[LayerDiff, ...]:
        return tuple(
            layer for layer in self.layers if layer.verdict == "faster" and not layer.knock_on
        )

    def knock_ons(self) -> tuple[LayerDiff, ...]:
        return tuple(layer for layer in self.layers if layer.knock_on)

    def shift(self, quantity: str) -> RunShift | None:
        return next((s for s in self.shifts if s.quantity == quantity), None)

    def has_regression(self) -> bool:
        return bool(self.regressions()) or self.total.verdict == "slower"

    def to_json(self) -> str:
        return dump(DIFF_KIND, self)

    @classmethod
    def from_json(cls, text: str) -> DiffResult:
        return load(DIFF_KIND, cls, text, DIFF_SCHEMA_VERSION)


# --------------------------------------------------------------------------- the comparison


def compare_sessions(
    base: ProfileSession,
    new: ProfileSession,
    threshold_pct: float = DEFAULT_THRESHOLD_PCT,
    base_label: str = "base",
    new_label: str = "new",
) -> DiffResult:
    """Match the layers of two sessions and judge every change against noise and the threshold."""
    pairs = match_records(base.records, new.records)
    shifts = run_shifts(pairs)
    layers = [_layer_diff(b, n, rule, threshold_pct, shifts) for b, n, rule in pairs]
    layers = _mark_knock_on(layers, pairs, base.iterations, new.iterations)
    layers.sort(key=_layer_order)
    warnings, notes = comparability(base, new)
    total_shift = _total_shift(base, new, shifts.get("self_cpu_us"), threshold_pct)
    total = compare_series(
        "iteration_cpu_us",
        _series_or_none(base.iteration_cpu_us),
        _series_or_none(new.iteration_cpu_us),
        threshold_pct,
        total_shift,
    )
    warnings += _shift_warnings(shifts.get("self_cpu_us"), total_shift, threshold_pct)
    return DiffResult(
        base=identity(base, base_label),
        new=identity(new, new_label),
        threshold_pct=threshold_pct,
        method=METHOD,
        total=total,
        layers=tuple(layers),
        warnings=tuple(warnings),
        notes=tuple(notes),
        shifts=tuple(shifts.values()),
    )


def run_shifts(pairs: Sequence[Pair]) -> dict[str, RunShift]:
    """The run-wide shift of each time figure, from the layers matched in both runs."""
    shifts = {}
    for quantity, attr, _, _ in _TIMES:
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
    layers: list[LayerDiff], pairs: Sequence[Pair], base_iterations: int, new_iterations: int
) -> list[LayerDiff]:
    """Mark the slower/faster layers whose own work is unchanged as knock-on, when another
    layer's own work changed (added, removed, or different ops, shapes or calls)."""
    same = [
        b is not None and n is not None and same_own_work(b, n, base_iterations, new_iterations)
        for b, n, _ in pairs
    ]
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


def _layer_order(layer: LayerDiff) -> tuple[int, float, str]:
    """Regressions first (biggest delta first), then improvements, knock-on changes, added and
    removed layers, the rest."""
    rank = {"slower": 0, "faster": 1, "added": 3, "removed": 3, "unknown": 4, "within noise": 5}
    delta = layer.self_delta()
    key = -delta if layer.verdict != "faster" else delta
    return (
        2 if layer.knock_on else rank[layer.verdict],
        key if layer.verdict != "within noise" else -abs(delta),
        layer.path,
    )


Pair = tuple[ModuleRecord | None, ModuleRecord | None, MatchRule]


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


def _layer_diff(
    base: ModuleRecord | None,
    new: ModuleRecord | None,
    rule: MatchRule,
    threshold_pct: float,
    shifts: dict[str, RunShift],
) -> LayerDiff:
    record = new or base
    assert record is not None
    times = tuple(
        change
        for quantity, attr, getter, _ in _TIMES
        if (
            change := _time_change(
                quantity, attr, getter, base, new, threshold_pct, shifts.get(quantity)
            )
        )
        is not None
    )
    memory = tuple(
        _memory_change(name, base, new)
        for name in _MEMORY
        if (base and getattr(base, name)) or (new and getattr(new, name))
    )
    verdict = _layer_verdict(times, self_quantities={q for q, _, _, own in _TIMES if own})
    if rule in ("added", "removed"):
        verdict = rule  # type: ignore[assignment]
    ops = _op_changes(base, new) if verdict != "within noise" else ()
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
    """A layer is slower when any self time is, faster when one is and none is slower."""
    verdicts = {c.verdict for c in times if c.quantity in self_quantities}
    for verdict in ("slower", "faster", "within noise"):
        if verdict in verdicts:
            return verdict
    return "unknown"


def _time_change(
    quantity: str,
    attr: str,
    getter: str,
    base: ModuleRecord | None,
    new: ModuleRecord | None,
    threshold_pct: float,
    shift: RunShift | None,
) -> Change | None:
    stats = [getattr(r, attr) if r is not None else None for r in (base, new)]
    if all(s is None for s in stats):
        return None
    series = [_series(r, getter) for r in (base, new)]
    if series[0] is not None and series[1] is not None:
        return compare_series(quantity, series[0], series[1], threshold_pct, shift)
    medians = [s.median if s is not None else None for s in stats]
    return _plain_change(quantity, medians[0], medians[1])


def _series(record: ModuleRecord | None, getter: str) -> tuple[float, ...] | None:
    if record is None or record.per_iteration is None:
        return None
    found = getattr(record.per_iteration, getter)
    value = found() if callable(found) else found
    return value.values if isinstance(value, Series) else None


def compare_series(
    quantity: str,
    base: Sequence[float] | None,
    new: Sequence[float] | None,
    threshold_pct: float,
    shift: RunShift | None = None,
) -> Change:
    """One figure's change with the interval of its difference of medians and its verdict,
    judged beyond `shift` when given (the base run scaled by it)."""
    base_median = median(base) if base else None
    new_median = median(new) if new else None
    plain = _plain_change(quantity, base_median, new_median)
    if not base or not new:
        return plain
    base_ci = median_ci(base, _PER_RUN_CONFIDENCE)
    new_ci = median_ci(new, _PER_RUN_CONFIDENCE)
    if base_ci is None or new_ci is None:
        return plain
    # The shift's point estimate scales the base run. Its own interval is not added: over a
    # handful of layers an order-statistic interval spans the layers themselves, changed ones too.
    factor = shift.factor if shift is not None else 1.0
    low = new_ci.low - base_ci.high * factor
    high = new_ci.high - base_ci.low * factor
    expected = (base_median or 0.0) * factor
    # Beyond a shift, a move within the layers' own scatter around it is no change either.
    needed = max(threshold_pct, shift.band_pct()) if shift is not None else threshold_pct
    verdict = judge((new_median or 0.0) - expected, low, high, expected, needed)
    return Change(
        quantity,
        base_median,
        new_median,
        plain.delta,
        plain.ratio,
        low,
        high,
        verdict,
        shift.factor if shift is not None else None,
    )


def judge(
    delta: float, low: float, high: float, base_median: float, threshold_pct: float
) -> DiffVerdict:
    """Slower/faster only when the interval excludes 0 and the change reaches the threshold."""
    big_enough = abs(delta) >= threshold_pct / 100.0 * abs(base_median)
    if low > 0 and delta > 0 and big_enough:
        return "slower"
    if high < 0 and delta < 0 and big_enough:
        return "faster"
    return "within noise"


def _plain_change(quantity: str, base: float | None, new: float | None) -> Change:
    delta = (new or 0.0) - (base or 0.0)
    ratio = (new or 0.0) / base if base else None
    return Change(quantity, base, new, delta, ratio)


def _memory_change(name: str, base: ModuleRecord | None, new: ModuleRecord | None) -> Change:
    values = [float(getattr(r, name)) if r is not None else None for r in (base, new)]
    return _plain_change(name, values[0], values[1])


def _op_changes(base: ModuleRecord | None, new: ModuleRecord | None) -> tuple[OpChange, ...]:
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
            status = "same" if b.calls == n.calls and b.self_cpu_us == n.self_cpu_us else "changed"
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


# --------------------------------------------------------------------------- fairness


def identity(session: ProfileSession, label: str) -> RunIdentity:
    env = session.environment
    return RunIdentity(
        label=label,
        model_file=session.model_file,
        model_hash=session.model_hash,
        started_at=session.started_at,
        hybridprof_version=env.hybridprof_version,
        torch_version=env.torch_version,
        python_version=env.python_version,
        cpu=env.cpu,
        device=env.device,
        threads=env.threads,
        strategy=session.strategy,
        iterations=session.iterations,
        stability=session.stability.verdict if session.stability else "unknown",
    )


def comparability(base: ProfileSession, new: ProfileSession) -> tuple[list[str], list[str]]:
    """What makes the comparison unfair (warnings) and what a reviewer should know (notes)."""
    warnings = []
    checks = (
        ("torch version", base.environment.torch_version, new.environment.torch_version),
        (
            "hybridprof version",
            base.environment.hybridprof_version,
            new.environment.hybridprof_version,
        ),
        ("threads", base.environment.threads, new.environment.threads),
        ("CPU", base.environment.cpu, new.environment.cpu),
        ("device", base.environment.device, new.environment.device),
        ("strategy", base.strategy, new.strategy),
        ("backward profiled", base.backward, new.backward),
    )
    for what, a, b in checks:
        if a != b:
            warnings.append(f"different {what}: base {a}, new {b}")
    shapes = _input_shape_change(base, new)
    if shapes:
        warnings.append(shapes)
    for name, session in (("base", base), ("new", new)):
        if session.stability is not None and session.stability.verdict == "noisy":
            cv = session.stability.iteration_cv
            warnings.append(f"the {name} run is noisy (iteration CV {cv:.0%}); small changes hide")
        if session.interrupted:
            warnings.append(f"the {name} run was interrupted ({session.iterations} iterations)")
        if session.iterations < 7:
            warnings.append(
                f"the {name} run has {session.iterations} iteration(s): too few for intervals "
                "(7 or more needed); verdicts are 'unknown'"
            )
    notes = [_hash_note(base, new)]
    return warnings, [n for n in notes if n]


def _input_shape_change(base: ProfileSession, new: ProfileSession) -> str:
    """The model's input shapes: those of the first call of the shallowest layers, compared (a
    deeper layer's input changes with the layers before it, which is the change under review)."""
    first = {r.path: r.input_shapes for r in base.records}
    depth = min((_depth(r.path) for r in new.records if r.path in first), default=0)
    for record in new.records:
        if _depth(record.path) != depth:
            continue
        before = first.get(record.path)
        if before is not None and before and record.input_shapes and before != record.input_shapes:
            return (
                f"different input shapes: layer '{record.path}' got {', '.join(before)} in base, "
                f"{', '.join(record.input_shapes)} in new"
            )
    return ""


def _depth(path: str) -> int:
    return 0 if not path else path.count(".") + 1


def _hash_note(base: ProfileSession, new: ProfileSession) -> str:
    if base.model_hash is None or new.model_hash is None:
        return "model file hash not recorded in both runs"
    if base.model_hash == new.model_hash:
        return (
            "model file unchanged (same sha256): any difference comes from the machine, the "
            "environment or noise"
        )
    return "model file changed (sha256 differs), as expected for a code change"


__all__ = [
    "DEFAULT_THRESHOLD_PCT",
    "DIFF_KIND",
    "DIFF_SCHEMA_VERSION",
    "METHOD",
    "Change",
    "DiffResult",
    "DiffVerdict",
    "LayerDiff",
    "MatchRule",
    "OpChange",
    "RunIdentity",
    "RunShift",
    "comparability",
    "compare_series",
    "compare_sessions",
    "identity",
    "judge",
    "match_records",
    "run_shifts",
]
