"""The layer table's numbers, worked out once: one row per path of the tree, then the optimizer's
rows of a training step, then the outside row.

Every table the product shows (the terminal's, the text report's, the HTML and PDF reports', the
notebook's, the CSV/JSON exports and `to_dataframe()`) reads these rows and only formats them:
each row's times with their spread and 95% confidence interval, backward and device times, memory,
its own and its subtree's share of the iteration, parameters, shapes, where it is defined and its
roofline figures. A figure a row does not have is None (a container that never runs has no self
time and no calls; an unprofiled parent has nothing measured), so each format decides how to show
"not there". Torch-free and format-free.

`layer_table(session)` builds a session's table once and hands the same table to every later
caller while that session object lives (one `hybridprof run` prints the table, writes reports and
summary lines from one build). Sessions are frozen, so a table never goes stale; the cache holds
each session weakly, by identity: a session that goes away takes its table with it, and two equal
but separate sessions (the same file loaded twice) each build their own.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from hybridprof.analysis.compensation import (
    OUTSIDE,
    Compensated,
    compensated,
)
from hybridprof.analysis.roofline import LayerRoofline, by_path
from hybridprof.analysis.stats import Interval, median_ci, min_values_for_ci
from hybridprof.analysis.tree import (
    OPTIMIZER_ROW,
    TreeRow,
    depth_of,
    inclusive_us,
    outside_label,
    parent_of,
    parents_of,
    step_self_us,
    step_share_us,
    subtree_sums,
    total_profiled_us,
    tree_rows,
)
from hybridprof.analysis.typical_steps import kept_steps, typical_means
from hybridprof.datamodel import (
    Calibration,
    DeviceMemory,
    LayerMemory,
    LayerWork,
    ModuleRecord,
    ModuleTarget,
    OptimizerPart,
    OptimizerRecord,
    ProfileSession,
    Series,
    SourceSpan,
    Stat,
    UnitComm,
)
from hybridprof.datamodel.memory import by_path as memory_by_path

RowKind = Literal["layer", "container", "unprofiled", "optimizer", "optimizer_part", "outside"]
# The rows that are no module of the model: they follow the module tree.
_EXTRA_KINDS = ("optimizer", "optimizer_part", "outside")
CI_VALUES = min_values_for_ci()  # the fewest iterations that give a median an interval


@dataclass(frozen=True, slots=True)
class Timing:
    """A per-iteration time: its median, min and max over the measured iterations, and the
    median's 95% confidence interval when enough iterations were kept (6 or more)."""

    median: float
    min: float
    max: float
    interval: Interval | None = None
    # Measured with more torch threads than free cores (`Stability.threads_exceed_free_cores`):
    # the figure holds the threads' waits for each other, and says so wherever it is printed.
    inflated: bool = False

    def interval_pct(self) -> float | None:
        """The interval's wider side in % of the median (None without one, or at a 0 median)."""
        if self.interval is None:
            return None
        pct = self.interval.half_width_pct()
        return pct if math.isfinite(pct) else None


@dataclass(frozen=True, slots=True)
class RawTimes:
    """A row's CPU times as measured, the profiler's cost still in (us per iteration; None where
    the row has no such figure): what a compensated row shows beside its own figures."""

    self_cpu_us: float | None
    total_cpu_us: float | None
    backward_self_cpu_us: float | None
    backward_total_cpu_us: float | None
    own_us: float


