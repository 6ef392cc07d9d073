"""Fold per-iteration measures into the session's ModuleRecords, and describe the environment.

Each `IterationMeasure` holds per-iteration sums per path. A record keeps median/min/max over the
measured iterations (an iteration in which a path was not called counts as 0 for it), the calls
summed over all iterations, and per-op medians. Selected paths never called are listed in
`never_called` instead of getting an empty record.
"""

from __future__ import annotations

import itertools
import os
import platform
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from hybridprof.datamodel import (
    Calibration,
    CpuWaits,
    Environment,
    FindingKind,
    IterationSeries,
    ModuleRecord,
    ModuleTarget,
    OpStat,
    ProfilePlan,
    ProfileSession,
    ScheduleInfo,
    Series,
    Stability,
    Stat,
    StopReason,
)
from hybridprof.runtime.basics.stopping import Count
from hybridprof.runtime.measures.fsdp_comm import UnitSizes, tp_comm, unit_comm
from hybridprof.runtime.measures.iteration import OPTIMIZER_KEY, OUTSIDE_KEY, IterationMeasure
from hybridprof.runtime.measures.measure_table import (
    OP_FIELDS,
    PATH_FIELDS,
    MeasureTable,
    OpTable,
    outside_us,
)
from hybridprof.runtime.measures.optimizer import optimizer_record

Array = np.ndarray[Any, Any]


@dataclass(frozen=True, slots=True)
class RunFacts:
    """What a session records about its run besides the measures: ProfileSession's own fields
    (the measured ones, `iterations`, `iteration_cpu_us` and `never_called`, come from the
    measures)."""

    environment: Environment
    profile_memory: bool = False
    use_device: bool = False  # device (CUDA) time was measured
    backward: bool = False  # backward time was measured (also when a backward pass was seen)
    warmup: int = 0
    requested_warmup: Count | None = None
    requested_iterations: Count = 1
    stop_reason: StopReason = "count"
    max_time_s: float | None = None
    stability: Stability | None = None
    interrupted: bool = False
    warnings: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    model_file: str | None = None
    model_hash: str | None = None
    started_at: str = ""
    duration_s: float = 0.0
    trace_file: str | None = None
    steps: int = 0  # `prof.step()` calls of a with-block
    schedule: ScheduleInfo | None = None
    cpu_waits: CpuWaits | None = None
    fsdp_sizes: UnitSizes = ()  # an FSDP2-sharded model's units and their collectives' bytes
    tp_groups: tuple[tuple[str, str], ...] = ()  # tensor-parallel layers and their groups
    calibration: Calibration | None = None  # the profiler's cost, taken out of the rows


def build_session(
    plan: ProfilePlan,
    measures: MeasureTable | Sequence[IterationMeasure],
    strategy_name: str,
    facts: RunFacts | None = None,
) -> ProfileSession:
    """A ProfileSession from a plan, its measured iterations and the facts of the run (by default,
    this process's environment and nothing else)."""
    facts = facts or RunFacts(environment=environment())
    table = as_table(measures)
    backward = facts.backward or table.backward  # a with-block says what it saw
    records, optimizer_ops, outside_ops = _aggregate(
        plan.targets, table, use_device=facts.use_device, backward=backward
    )
    called = {r.path for r in records}
    return ProfileSession(
        plan=plan,
        environment=facts.environment,
        records=records,
        strategy=strategy_name,
        warmup=facts.warmup,
        requested_warmup=facts.requested_warmup,
        iterations=len(table),
        requested_iterations=facts.requested_iterations,
        stop_reason=facts.stop_reason,
        max_time_s=facts.max_time_s,
        stability=facts.stability,
        interrupted=facts.interrupted,
        profile_memory=facts.profile_memory,
        use_device=facts.use_device,
        backward=backward,
        iteration_cpu_us=tuple(table.total_cpu_us),
        outside_cpu_us=_outside_stat(table),
        outside_ops=outside_ops,
        never_called=tuple(p for p in plan.selected_paths() if p not in called),
        warnings=facts.warnings,
        command=facts.command,
        model_file=facts.model_file,
        model_hash=facts.model_hash,
        started_at=facts.started_at,
        duration_s=facts.duration_s,
        trace_file=facts.trace_file,
        optimizer=optimizer_record(table, optimizer_ops, use_device=facts.use_device),
        steps=facts.steps,
        schedule=facts.schedule,
        cpu_waits=facts.cpu_waits,
        memory=table.memory.profile(),
        fsdp=unit_comm(table.comm, facts.fsdp_sizes),
        tp=tp_comm(table.comm, facts.tp_groups),
        calibration=facts.calibration,
    )


