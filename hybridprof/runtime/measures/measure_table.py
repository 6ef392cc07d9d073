"""The measured iterations of a run, kept as arrays: what `aggregate.py` summarises.

A strategy hands over one `IterationMeasure` per iteration: an object per layer and per op, many
megabytes an iteration at 10,000 layers. Kept as they came, they made the memory of a run grow with
its iterations. `MeasureTable.add` copies each into a few arrays (its layers' and its ops' fields,
only those that are not all zero) and lets the objects go: a small fraction of that an iteration
(figures: benchmarks/README.md, "Measured in passing" and bench_whole). The values are the same
floats, so the medians and series built from the table
are the numbers the objects gave.

Layers and ops are numbered in order of first appearance (a layer path; an op by its name and
whether it ran in the backward pass), which is the order the session lists ops in before sorting
them by weight. A training step's optimizer is a row too, under a key no module path can be
(`OPTIMIZER_KEY`), so its op medians come out as a layer's do; its parts and param groups, a few
numbers an iteration, are kept as they came. The ops of the time in no layer are the row of
`OUTSIDE_KEY` (its own fields are zero: that time is `outside_cpu_us`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import numpy as np

from hybridprof.runtime.measures.iteration import (
    OPTIMIZER_KEY,
    OUTSIDE_KEY,
    CommMeasure,
    IterationMeasure,
    OpMeasure,
    OptimizerMeasure,
    PathMeasure,
)
from hybridprof.runtime.measures.memory_table import MemoryTable

Array = np.ndarray[Any, Any]

# The PathMeasure and OpMeasure fields the table keeps: every number (`path`, `name`, `backward`
# and `ops` are what it numbers them by), read off the dataclasses so that the two cannot drift.
PATH_FIELDS = tuple(f.name for f in fields(PathMeasure) if f.name not in ("path", "ops"))
OP_FIELDS = tuple(f.name for f in fields(OpMeasure) if f.name not in ("name", "backward"))


@dataclass(frozen=True, slots=True)
class _Iteration:
    """One iteration: per layer row and per op row, each field that is not all zero."""

    path_row: Array  # int32: the table's number of each layer measured
    path_fields: dict[str, Array]
    op_slot: Array  # int32: per op row, the table's number of its (layer, op) pair
    op_fields: dict[str, Array]
    total_cpu_us: float
    outside_cpu_us: float
    backward: bool  # a backward pass ran in it
    optimizer: OptimizerMeasure | None  # its parts and groups (its row is among the paths)
    comm: dict[tuple[str, str], CommMeasure]  # FSDP2 units' communication (a few per unit)


class MeasureTable:
    """The measured iterations of a run, in order (see the module docstring)."""

    def __init__(self) -> None:
        self._path_rows: dict[str, int] = {}
        # (layer row, op name, backward) -> slot, numbered as pairs first appear: their order
        self._op_slots: dict[tuple[int, str, bool], int] = {}
        self._iterations: list[_Iteration] = []
        self.memory = MemoryTable()  # per-layer memory, when the strategy measured it

    @classmethod
    def of(cls, measures: Iterable[IterationMeasure]) -> MeasureTable:
        table = cls()
        for measure in measures:
            table.add(measure)
        return table

    def add(self, measure: IterationMeasure) -> None:
        """Copy one iteration in (the measure itself is not kept)."""
        paths = list(measure.paths.values())
        optimizer = measure.optimizer
        if optimizer is not None:
            paths.append(optimizer.row)
            optimizer = OptimizerMeasure(
                PathMeasure(OPTIMIZER_KEY),
                optimizer.parts,
                optimizer.part_calls,
                optimizer.groups,
                optimizer.classes,
            )  # the row's numbers go into the arrays: only the few parts are kept
        if measure.outside_ops:  # the outside row's ops, numbered as a layer's are
            paths.append(PathMeasure(OUTSIDE_KEY, ops=measure.outside_ops))
        ops: list[tuple[int, OpMeasure]] = []
        rows: list[int] = []
        for path in paths:
            row = self._path_rows.setdefault(path.path, len(self._path_rows))
            rows.append(row)
            ops.extend((row, op) for op in path.ops.values())
        if measure.memory is not None:
            self.memory.add(measure.memory)
        slots = self._op_slots
        numbers = [slots.setdefault((row, op.name, op.backward), len(slots)) for row, op in ops]
        self._iterations.append(
            _Iteration(
                path_row=np.array(rows, dtype=np.int32),
                path_fields=_fields(paths, PATH_FIELDS),
                op_slot=np.array(numbers, dtype=np.int32),
                op_fields=_fields([op for _, op in ops], OP_FIELDS),
                total_cpu_us=measure.total_cpu_us,
                outside_cpu_us=outside_us(measure),
                backward=measure.backward,
                optimizer=optimizer,
                comm=measure.comm,
            )
        )

    def __len__(self) -> int:
        return len(self._iterations)

    @property
    def total_cpu_us(self) -> list[float]:
        """Each iteration's profiled CPU time (0 where the strategy did not measure it)."""
        return [it.total_cpu_us for it in self._iterations]

    @property
    def outside_cpu_us(self) -> list[float]:
        """Each iteration's time in no profiled layer (see `aggregate.outside_us`)."""
        return [it.outside_cpu_us for it in self._iterations]

    @property
    def backward(self) -> bool:
        """A backward pass ran in some iteration."""
        return any(it.backward for it in self._iterations)

    @property
    def optimizers(self) -> list[OptimizerMeasure | None]:
        """Each iteration's optimizer parts, groups and classes (None: no optimizer ran)."""
        return [it.optimizer for it in self._iterations]

    @property
    def comm(self) -> list[dict[tuple[str, str], CommMeasure]]:
        """Each iteration's FSDP2 communication: (unit path, kind) -> its calls and time."""
        return [it.comm for it in self._iterations]

    @property
    def layer_rows(self) -> int:
        """How many layers (and optimizer and outside rows) any iteration measured."""
        return len(self._path_rows)

    def row_of(self, path: str) -> int | None:
        return self._path_rows.get(path)

    def path_matrix(self, field: str) -> Array | None:
        """One layer field over the iterations: [iteration, layer row], 0 where a layer was not
        measured; None when the field is zero throughout."""
        parts = [it for it in self._iterations if field in it.path_fields]
        if not parts:
            return None
        matrix = np.zeros((len(self._iterations), len(self._path_rows)), dtype=np.float64)
        for index, it in enumerate(self._iterations):
            values = it.path_fields.get(field)
            if values is not None:
                matrix[index, it.path_row] = values
        return matrix

    def op_table(self) -> OpTable:
        """Every (layer, op) pair measured in any iteration, in order of first appearance, with
        each op field's value per iteration (0 in an iteration without it). Filled one iteration
        at a time: no array spans all iterations' ops but the result."""
        iterations = self._iterations
        pairs = len(self._op_slots)
        fields: dict[str, Array] = {}
        for name in OP_FIELDS:
            if all(name not in it.op_fields for it in iterations):
                continue
            matrix = np.zeros((pairs, len(iterations)), dtype=np.float64)
            for index, it in enumerate(iterations):
                values = it.op_fields.get(name)
                if values is not None:
                    matrix[it.op_slot, index] = values
            fields[name] = matrix
        return OpTable(
            path_row=np.array([row for row, _, _ in self._op_slots], dtype=np.int64),
            op=[(name, backward) for _, name, backward in self._op_slots],
            fields=fields,
            iterations=len(iterations),
        )


@dataclass(frozen=True, slots=True)
class OpTable:
    """Per (layer, op) pair: its layer row, its (name, backward) and each field per iteration."""

    path_row: Array
    op: list[tuple[str, bool]]
    fields: dict[str, Array]  # [pair, iteration]; absent: zero throughout
    iterations: int


def _fields(items: list[Any], names: tuple[str, ...]) -> dict[str, Array]:
    """Each field of `items` as an array, leaving out those that are zero for every item (this
    runs for every layer and op of every iteration: one C-level pass per field)."""
    kept: dict[str, Array] = {}
    for name in names:
        values = list(map(attrgetter(name), items))
        if any(values):
            kept[name] = np.array(values, dtype=np.float64)
    return kept


def outside_us(measure: IterationMeasure) -> float:
    """An iteration's time in no profiled layer: as measured op by op, else what the layers'
    self times (forward and backward) leave of the iteration's total."""
    if measure.outside_cpu_us is not None:
        return measure.outside_cpu_us
    inside = sum(p.self_cpu_us + p.backward_self_cpu_us for p in measure.paths.values())
    if measure.optimizer is not None:
        inside += measure.optimizer.row.self_cpu_us
    return max(0.0, measure.total_cpu_us - inside)