@dataclass(frozen=True, slots=True)
class LayerRow:
    """One row of the layer table (times in us per iteration, memory in bytes).

    kind: "layer" (a profiled module), "container" (a ModuleList/ModuleDict that never runs: its
    totals are its children's, it has no self figures and no calls), "unprofiled" (a parent not
    selected: nothing measured), "optimizer" (a training step's optimizer: like a container, its
    total is its parts'), "optimizer_part" (its step, clipping, GradScaler or zero_grad time, or a
    param group's share of the step), "outside" (the time in no profiled module).
    """

    path: str
    name: str
    depth: int
    parent: str | None
    kind: RowKind
    has_children: bool
    class_name: str
    record: ModuleRecord | None  # the measured record (summed from the children's for a container)
    calls_per_iteration: float | None
    self_cpu: Timing | None
    total_cpu: Timing | None
    backward_self_cpu_us: float | None
    backward_total_cpu_us: float | None
    self_device_us: float | None
    total_device_us: float | None
    self_cpu_mem: int | None
    cpu_mem: int | None
    self_device_mem: int | None
    device_mem: int | None
    own_us: float  # forward plus backward self time: the rows' own times add up to the iteration
    share_us: float  # the time its share of the iteration counts (its subtree's own times)
    pct_self: float | None  # own_us in % of the table's `shares_of_us`; None when that is 0
    pct_total: float | None  # share_us in % of it
    param_count: int
    input_shapes: tuple[str, ...]
    output_shapes: tuple[str, ...]
    aliases: tuple[str, ...]
    source: SourceSpan | None  # where its parent's __init__ creates it
    op_count: int
    roofline: LayerRoofline | None = None  # a --flops session's figures for the path
    work: LayerWork | None = None  # and its FLOPs and bytes, forward and backward
    memory: LayerMemory | None = None  # --profile-memory: its memory on the model's device
    # A compiled session: the modules below this one whose work ran in its fused kernels, named
    # relative to it (`ln_2, mlp.c_fc`).
    fused: tuple[str, ...] = ()
    # An FSDP2 unit's communication per iteration, one entry per kind it ran (`UnitComm`)
    comm: tuple[UnitComm, ...] = ()
    # A compensated table (the session has a calibration): the row's figures as measured, the
    # profiler's cost still in; None in a raw table.
    raw: RawTimes | None = None
    # The profiler's calibrated cost was more than a figure of the row: that figure is 0.
    clamped: bool = False

    def comm_of(self, kind: str) -> UnitComm | None:
        """Its communication of `kind` (FSDP2's "all_gather", "regather", "copy_out",
        "reduce_scatter"; tensor parallel's "tp_forward", "tp_backward"); None when it ran none
        (or is no unit, no tensor-parallel layer)."""
        return next((c for c in self.comm if c.kind == kind), None)

    @property
    def compute_us(self) -> float | None:
        """A tensor-parallel layer's forward self time without its communication (None for a
        row with no tensor-parallel communication, or not measured)."""
        if self.self_cpu is None or not self._tensor_parallel:
            return None
        comm = self.comm_of("tp_forward")
        return max(0.0, self.self_cpu.median - (comm.time_us.median if comm else 0.0))

    @property
    def backward_compute_us(self) -> float | None:
        """A tensor-parallel layer's backward self time without its communication."""
        if self.backward_self_cpu_us is None or not self._tensor_parallel:
            return None
        comm = self.comm_of("tp_backward")
        return max(0.0, self.backward_self_cpu_us - (comm.time_us.median if comm else 0.0))

    @property
    def exposed_us(self) -> float | None:
        """An FSDP2 unit's exposed communication per iteration: the medians of its kinds'
        exposed parts summed (a merged session: each kind's median over the ranks); None for a
        row without them."""
        found = [c.exposed_us.median for c in self.comm if c.exposed_us is not None]
        return sum(found) if found else None

    @property
    def wait_us(self) -> float | None:
        """A merged session's unit: the most any rank waited per iteration in its collectives
        (each rank's kinds summed); None without per-rank waits."""
        waits = self._rank_waits()
        return max(waits) if waits else None

    @property
    def waited_for(self) -> int | None:
        """The rank that made the rank waiting most wait: the one its largest wait (of the
        unit's kinds) was for."""
        waits = self._rank_waits()
        if not waits:
            return None
        waiting = waits.index(max(waits))
        kinds = [c for c in self.comm if c.wait_us and c.waited_for is not None]
        return max(kinds, key=lambda c: c.wait_us[waiting]).waited_for

    def _rank_waits(self) -> list[float]:
        waits = [c.wait_us for c in self.comm if c.wait_us]
        if not waits:
            return []
        return [sum(w[rank] for w in waits) for rank in range(min(map(len, waits)))]

    @property
    def _tensor_parallel(self) -> bool:
        return self.kind == "layer" and any(c.kind.startswith("tp_") for c in self.comm)

    @property
    def measured(self) -> bool:
        """Has figures of its own (calls, self time, ops): a profiled layer, a part of the
        optimizer or the outside row."""
        return self.kind in ("layer", "optimizer_part", "outside")