def as_table(measures: MeasureTable | Sequence[IterationMeasure]) -> MeasureTable:
    return measures if isinstance(measures, MeasureTable) else MeasureTable.of(measures)


def _outside_stat(table: MeasureTable) -> Stat | None:
    """The outside time over the iterations; None when they have no totals (layer ranges only)."""
    if not any(table.total_cpu_us):
        return None
    return Stat.of(table.outside_cpu_us)


def aggregate(
    targets: Sequence[ModuleTarget],
    measures: MeasureTable | Sequence[IterationMeasure],
    *,
    use_device: bool = False,
    backward: bool = False,
) -> tuple[ModuleRecord, ...]:
    """One record per selected target that was called at least once, in the targets' order."""
    records, _, _ = _aggregate(
        targets, as_table(measures), use_device=use_device, backward=backward
    )
    return records


def _aggregate(
    targets: Sequence[ModuleTarget], table: MeasureTable, *, use_device: bool, backward: bool
) -> tuple[tuple[ModuleRecord, ...], tuple[OpStat, ...], tuple[OpStat, ...]]:
    """The records, then the optimizer row's and the outside row's op medians (worked out in
    the same pass)."""
    columns = _PathColumns(table)
    called: list[tuple[ModuleTarget, int]] = []
    for target in targets:
        row = table.row_of(target.path) if target.selected else None
        if row is not None and columns.calls(row) > 0:
            called.append((target, row))
    record_of_row = {row: i for i, (_, row) in enumerate(called)}
    optimizer_row = table.row_of(OPTIMIZER_KEY)
    if optimizer_row is not None:
        record_of_row[optimizer_row] = len(called)
    outside_row = table.row_of(OUTSIDE_KEY)
    if outside_row is not None:
        record_of_row[outside_row] = len(called) + 1
    ops = _op_stats(table.op_table(), record_of_row, len(called) + 2)
    records = tuple(
        _record(target, columns, row, ops[i], use_device, backward)
        for i, (target, row) in enumerate(called)
    )
    return records, ops[len(called)], tuple(map(_no_negative_time, ops[len(called) + 1]))


def _no_negative_time(op: OpStat) -> OpStat:
    """An outside op with its times at least 0: an op merged into its parent (`_absorb`) is
    taken back out by a float subtraction that can leave -1e-13 where 0 was, and a session
    holding a negative time is refused when loaded."""
    return replace(
        op,
        self_cpu_us=max(op.self_cpu_us, 0.0),
        total_cpu_us=max(op.total_cpu_us, 0.0),
        self_device_us=max(op.self_device_us, 0.0),
        total_device_us=max(op.total_device_us, 0.0),
    )


