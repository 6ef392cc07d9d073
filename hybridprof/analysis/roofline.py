"""Why a layer is slow (`run --flops`): its FLOPs and bytes joined with its measured self time,
against the roofs.

Torch-free arithmetic over a session's `flops` (from `run --flops`). For each layer, over one
measured step (the forward, plus the backward in a training step):

- arithmetic intensity = FLOPs / bytes moved;
- achieved GFLOP/s = FLOPs / self time, achieved GB/s = bytes / self time (self device time when
  the run measured a device, else self CPU time);
- the roof at that intensity = min(peak FLOP/s, intensity x peak bytes/s);
- verdict: "overhead-bound" when the layer reaches less than `OVERHEAD_FRACTION` of that roof (far
  below both the compute and the memory roof: small ops, launch or Python overhead); else
  "compute-bound at N% of peak" right of the ridge point (intensity >= peak FLOP/s / peak bytes/s),
  "memory-bound at N% of peak bandwidth" left of it.
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.datamodel import LayerWork, MachinePeak, ModuleRecord, ProfileSession

OVERHEAD_FRACTION = 0.10


@dataclass(frozen=True, slots=True)
class LayerRoofline:
    """One layer's figures for a step; None where a figure has no meaning (no time, no bytes)."""

    path: str
    class_name: str
    flops: int
    bytes: int
    self_us: float | None  # None: the layer was not profiled (work outside every profiled layer)
    intensity: float | None
    gflops: float | None
    gbps: float | None
    pct_peak: float | None  # of peak FLOP/s
    pct_bandwidth: float | None  # of peak bytes/s
    verdict: str  # "" when there is no time to judge
    not_counted: str  # "aten.relu_ x2, aten.add x1": ops with no FLOP formula


def step_work(work: LayerWork) -> tuple[int, int]:
    """Self FLOPs and bytes of one step: forward plus backward (0 without a backward)."""
    return work.flops + work.backward_flops, work.bytes + work.backward_bytes


def step_self_us(record: ModuleRecord, use_device: bool) -> float:
    """A layer's self time in one step: forward plus backward; device time when it was measured."""
    if use_device and record.self_device_us is not None:
        backward = record.backward_self_device_us
        return record.self_device_us.median + (backward.median if backward else 0.0)
    backward = record.backward_self_cpu_us
    return record.self_cpu_us.median + (backward.median if backward else 0.0)


def verdict(flops: int, moved: int, self_us: float, peak: MachinePeak) -> str:
    """The roofline verdict for one layer's step (see the module docstring)."""
    seconds = self_us / 1e6
    if seconds <= 0:
        return ""
    compute = flops / seconds / (peak.gflops * 1e9) if peak.gflops > 0 else 0.0
    memory = moved / seconds / (peak.gbps * 1e9) if peak.gbps > 0 else 0.0
    if max(compute, memory) < OVERHEAD_FRACTION:
        return "overhead-bound"
    ridge = peak.gflops / peak.gbps if peak.gbps > 0 else float("inf")
    if moved > 0 and flops / moved >= ridge:
        return f"compute-bound at {100 * compute:.0f}% of peak"
    return f"memory-bound at {100 * memory:.0f}% of peak bandwidth"


def layer_roofline(
    work: LayerWork, record: ModuleRecord | None, peak: MachinePeak, use_device: bool
) -> LayerRoofline:
    flops, moved = step_work(work)
    self_us = step_self_us(record, use_device) if record is not None else None
    seconds = self_us / 1e6 if self_us else 0.0
    gflops = flops / seconds / 1e9 if seconds > 0 else None
    gbps = moved / seconds / 1e9 if seconds > 0 else None
    return LayerRoofline(
        path=work.path,
        class_name=record.class_name if record is not None else "",
        flops=flops,
        bytes=moved,
        self_us=self_us,
        intensity=flops / moved if moved > 0 else None,
        gflops=gflops,
        gbps=gbps,
        pct_peak=100 * gflops / peak.gflops if gflops is not None and peak.gflops > 0 else None,
        pct_bandwidth=100 * gbps / peak.gbps if gbps is not None and peak.gbps > 0 else None,
        verdict=verdict(flops, moved, self_us, peak) if self_us is not None else "",
        not_counted=", ".join(f"{o.name} x{o.calls}" for o in work.not_counted),
    )


def session_rooflines(session: ProfileSession) -> tuple[LayerRoofline, ...]:
    """Every layer with work counted, in the work's (tree) order; empty without `--flops`."""
    if session.flops is None:
        return ()
    records = {r.path: r for r in session.records}
    return tuple(
        layer_roofline(w, records.get(w.path), session.flops.peak, session.use_device)
        for w in session.flops.layers
    )


def by_path(session: ProfileSession) -> dict[str, LayerRoofline]:
    return {r.path: r for r in session_rooflines(session)}


def unattributed_flops(session: ProfileSession) -> int:
    """FLOPs of the step that ran outside the model (e.g. the loss): in the totals, in no row."""
    work = session.flops
    if work is None:
        return 0
    inside = sum(step_work(w)[0] for w in work.layers)
    return work.forward_flops + work.backward_flops - inside


__all__ = [
    "OVERHEAD_FRACTION",
    "LayerRoofline",
    "by_path",
    "layer_roofline",
    "session_rooflines",
    "step_self_us",
    "step_work",
    "unattributed_flops",
    "verdict",
]