@dataclass(frozen=True, slots=True)
class LayerTable:
    """The rows in tree order (ancestors first, siblings in module order), then the optimizer's
    (when one ran), the outside row last, and the headline they add up to.

    The headline (`iteration_us`) is the one per-iteration figure every view states: with the
    outside time measured, the sum of the rows' own figures (each row's median self time,
    forward plus backward, over the kept iterations; the optimizer's parts; the outside row), so
    the rows add up to it by construction and a parent's total is its subtree's rows. On a busy
    machine a pause (another process's time slice) lands in a different layer each iteration:
    each row's median leaves it out, the median iteration keeps it, so the measured median
    iteration (`measured_iteration_us`) can be well above the headline; the views say both
    where they differ. Without the outside time (a table built from layer ranges, an older
    session), the headline is the measured median iteration and the totals are as measured.
    """

    rows: tuple[LayerRow, ...]
    shares_of_us: float  # the denominator of every %: the headline
    iteration_us: float  # the headline: what the rows add up to (see above)
    measured_iteration_us: float  # the median iteration's profiled time, as measured
    iterations: int
    calls_title: str
    has_backward: bool
    has_device: bool
    has_memory: bool
    has_flops: bool
    memory: DeviceMemory | None = None  # the model's device, whose figures the rows' `memory` are
    has_compiled: bool = False  # a torch.compile'd model (rows may say what fused)
    has_fsdp: bool = False  # an FSDP2-sharded model: its units' rows carry their communication
    has_tp: bool = False  # tensor-parallel layers: their rows carry their collectives
    has_wait: bool = False  # a merged session's FSDP2 units: each rank's wait in them
    summed: bool = False  # totals and the headline are sums of the rows (the outside measured)
    # The profiler's calibrated cost is taken out of every CPU figure (`analysis.compensation`);
    # the raw headline and each row's raw figures are kept beside (`raw_iteration_us`, `raw`).
    calibration: Calibration | None = None
    raw_iteration_us: float | None = None  # the headline as measured (compensated tables only)
    raw_measured_iteration_us: float | None = None  # the median iteration as measured (the same)
    # A rank's table: each figure is its mean over this many typical steps of `iterations`
    # (`analysis.typical_steps`), not its median; None: medians.
    typical_steps: int | None = None

    @property
    def compensated(self) -> bool:
        return self.calibration is not None

    def clamped(self) -> tuple[LayerRow, ...]:
        """The rows a figure of which the profiler's cost would have taken below zero."""
        return tuple(r for r in self.rows if r.clamped)

    def tree(self) -> tuple[LayerRow, ...]:
        """The rows of the module tree, without the optimizer's and the outside row."""
        return tuple(r for r in self.rows if r.kind not in _EXTRA_KINDS)

    def optimizer(self) -> tuple[LayerRow, ...]:
        """The optimizer's row and its parts', in tree order (none without an optimizer)."""
        return tuple(r for r in self.rows if r.kind in ("optimizer", "optimizer_part"))

    def outside(self) -> LayerRow | None:
        return next((r for r in self.rows if r.kind == "outside"), None)

    def layers(self) -> tuple[LayerRow, ...]:
        """The profiled layers (the session's records), in tree order."""
        return tuple(r for r in self.rows if r.kind == "layer")


# id(session) -> (a weak reference to it, its table); an entry leaves when its session dies.
_TABLES: dict[int, tuple[weakref.ref[ProfileSession], LayerTable]] = {}


def layer_table(session: ProfileSession) -> LayerTable:
    """`session`'s layer table: built on the first call for this session object, the same table
    on every later one (see the module docstring)."""
    key = id(session)
    found = _TABLES.get(key)
    if found is not None and found[0]() is session:
        return found[1]
    table = build_layer_table(session)
    _TABLES[key] = (weakref.ref(session, lambda _: _TABLES.pop(key, None)), table)
    return table


_STATED: dict[int, tuple[weakref.ref[ProfileSession], ProfileSession]] = {}


def stated_session(session: ProfileSession) -> ProfileSession:
    """The session whose figures the views state: compensated as the layer table is where it
    has a calibration (`compensation_of`), else `session` itself. Charts and the roofline read
    their times from it, so that they show the table's figures (worked out once per session
    object, as the table)."""
    key = id(session)
    found = _STATED.get(key)
    if found is not None and found[0]() is session:
        return found[1]
    compensation = compensation_of(session)
    stated = compensation.session if compensation is not None else typical_means(session)
    if stated is session:
        return session  # (not cached: the entry would keep its own key alive)
    _STATED[key] = (weakref.ref(session, lambda _: _STATED.pop(key, None)), stated)
    return stated