class _PathColumns:
    """Each layer field over the iterations, summarised for every layer at once.

    A 10,000-layer session took most of a second in per-layer medians (a sort, a median and a
    min and max per field and layer, in Python); here each field is sorted once over its
    iterations, for all layers, and a layer's figures are picked from those arrays. The same
    numbers: the middle value, or the two middle ones added and halved, as `Stat.of` and
    `statistics.median` give them; whole numbers rounded half to even, as `round` does."""

    def __init__(self, table: MeasureTable) -> None:
        self._matrices = {name: table.path_matrix(name) for name in PATH_FIELDS}
        self._iterations = len(table)
        calls = self._matrices["calls"]
        self._calls = [0] * table.layer_rows if calls is None else _column_sums(calls)
        self._stats: dict[str, list[Stat]] = {}
        self._ints: dict[str, list[int]] = {}
        self._values: dict[str, list[list[float]]] = {}

    @property
    def iterations(self) -> int:
        return self._iterations

    def calls(self, row: int) -> int:
        """All iterations' calls of the layer of `row`."""
        return self._calls[row]

    def stat(self, name: str, row: int) -> Stat:
        if name not in self._stats:
            self._stats[name] = self._summaries(name)
        return self._stats[name][row]

    def int_median(self, name: str, row: int) -> int:
        if name not in self._ints:
            self._ints[name] = self._rounded_medians(name)
        return self._ints[name][row]

    def values(self, name: str, row: int) -> list[float]:
        """The layer's value in each iteration."""
        if name not in self._values:
            matrix = self._matrices[name]
            rows = len(self._calls)
            zeros = [0.0] * self._iterations
            self._values[name] = [zeros] * rows if matrix is None else matrix.T.tolist()
        return self._values[name][row]

    def _sorted(self, name: str) -> Array | None:
        matrix = self._matrices[name]
        return None if matrix is None or not self._iterations else np.sort(matrix, axis=0)

    def _medians(self, ordered: Array) -> Array:
        mid = self._iterations // 2
        middle: Array = (
            ordered[mid] if self._iterations % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        )
        return middle

    def _summaries(self, name: str) -> list[Stat]:
        ordered = self._sorted(name)
        if ordered is None:
            return [Stat(0.0, 0.0, 0.0)] * len(self._calls)
        columns = (self._medians(ordered).tolist(), ordered[0].tolist(), ordered[-1].tolist())
        return list(itertools.starmap(Stat, zip(*columns, strict=True)))

    def _rounded_medians(self, name: str) -> list[int]:
        ordered = self._sorted(name)
        if ordered is None:
            return [0] * len(self._calls)
        return np.rint(self._medians(ordered)).astype(np.int64).tolist()  # type: ignore[no-any-return]


def _column_sums(matrix: Array) -> list[int]:
    """Each column's sum, rounded (calls: whole numbers, summed exactly in float64)."""
    return np.rint(matrix.sum(axis=0)).astype(np.int64).tolist()  # type: ignore[no-any-return]


def _record(
    target: ModuleTarget,
    columns: _PathColumns,
    row: int,
    ops: tuple[OpStat, ...],
    use_device: bool,
    backward: bool,
) -> ModuleRecord:
    def stat(field: str) -> Stat:
        return columns.stat(field, row)

    return ModuleRecord(
        path=target.path,
        class_name=target.class_name,
        calls=columns.calls(row),
        self_cpu_us=stat("self_cpu_us"),
        total_cpu_us=stat("total_cpu_us"),
        self_device_us=stat("self_device_us") if use_device else None,
        total_device_us=stat("total_device_us") if use_device else None,
        self_cpu_mem=columns.int_median("self_cpu_mem", row),
        cpu_mem=columns.int_median("cpu_mem", row),
        self_device_mem=columns.int_median("self_device_mem", row),
        device_mem=columns.int_median("device_mem", row),
        backward_self_cpu_us=stat("backward_self_cpu_us") if backward else None,
        backward_total_cpu_us=stat("backward_total_cpu_us") if backward else None,
        backward_self_device_us=(
            stat("backward_self_device_us") if backward and use_device else None
        ),
        param_count=target.param_count,
        ops=ops,
        aliases=target.aliases,
        is_leaf=target.is_leaf,
        per_iteration=(
            _series(columns, row, use_device, backward) if columns.iterations > 1 else None
        ),
    )


