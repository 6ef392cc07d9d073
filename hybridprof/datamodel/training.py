"""What a profiled training loop adds to a session: the optimizer's row and the steps' schedule.

Both are optional parts of `ProfileSession` (schema 5): a forward-only run, and every file written
before, has neither. The optimizer is a record of its own, not a `ModuleRecord` with a made-up
path: it is no module (a diff or a merge matches records by module path), and its parts are no
children of the model's root. Times in us per measured iteration, as everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.datamodel.measures import OpStat, Series, Stat

# The parts of an optimizer step, in the order the tables list them (a param group's part is
# named "<Class> group <i>" and has `within="step"`).
OPTIMIZER_PARTS = ("step", "clip_grad", "grad_scaler", "zero_grad")


@dataclass(frozen=True, slots=True)
class OptimizerPart:
    """One part of the optimizer's time: `step` (torch's `Optimizer.step`), `clip_grad`
    (`torch.nn.utils.clip_grad_norm_` and `clip_grad_value_`), `grad_scaler` (GradScaler's
    `unscale_`, `step` and `update`, less the optimizer step inside), `zero_grad` (the
    optimizer's and `nn.Module.zero_grad`), or one param group's share of `step` (`within` is
    then "step"). `calls` is the total over the measured iterations of `step` and `zero_grad`
    (0 for the others: clipping and GradScaler are timed around the private functions each call
    goes through, several a call, and a param group is a span of its step, not a call)."""

    name: str
    cpu_us: Stat
    calls: int = 0
    within: str = ""  # the part this one is a share of ("" for a part of the optimizer)
    per_iteration: Series | None = None


@dataclass(frozen=True, slots=True)
class OptimizerRecord:
    """The `(optimizer)` row: every op that ran in a `torch.optim.Optimizer` step or zero_grad,
    in gradient clipping or in a GradScaler call, attributed to it rather than to a layer or to
    `(outside modules)`. `calls` counts the optimizer steps over all measured iterations;
    `self_cpu_us` is all of its time (its parts add up to it); `classes` the optimizers seen."""

    classes: tuple[str, ...]
    calls: int
    self_cpu_us: Stat
    self_device_us: Stat | None = None
    parts: tuple[OptimizerPart, ...] = ()
    ops: tuple[OpStat, ...] = ()
    per_iteration: Series | None = None

    def series_lengths(self) -> set[int]:
        """How many values each of its per-iteration series holds."""
        series = [self.per_iteration, *(p.per_iteration for p in self.parts)]
        return {len(s.values) for s in series if s is not None}


@dataclass(frozen=True, slots=True)
class ScheduleInfo:
    """The schedule the steps of a with-block ran under (`hybridprof.schedule`): torch.profiler's
    meaning of each number (`repeat` 0: every cycle until the block ends)."""

    wait: int
    warmup: int
    active: int
    repeat: int
    skip_first: int = 0
    skip_first_wait: int = 0


__all__ = ["OPTIMIZER_PARTS", "OptimizerPart", "OptimizerRecord", "ScheduleInfo"]