@dataclass(frozen=True, slots=True)
class ProfiledLayers:
    """The profiled layers' rows alone (the table's `layers()`, figure for figure, in the
    session's record order) and the headline their shares are of."""

    rows: tuple[LayerRow, ...]
    iteration_us: float


def profiled_layers(session: ProfileSession) -> ProfiledLayers:
    """The rows of the profiled layers without the rest of the table: no tree order, no
    containers, no optimizer or outside rows, for a reader of layer figures only (the history:
    the tree's order and container rows were 40% of a 1,000-layer table's time)."""
    found = compensation_of(session)
    measured = found.session if found is not None else typical_means(session)
    shares_of = headline_us(measured, optimizer_rows(measured.optimizer, measured.iterations))
    raw = _Raw.of(found) if found is not None else None
    rows, _ = _finished(_rows(measured, _record_rows(measured), shares_of, raw), None, measured)
    return ProfiledLayers(tuple(rows), shares_of)


def _record_rows(session: ProfileSession) -> list[TreeRow]:
    """A tree row per record, in record order (each as `tree_rows` makes it)."""
    parent = parents_of(r.path for r in session.records)
    parents = set(parent.values())
    root = session.plan.root_class
    return [
        TreeRow(
            path=r.path,
            name=root if r.path == "" else r.path.rsplit(".", 1)[-1],
            depth=depth_of(r.path),
            record=r,
            has_children=r.path in parents,
        )
        for r in session.records
    ]


def build_layer_table(session: ProfileSession) -> LayerTable:
    """Every figure of every row of `session`'s layer table, worked out (uncached): with the
    profiler's calibrated cost taken out where the session has a calibration, the raw figures
    beside."""
    found = compensation_of(session)
    if found is None:
        return _built(typical_means(session), None)
    return _built(found.session, _Raw.of(found))


def compensation_of(session: ProfileSession) -> Compensated | None:
    """`session` compensated with its calibration's costs (None without one), the compensated
    and the raw side each with a rank's figures as means over its typical steps
    (`analysis.typical_steps`). Every view and `diff` take their compensated figures from here
    (`analysis.compensation`)."""
    found = compensated(session)
    if found is None or kept_steps(found.raw) is None:
        return found
    return replace(found, session=typical_means(found.session), raw=typical_means(found.raw))


def _built(session: ProfileSession, raw: _Raw | None) -> LayerTable:
    kept = kept_steps(session)
    means = kept is not None
    optimizer = optimizer_rows(session.optimizer, session.iterations, means=means)
    shares_of = headline_us(session, optimizer)
    rows = _rows(session, tree_rows(session), shares_of, raw)
    rows += [_with_pct(row, shares_of) for row in optimizer]
    if means:  # the intervals are of medians: a mean over the typical steps has none
        rows = [_without_interval(row) for row in rows]
    outside = _outside_row(session, shares_of)
    if outside is not None and raw is not None:
        outside = raw.outside_of(outside)
    rows, outside = _finished(rows, outside, session)
    return LayerTable(
        rows=tuple(rows + ([outside] if outside is not None else [])),
        shares_of_us=shares_of,
        iteration_us=shares_of,
        measured_iteration_us=total_profiled_us(session),
        iterations=session.iterations,
        calls_title=session.calls_title(),
        has_backward=session.backward,
        has_device=session.use_device,
        has_memory=session.profile_memory,
        has_flops=session.flops is not None,
        memory=session.memory.primary if session.memory is not None else None,
        has_compiled=session.compiled is not None,
        has_fsdp=bool(session.fsdp),
        has_tp=bool(session.tp),
        has_wait=any(c.wait_us for c in session.fsdp),
        summed=session.outside_cpu_us is not None,  # the totals are subtree sums (_subtree_totals)
        calibration=session.calibration if raw is not None else None,
        raw_iteration_us=raw.iteration_us if raw is not None else None,
        raw_measured_iteration_us=raw.measured_iteration_us if raw is not None else None,
        typical_steps=len(kept) if kept is not None else None,
    )