def _series(columns: _PathColumns, row: int, use_device: bool, backward: bool) -> IterationSeries:
    """Each iteration's times, kept so a report can give every median its confidence interval."""

    def series(field: str) -> Series:
        return Series.of(columns.values(field, row))

    def total(own: Series, field: str) -> Series | None:
        whole = series(field)
        return None if whole == own else whole  # a layer with nothing profiled inside: the same

    self_cpu = series("self_cpu_us")
    self_device = series("self_device_us") if use_device else None
    backward_self = series("backward_self_cpu_us") if backward else None
    return IterationSeries(
        self_cpu_us=self_cpu,
        total_cpu_us=total(self_cpu, "total_cpu_us"),
        self_device_us=self_device,
        total_device_us=(
            total(self_device, "total_device_us") if self_device is not None else None
        ),
        backward_self_cpu_us=backward_self,
        backward_total_cpu_us=(
            total(backward_self, "backward_total_cpu_us") if backward_self is not None else None
        ),
    )


def _op_stats(
    ops: OpTable, record_of_row: dict[int, int], records: int
) -> list[tuple[OpStat, ...]]:
    """Per record, per op, the median over iterations (an iteration without the op counts as 0),
    heaviest first (ties by name, then in order of first appearance).

    Worked out for all records at once: a 10,000-layer session has ~50,000 ops, each with nine
    fields, and a median per field and op in Python took seconds; here each field is one array
    and one `np.median` over its rows (the same number: the middle value, or the mean of the two
    middle ones), and one stable sort orders every record's ops (as `sorted` by weight, then
    name, did per record)."""
    record = _record_index(ops, record_of_row)
    columns = [_op_medians(ops, name, len(ops.op)) for name in OP_FIELDS]
    names = [name for name, _ in ops.op]
    rank = {name: i for i, name in enumerate(sorted(set(names)))}
    name_rank = np.fromiter(map(rank.__getitem__, names), dtype=np.int64, count=len(names))
    self_cpu = columns[OP_FIELDS.index("self_cpu_us")]
    order = np.lexsort((name_rank, -self_cpu, record))  # stable: equal keys keep their order
    order = order[record[order] >= 0]  # else a layer not in the session (never called)
    picked = [column[order].tolist() for column in columns]
    backward = [ops.op[i][1] for i in order.tolist()]
    stats = list(
        itertools.starmap(
            OpStat, zip([names[i] for i in order.tolist()], *picked, backward, strict=True)
        )
    )
    ends = np.cumsum(np.bincount(record[order], minlength=records)).tolist()
    return [tuple(stats[start:end]) for start, end in zip([0, *ends], ends, strict=False)]


def _record_index(ops: OpTable, record_of_row: dict[int, int]) -> Array:
    """Per (layer, op) pair, the index of its layer's record (-1: its layer has none)."""
    rows = int(ops.path_row.max()) + 1 if len(ops.path_row) else 0
    lookup = np.full(max(rows, 1), -1, dtype=np.int64)
    for row, index in record_of_row.items():
        if row < rows:
            lookup[row] = index
    return lookup[ops.path_row]


def _op_medians(ops: OpTable, field: str, count: int) -> Array:
    """One op field's median over the iterations, per (layer, op) pair: counts and bytes as
    integers (rounded half to even, as `round` does)."""
    if field not in ops.fields:
        return np.zeros(count, dtype=np.int64 if field in _ROUNDED else np.float64)
    medians: Array = np.median(ops.fields[field], axis=1)
    return np.rint(medians).astype(np.int64) if field in _ROUNDED else medians


# The OpMeasure fields an OpStat holds as medians over iterations that are rounded to integers.
_ROUNDED = frozenset({"calls", "self_cpu_mem", "cpu_mem", "self_device_mem", "device_mem"})


# --------------------------------------------------------------------------- environment


