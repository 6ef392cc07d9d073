"""What `--flops` adds: FLOPs and bytes per layer for one step, and the machine's peak."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class OpCount:
    """An op name and how often it ran in one pass (forward, or forward and backward)."""

    name: str
    calls: int


@dataclass(frozen=True, slots=True)
class LayerWork:
    """FLOPs and bytes moved by one module path in one step, counted in the extra (unmeasured) pass.

    `flops`/`bytes` are self (ops in this layer not inside a profiled layer below it, like self
    time); `total_*` its whole subtree. A module that is not profiled gets a row only for work done
    outside every profiled layer (e.g. a parent's inline attention), so the self figures of all
    rows add up to the model's. `not_counted` names ops with no FLOP formula (their FLOPs, if any,
    are not in `flops`), both passes together.
    """

    path: str
    flops: int = 0
    bytes: int = 0
    total_flops: int = 0
    total_bytes: int = 0
    backward_flops: int = 0
    backward_bytes: int = 0
    backward_total_flops: int = 0
    backward_total_bytes: int = 0
    not_counted: tuple[OpCount, ...] = ()


@dataclass(frozen=True, slots=True)
class MachinePeak:
    """The machine's peak FLOP/s and bytes/s on the run's device, threads and dtype."""

    gflops: float
    gbps: float
    source: str  # "measured", "cached (measured <date>)", "given", or a mix per figure
    how: str  # what was measured, e.g. "1024x1024 float32 matmul, 64 MiB copy, cpu, 1 thread"


@dataclass(frozen=True, slots=True)
class WorkProfile:
    """`run --flops`: per-layer FLOPs and bytes, the whole step's totals, and the machine's peak."""

    layers: tuple[LayerWork, ...]
    peak: MachinePeak
    forward_flops: int  # the whole forward, inside the model or not (FlopCounterMode's total)
    forward_bytes: int
    backward_flops: int = 0
    backward_bytes: int = 0
    method: str = ""  # how ops were attributed to layers, said in the reports
    pass_s: float = 0.0  # wall time of the counting pass

    def layer(self, path: str) -> LayerWork | None:
        return next((w for w in self.layers if w.path == path), None)