@dataclass(frozen=True, slots=True)
class _Raw:
    """A compensated table's raw side: each path's raw times, the clamped paths, the raw
    outside time and headline."""

    times: dict[str, RawTimes]
    clamped: frozenset[str]
    outside_us: float | None
    iteration_us: float
    measured_iteration_us: float  # the median iteration as measured

    @classmethod
    def of(cls, found: Compensated) -> _Raw:
        raw = found.raw
        totals = _subtree_totals(raw)
        times: dict[str, RawTimes] = {}
        if totals is not None:  # the containers: their totals, nothing of their own
            for path, forward in totals.forward.items():
                times[path] = RawTimes(None, forward, None, totals.backward.get(path), 0.0)
        for r in raw.records:
            backward_total = _backward_total(r, r.path, totals)
            total = totals.forward[r.path] if totals is not None else r.total_cpu_us.median
            times[r.path] = RawTimes(
                r.self_cpu_us.median,
                total,
                _median(r.backward_self_cpu_us),
                backward_total,
                step_self_us(r),
            )
        outside = raw.outside_cpu_us.median if raw.outside_cpu_us is not None else None
        headline = headline_us(raw, optimizer_rows(raw.optimizer, raw.iterations))
        return cls(times, found.clamped, outside, headline, total_profiled_us(raw))

    def outside_of(self, row: LayerRow) -> LayerRow:
        """The outside row with its raw time and clamp flag."""
        us = self.outside_us
        raw = RawTimes(us, us, None, None, us or 0.0)
        return replace(row, raw=raw, clamped=OUTSIDE in self.clamped)


def headline_us(session: ProfileSession, optimizer: list[LayerRow]) -> float:
    """The per-iteration figure the rows add up to (see `LayerTable`): with the outside time
    measured, every row's own figure summed (forward and backward self medians, the optimizer's
    rows' own times, the outside median); else the median iteration as measured."""
    if session.outside_cpu_us is None:
        return total_profiled_us(session)
    own_us = [step_self_us(r) for r in session.records]
    return rows_sum_us(own_us, session.outside_cpu_us.median, [r.own_us for r in optimizer])


def rows_sum_us(
    own_us: Sequence[float], outside_us: float, optimizer_own_us: Sequence[float]
) -> float:
    """The headline with the outside time measured: the records' own times (in record order),
    the outside median and the optimizer rows' own times, summed in that order (the history
    works it out from these without building the table)."""
    return sum(own_us) + outside_us + sum(optimizer_own_us)


@dataclass(frozen=True, slots=True)
class _SubtreeTotals:
    """Per path, its subtree's own figures summed: a parent's totals are its rows' sum."""

    forward: dict[str, float]  # self medians
    forward_min: dict[str, float]  # self mins and maxes: a bound, not an observed iteration
    forward_max: dict[str, float]
    backward: dict[str, float]  # backward self medians
    rows: dict[str, float]  # how many records the subtree holds (1: a leaf's total is its self)


def _subtree_totals(session: ProfileSession) -> _SubtreeTotals | None:
    """The sums a parent's totals are (None without the outside time: totals as measured)."""
    if session.outside_cpu_us is None:
        return None
    records = session.records
    return _SubtreeTotals(
        forward=subtree_sums(records, lambda r: r.self_cpu_us.median),
        forward_min=subtree_sums(records, lambda r: r.self_cpu_us.min),
        forward_max=subtree_sums(records, lambda r: r.self_cpu_us.max),
        backward=subtree_sums(records, lambda r: _median(r.backward_self_cpu_us) or 0.0),
        rows=subtree_sums(records, lambda r: 1.0),
    )


def _total_cpu(
    rec: ModuleRecord, path: str, self_cpu: Timing | None, totals: _SubtreeTotals | None
) -> Timing:
    """A row's forward total: its subtree's self figures summed (a leaf's is its self time,
    interval and all; a parent's has no interval of its own: its rows carry theirs)."""
    if totals is None:
        series = rec.per_iteration
        if self_cpu is not None and total_is_self(rec):
            return self_cpu  # a leaf: the same figures and series, so the same interval
        return timing(rec.total_cpu_us, series.total_cpu() if series else None)
    if totals.rows.get(path, 0.0) <= 1.0 and self_cpu is not None:
        return self_cpu
    return Timing(totals.forward[path], totals.forward_min[path], totals.forward_max[path])


def total_is_self(rec: ModuleRecord) -> bool:
    """Is the record's total its self time, figure and series (a layer with no layer inside)?"""
    series = rec.per_iteration
    same_series = series is None or series.total_cpu_us is None
    return same_series and rec.total_cpu_us == rec.self_cpu_us


def _backward_total(rec: ModuleRecord, path: str, totals: _SubtreeTotals | None) -> float | None:
    if rec.backward_total_cpu_us is None:
        return None
    return rec.backward_total_cpu_us.median if totals is None else totals.backward[path]