def environment(device: torch.device | str | None = None) -> Environment:
    """Versions, OS, CPU model, threads and the device the run used."""
    import hybridprof

    return Environment(
        hybridprof_version=hybridprof.__version__,
        torch_version=str(torch.__version__),
        python_version=platform.python_version(),
        os=f"{platform.system()} {platform.release()}",
        cpu=cpu_model(),
        threads=torch.get_num_threads(),
        device=describe_device(device),
    )


def cpu_model() -> str:
    """The CPU's model name (from /proc/cpuinfo on Linux), with the logical core count."""
    name = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            name = next(
                (ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), ""
            )
    except OSError:
        pass
    name = name or platform.processor() or platform.machine() or "unknown CPU"
    return f"{name} ({os.cpu_count() or '?'} logical cores)"


def describe_device(device: torch.device | str | None) -> str:
    dev = torch.device(device) if device is not None else torch.device("cpu")
    if dev.type != "cuda":
        return dev.type
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    return f"cuda:{index} ({torch.cuda.get_device_name(index)})"


def never_ran_warning(session: ProfileSession, library: bool = False) -> str | None:
    """Why selected layers got 0 calls when their parents did the work, and what to select (as
    command-line options, or `library`: as `Profile`'s arguments).

    nn.TransformerEncoder in eval mode runs one fused op per layer and never calls the layer's
    Linear/LayerNorm children; nn.MultiheadAttention uses its out_proj's weights without calling
    it. Leaves-only selections then miss that time: the nearest parents are what did the work.
    """
    if not session.never_called:
        return None
    if not session.records:
        parents = _outermost({path.rpartition(".")[0] for path in session.never_called})
        more = " ..." if len(parents) > 4 else ""
        if library:
            named = "" if parents == [""] else f", or paths={parents[:4]!r}{more}"
            instead = f"leaves_only=False{named}"
        else:
            shown = "--depth 0" if parents == [""] else "--paths " + ",".join(parents[:4])
            instead = f"{shown}{more} (or --with-parents)"
        count = len(session.never_called)
        return (
            f"none of the {count} selected layer{'s' if count > 1 else ''} was called through "
            "its module (the model skipped them or ran their work another way, e.g. a fused fast "
            "path such as nn.TransformerEncoder's in eval mode, or F.linear on a layer's weight); "
            f"profile the modules that run them instead: {instead}"
        )
    return _skipped_by_parents(session, library)


def _skipped_by_parents(session: ProfileSession, library: bool = False) -> str | None:
    """Some layers never ran because an unselected parent with inline ops does their work."""
    doers = {f.path for f in session.plan.findings if f.kind == FindingKind.INLINE_OPS}
    selected = set(session.plan.selected_paths())
    if not session.plan.classes:
        # A plan from the tree alone (the with-block's: no source read) has no inline-ops
        # findings; a parent that is not profiled and holds a layer that never ran is then what
        # did the work (MultiheadAttention with its out_proj), and its time is outside.
        doers = {p.rpartition(".")[0] for p in session.never_called} - selected
    skipped = [
        p
        for p in session.never_called
        if (parent := p.rpartition(".")[0]) in doers and parent not in selected and parent
    ]
    if not skipped:
        return None
    more = f" and {len(skipped) - 1} more" if len(skipped) > 1 else ""
    return (
        f"{skipped[0]}{more} never ran: "
        + (
            "the modules around them do the work themselves"
            if more
            else "the module around it does the work itself"
        )
        + " (e.g. nn.MultiheadAttention uses out_proj's weights), so that time is in (outside "
        + "modules), in no layer's row; "
        + ("pass leaves_only=False" if library else "add such parents with --with-parents")
    )


def _outermost(paths: set[str]) -> list[str]:
    """Paths that are not inside another of them ("" is the root, inside nothing)."""
    if "" in paths:
        return [""]
    return sorted(p for p in paths if not any(p.startswith(q + ".") for q in paths if q != p))


__all__ = [
    "RunFacts",
    "aggregate",
    "build_session",
    "cpu_model",
    "describe_device",
    "environment",
    "never_ran_warning",
    "outside_us",
]
