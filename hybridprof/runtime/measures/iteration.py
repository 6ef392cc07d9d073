"""What a strategy measures in one iteration, before it is summarised into ModuleRecords.

A strategy fills one `IterationMeasure` per measured iteration; `aggregate.py` folds a list of them
into the session's `ModuleRecord`s (median/min/max over iterations). Units as in datamodel:
microseconds and bytes.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hybridprof.runtime.measures.memory_figures import IterationMemory

# A backward op is kept apart from the forward op of the same name under one layer: its key in
# `PathMeasure.ops` is its name plus this suffix, and its `OpMeasure.backward` is True. `op_key`
# is the one place that joins the two; readers use `OpMeasure.name` and `.backward`, never the key.
BACKWARD_SUFFIX = " [bwd]"


# The optimizer's row in a measure table: a key no module path can be (a module's name is never
# empty and holds no dot, so no path is ".").
OPTIMIZER_KEY = "."
# The ops of the time in no layer (the `(outside modules)` row) in a measure table: another key no
# module path can be.
OUTSIDE_KEY = ".."


def op_key(name: str, backward: bool) -> str:
    return name + BACKWARD_SUFFIX if backward else name


@dataclass(slots=True)
class OpMeasure:
    """One operator under one layer within one iteration (mutable: summed while events are
    folded)."""

    name: str
    calls: int = 0
    self_cpu_us: float = 0.0
    total_cpu_us: float = 0.0
    self_device_us: float = 0.0
    total_device_us: float = 0.0
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_device_mem: int = 0
    device_mem: int = 0
    backward: bool = False


@dataclass(slots=True)
class PathMeasure:
    """One profiled path within one iteration: sums over that iteration's calls."""

    path: str
    calls: int = 0
    self_cpu_us: float = 0.0
    total_cpu_us: float = 0.0
    self_device_us: float = 0.0
    total_device_us: float = 0.0
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_device_mem: int = 0
    device_mem: int = 0
    backward_self_cpu_us: float = 0.0
    backward_total_cpu_us: float = 0.0
    backward_self_device_us: float = 0.0
    ops: dict[str, OpMeasure] = field(default_factory=dict)  # key: op_key(name, backward)


@dataclass(slots=True)
class OptimizerMeasure:
    """The optimizer's time in one iteration (see `datamodel.OptimizerRecord`).

    row: its calls (optimizer steps), all its self CPU (and device) time and its ops, kept as a
    path's measure so the measure table and the op medians treat it as they treat a layer.
    parts: each part's self time (`step`, `clip_grad`, `grad_scaler`, `zero_grad`), which add up
    to `row.self_cpu_us`; part_calls: how often each part was entered; groups: each param group's
    span of the step ("AdamW group 0" -> us); classes: the optimizer classes seen, in order.
    """

    row: PathMeasure
    parts: dict[str, float] = field(default_factory=dict)
    part_calls: dict[str, int] = field(default_factory=dict)
    groups: dict[str, float] = field(default_factory=dict)
    classes: dict[str, None] = field(default_factory=dict)


@dataclass(slots=True)
class CommMeasure:
    """One layer's communication of one kind within one iteration: an FSDP2 unit's ranges'
    calls and wall time (`events/fsdp_names.py` names the kinds), or a tensor-parallel layer's
    collectives, forward or backward (`events/tp_comm.py`), with the bytes they sent."""

    calls: int = 0
    time_us: float = 0.0
    nbytes: int = 0  # tensor parallel: the collectives' inputs (FSDP2's come from its units)
    exposed_us: float = 0.0  # FSDP2: of time_us, the collectives' own calls and waits


@dataclass(slots=True)
class IterationMeasure:
    """All paths of one iteration, plus the whole iteration's profiled CPU time.

    outside_cpu_us: the part of `total_cpu_us` in no profiled layer, forward or backward (the loss,
    the autograd engine's nodes for it, the user's code around the model), when the strategy
    measured it op by op; None when it did not (the session then takes what the layers leave).
    outside_ops: the ops that make up `outside_cpu_us` (key: op_key(name, backward)), their self
    times adding up to it; empty when the strategy measured no ops there.
    optimizer: the optimizer's part of `total_cpu_us`, when an optimizer ran (a training step in a
    with-block). backward: a backward pass ran in the iteration (its nodes were seen).
    """

    paths: dict[str, PathMeasure] = field(default_factory=dict)
    total_cpu_us: float = 0.0
    outside_cpu_us: float | None = None
    outside_ops: dict[str, OpMeasure] = field(default_factory=dict)
    optimizer: OptimizerMeasure | None = None
    backward: bool = False
    memory: IterationMemory | None = None  # with profile_memory, the session strategy's replay
    # FSDP2's communication ranges and tensor-parallel collectives: (layer path, kind) -> their
    # calls, time and bytes in the iteration
    comm: dict[tuple[str, str], CommMeasure] = field(default_factory=dict)

    def optimizer_measure(self) -> OptimizerMeasure:
        """The iteration's optimizer measure, made on first use."""
        if self.optimizer is None:
            self.optimizer = OptimizerMeasure(PathMeasure(OPTIMIZER_KEY))
        return self.optimizer

    def add_comm(
        self, path: str, kind: str, time_us: float, nbytes: int = 0, calls: int = 1
    ) -> None:
        found = self.comm.get((path, kind))
        if found is None:
            found = self.comm[(path, kind)] = CommMeasure()
        found.calls += calls
        found.time_us += time_us
        found.nbytes += nbytes

    def add_exposed(self, path: str, kind: str, exposed_us: float) -> None:
        """The exposed part of a communication range already added (`add_comm`)."""
        self.comm[(path, kind)].exposed_us += exposed_us

    def path(self, path: str) -> PathMeasure:
        measure = self.paths.get(path)
        if measure is None:
            measure = self.paths[path] = PathMeasure(path)
        return measure