def _with_pct(row: LayerRow, shares_of: float) -> LayerRow:
    """An optimizer row with its shares of the headline (known once every row's own time is)."""
    own, subtree = _pct(row.own_us, shares_of), _pct(row.share_us, shares_of)
    return replace(row, pct_self=own, pct_total=subtree)


def timing(stat: Stat, series: Series | None) -> Timing:
    """A `Stat` with its median's interval from the per-iteration series (when long enough)."""
    interval = median_ci(series.values) if series and len(series.values) >= CI_VALUES else None
    return Timing(stat.median, stat.min, stat.max, interval)


def _without_interval(row: LayerRow) -> LayerRow:
    self_cpu, total_cpu = row.self_cpu, row.total_cpu
    if (self_cpu is None or self_cpu.interval is None) and (
        total_cpu is None or total_cpu.interval is None
    ):
        return row
    return replace(
        row,
        self_cpu=replace(self_cpu, interval=None) if self_cpu is not None else None,
        total_cpu=replace(total_cpu, interval=None) if total_cpu is not None else None,
    )


def _inflated(row: LayerRow) -> LayerRow:
    """`row` with its times marked as inflated by threads waiting for cores."""
    self_cpu, total_cpu = row.self_cpu, row.total_cpu
    return replace(
        row,
        self_cpu=replace(self_cpu, inflated=True) if self_cpu is not None else None,
        total_cpu=replace(total_cpu, inflated=True) if total_cpu is not None else None,
    )


def _kind(row: TreeRow) -> RowKind:
    if row.record is None:
        return "unprofiled"
    return "container" if row.derived else "layer"


def _pct(part_us: float, whole_us: float) -> float | None:
    return 100.0 * part_us / whole_us if whole_us > 0 else None


def _median(stat: Stat | None) -> float | None:
    return None if stat is None else stat.median


def _row(
    tree_row: TreeRow,
    session: ProfileSession,
    shares_of: float,
    sums: tuple[dict[str, float], _SubtreeTotals | None],
    target: ModuleTarget | None,
    raw: _Raw | None,
) -> LayerRow:
    """One row's figures, with the plan's facts about its module (`target`): its class and
    parameters where nothing was measured, and where its parent creates it. (Built in one go: a
    `replace` per row afterwards was half of a 1,000-layer table's time.)"""
    rec, kind = tree_row.record, _kind(tree_row)
    own = rec if kind == "layer" else None  # figures of its own: calls, self time, ops
    series = rec.per_iteration if rec else None
    own_us = step_self_us(rec) if rec else 0.0
    inclusive, totals = sums
    self_cpu = timing(own.self_cpu_us, series.self_cpu_us if series else None) if own else None
    path = tree_row.path
    share_us = inclusive.get(tree_row.path, step_share_us(rec)) if rec else 0.0
    return LayerRow(
        path=tree_row.path,
        name=tree_row.name,
        depth=tree_row.depth,
        parent=parent_of(tree_row.path),
        kind=kind,
        has_children=tree_row.has_children,
        class_name=(rec.class_name if rec else "") or (target.class_name if target else ""),
        record=rec,
        calls_per_iteration=own.calls_per_iteration(session.iterations) if own else None,
        self_cpu=self_cpu,
        total_cpu=_total_cpu(rec, path, self_cpu, totals) if rec else None,
        backward_self_cpu_us=_median(own.backward_self_cpu_us) if own else None,
        backward_total_cpu_us=_backward_total(rec, path, totals) if rec else None,
        self_device_us=_median(own.self_device_us) if own else None,
        total_device_us=_median(rec.total_device_us) if rec else None,
        self_cpu_mem=own.self_cpu_mem if own else None,
        cpu_mem=rec.cpu_mem if rec else None,
        self_device_mem=own.self_device_mem if own else None,
        device_mem=rec.device_mem if rec else None,
        own_us=own_us,
        share_us=share_us,
        pct_self=_pct(own_us, shares_of) if rec else None,
        pct_total=_pct(share_us, shares_of) if rec else None,
        param_count=(rec.param_count if rec else 0) or (target.param_count if target else 0),
        input_shapes=rec.input_shapes if rec else (),
        output_shapes=rec.output_shapes if rec else (),
        aliases=rec.aliases if rec else (),
        source=target.source if target else None,
        op_count=len(own.ops) if own else 0,
        raw=raw.times.get(path) if raw is not None and rec else None,
        clamped=raw is not None and path in raw.clamped,
    )


def _rows(
    session: ProfileSession, tree: list[TreeRow], shares_of: float, raw: _Raw | None
) -> list[LayerRow]:
    """The rows of `tree` with their figures (and their --flops work, when counted)."""
    inclusive = inclusive_us(session)
    totals = _subtree_totals(session)
    targets = {t.path: t for t in session.plan.targets}
    rows = [
        _row(tree_row, session, shares_of, (inclusive, totals), targets.get(tree_row.path), raw)
        for tree_row in tree
    ]
    return _with_work(rows, session) if session.flops is not None else rows


def _finished(
    rows: list[LayerRow], outside: LayerRow | None, session: ProfileSession
) -> tuple[list[LayerRow], LayerRow | None]:
    """The rows (and the outside row) with what the session adds by path: what fused, the
    communication, the inflation by waiting threads, the memory figures."""
    if session.compiled is not None:
        rows = _with_fused(rows, session)
    if session.fsdp or session.tp:
        rows = _with_comm(rows, session)
    if session.stability is not None and session.stability.threads_exceed_free_cores:
        rows = [_inflated(row) for row in rows]
        outside = _inflated(outside) if outside is not None else None
    device = session.memory.primary if session.memory is not None else None
    if device is not None:
        rows, outside = _with_memory(rows, outside, device)
    return rows, outside


def _with_work(rows: list[LayerRow], session: ProfileSession) -> list[LayerRow]:
    """Rows with their --flops figures: the work counted for the path and its roofline."""
    assert session.flops is not None
    works = {w.path: w for w in session.flops.layers}
    lines = by_path(session)
    return [
        replace(row, work=works.get(row.path), roofline=lines.get(row.path))
        if row.path in works
        else row
        for row in rows
    ]


def _with_memory(
    rows: list[LayerRow], outside: LayerRow | None, device: DeviceMemory
) -> tuple[list[LayerRow], LayerRow | None]:
    """Each profiled layer's memory figures, and the outside row's (what no layer allocated)."""
    found = memory_by_path(device)
    rows = [replace(r, memory=found.get(r.path)) if r.kind == "layer" else r for r in rows]
    return rows, replace(outside, memory=device.outside) if outside is not None else None


def _with_fused(rows: list[LayerRow], session: ProfileSession) -> list[LayerRow]:
    """Rows with the modules their compiled kernels fused, relative to the row's path."""
    assert session.compiled is not None
    fused = {layer.path: layer.fused for layer in session.compiled.layers}
    return [
        replace(row, fused=tuple(_below(row.path, f) for f in fused[row.path]))
        if row.path in fused
        else row
        for row in rows
    ]


def _with_comm(rows: list[LayerRow], session: ProfileSession) -> list[LayerRow]:
    """Each FSDP2 unit's and tensor-parallel layer's row with its communication (a unit that is
    no row of the tree, when the profiled model is not FSDP's root, is not shown)."""
    by_unit: dict[str, list[UnitComm]] = {}
    for comm in (*session.fsdp, *session.tp):
        by_unit.setdefault(comm.path, []).append(comm)
    return [
        replace(row, comm=tuple(by_unit[row.path])) if row.path in by_unit else row for row in rows
    ]


def _below(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


def _outside_row(session: ProfileSession, shares_of: float) -> LayerRow | None:
    """The time in no profiled module: one amount, forward and backward together (its ops are
    the session's `outside_ops`)."""
    stat = session.outside_cpu_us
    if stat is None:
        return None
    label, time = outside_label(session), Timing(stat.median, stat.min, stat.max)
    pct = _pct(stat.median, shares_of)
    return LayerRow(
        path=label, name=label, depth=0, parent=None, kind="outside", has_children=False,
        class_name="", record=None, calls_per_iteration=None, self_cpu=time, total_cpu=time,
        backward_self_cpu_us=None, backward_total_cpu_us=None, self_device_us=None,
        total_device_us=None, self_cpu_mem=None, cpu_mem=None, self_device_mem=None,
        device_mem=None, own_us=stat.median, share_us=stat.median, pct_self=pct, pct_total=pct,
        param_count=0, input_shapes=(), output_shapes=(), aliases=(), source=None,
        op_count=len(session.outside_ops),
    )  # fmt: skip


def optimizer_rows(
    optimizer: OptimizerRecord | None, iterations: int, *, means: bool = False
) -> list[LayerRow]:
    """The `(optimizer)` row, a container of its parts (its total is theirs summed), then each
    part, a param group under the step it is a share of (shares filled in by `_with_pct`).
    `means`: the figures are means over a rank's typical steps (`analysis.typical_steps`)."""
    if optimizer is None:
        return []
    parts: list[LayerRow] = []
    for part in (p for p in optimizer.parts if not p.within):  # each part, its groups under it
        for row_part in [part, *(p for p in optimizer.parts if p.within == part.name)]:
            parts.append(_part_row(row_part, optimizer, iterations, means))
    tops = [r for r in parts if r.depth == 1 and r.total_cpu is not None]
    measured = timing(optimizer.self_cpu_us, optimizer.per_iteration)
    total = _sum_timings([r.total_cpu for r in tops if r.total_cpu]) if tops else measured
    device = optimizer.self_device_us.median if optimizer.self_device_us else None
    head = replace(
        _extra_row(OPTIMIZER_ROW, OPTIMIZER_ROW, None, "optimizer", bool(optimizer.parts)),
        class_name=", ".join(optimizer.classes),
        total_cpu=total,
        total_device_us=device,
        own_us=0.0 if parts else total.median,  # without parts (an older file) it owns its time
        share_us=total.median,
        op_count=len(optimizer.ops),
    )
    return [head, *parts]


def _sum_timings(timings: list[Timing]) -> Timing:
    """Timings added up: a total that is its rows' sum (no interval of its own)."""
    if len(timings) == 1:
        return timings[0]
    return Timing(
        sum(t.median for t in timings), sum(t.min for t in timings), sum(t.max for t in timings)
    )


def _part_row(
    part: OptimizerPart, optimizer: OptimizerRecord, iterations: int, means: bool
) -> LayerRow:
    """One part: its own time (the step's less its param groups'), its total (its own and its
    groups' summed), its calls."""
    groups = [p for p in optimizer.parts if p.within == part.name]
    parent = f"{OPTIMIZER_ROW}.{part.within}" if part.within else OPTIMIZER_ROW
    row = _extra_row(f"{parent}.{part.name}", part.name, parent, "optimizer_part", bool(groups))
    own = _less(part, groups, means)
    total = _sum_timings([own, *(timing(g.cpu_us, g.per_iteration) for g in groups)])
    return replace(
        row,
        depth=2 if part.within else 1,
        calls_per_iteration=part.calls / max(iterations, 1) if part.calls else None,
        self_cpu=own,
        total_cpu=total,
        own_us=own.median,
        share_us=total.median,
    )


def _less(part: OptimizerPart, groups: list[OptimizerPart], means: bool) -> Timing:
    """A part's own time: its time less its param groups' (per iteration where kept; of means,
    the means' difference: a mean of differences)."""
    if not groups:
        return timing(part.cpu_us, part.per_iteration)
    series = [part.per_iteration, *(g.per_iteration for g in groups)]
    if not means and all(s is not None for s in series):
        own = Series.of(
            max(0.0, values[0] - sum(values[1:]))
            for values in zip(*(s.values for s in series if s is not None), strict=True)
        )
        return timing(Stat.of(own.values), own)
    median = max(0.0, part.cpu_us.median - sum(g.cpu_us.median for g in groups))
    return Timing(median, median, median)


def _extra_row(path: str, name: str, parent: str | None, kind: RowKind, children: bool) -> LayerRow:
    """A row that is no module (nothing measured filled in yet)."""
    return LayerRow(
        path=path, name=name, depth=0, parent=parent, kind=kind, has_children=children,
        class_name="", record=None, calls_per_iteration=None, self_cpu=None, total_cpu=None,
        backward_self_cpu_us=None, backward_total_cpu_us=None, self_device_us=None,
        total_device_us=None, self_cpu_mem=None, cpu_mem=None, self_device_mem=None,
        device_mem=None, own_us=0.0, share_us=0.0, pct_self=None, pct_total=None,
        param_count=0, input_shapes=(), output_shapes=(), aliases=(), source=None, op_count=0,
    )  # fmt: skip


__all__ = [
    "CI_VALUES",
    "LayerRow",
    "LayerTable",
    "RawTimes",
    "RowKind",
    "Timing",
    "build_layer_table",
    "headline_us",
    "layer_table",
    "optimizer_rows",
    "rows_sum_us",
    "stated_session",
    "timing",
    "total_is_self",
]
