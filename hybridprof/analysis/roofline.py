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
  "memory-bound at N% of peak bandwidth" left of it;
- "not counted" instead of "overhead-bound" when no FLOP of the layer was counted and it ran ops
  without a formula (a ReLU, an add): 0 FLOP is then what was not counted;
- no verdict above a roof: a layer that did more FLOP/s than the peak, or moved more bytes/s than
  the peak bandwidth, did the impossible by these numbers, so one of them is wrong. It reads
  "inconsistent: N% of peak FLOP/s" (or bandwidth), and `inconsistencies` says which number is the
  likely culprit: the peak, when most layers doing real arithmetic beat it (it was measured low,
  e.g. on a busy machine); the time, when the layer's own time is too short or too noisy to trust;
  the count, when it is far over (FLOPs from a formula that overcounts) or over the bandwidth
  (bytes served from cache rather than memory, which the measured bandwidth is of); a layer a
  little over the peak FLOP/s is said as such (the peak or the time, no one number stands out).
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.analysis.stats import median_ci
from hybridprof.datamodel import LayerWork, MachinePeak, ModuleRecord, ProfileSession

OVERHEAD_FRACTION = 0.10
INCONSISTENT = "inconsistent"
NOT_COUNTED = "not counted"  # no FLOP counted, and ops without a formula ran
SHORT_TIME_US = 20.0  # a layer's own time this short is a few timer ticks and calls' overhead
NOISY_PCT = 50.0  # ... or this wide a 95% interval around its median
FAR_OVER_PCT = 150.0  # this far over the peak FLOP/s, a count is wrong, not a margin


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
    if compute > 1 or memory > 1:
        over, roof = (compute, "peak FLOP/s") if compute >= memory else (memory, "peak bandwidth")
        return f"{INCONSISTENT}: {100 * over:.0f}% of {roof}"
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
        verdict=_counted_verdict(work, flops, moved, self_us, peak),
        not_counted=", ".join(f"{o.name} x{o.calls}" for o in work.not_counted),
    )


def _counted_verdict(
    work: LayerWork, flops: int, moved: int, self_us: float | None, peak: MachinePeak
) -> str:
    """The verdict, or "not counted" for an "overhead-bound" layer whose FLOPs no formula
    counted (its ops had none): 0 FLOP is then what was not counted, not what it did."""
    found = verdict(flops, moved, self_us, peak) if self_us is not None else ""
    return NOT_COUNTED if found == "overhead-bound" and flops == 0 and work.not_counted else found


def session_rooflines(session: ProfileSession) -> tuple[LayerRoofline, ...]:
    """Every layer with work counted, in the work's (tree) order; empty without `--flops`."""
    if session.flops is None:
        return ()
    records = {r.path: r for r in session.records}
    return tuple(
        layer_roofline(w, records.get(w.path), session.flops.peak, session.use_device)
        for w in session.flops.layers
    )


def is_inconsistent(line: LayerRoofline) -> bool:
    return line.verdict.startswith(INCONSISTENT)


@dataclass(frozen=True, slots=True)
class Inconsistency:
    """Layers whose figures beat a roof, and the number most likely wrong: "peak", "time",
    "count" (FLOPs or bytes) or "margin" (a little over: any of them), with the sentence that says
    so and what to do."""

    suspect: str
    paths: tuple[str, ...]
    worst_pct: float
    roof: str  # "peak FLOP/s" or "peak bandwidth"
    text: str


def inconsistencies(session: ProfileSession) -> tuple[Inconsistency, ...]:
    """What the inconsistent verdicts of a --flops session mean, grouped by the likely culprit."""
    work = session.flops
    if work is None:
        return ()
    lines = session_rooflines(session)
    over = [x for x in lines if is_inconsistent(x)]
    if not over:
        return ()
    records = {r.path: r for r in session.records}
    groups: dict[tuple[str, str], list[LayerRoofline]] = {}
    peak_low = _peak_beaten_by_most(lines, work.peak)
    for line in over:
        roof = (
            "peak FLOP/s" if (line.pct_peak or 0) >= (line.pct_bandwidth or 0) else "peak bandwidth"
        )
        suspect = _suspect(line, records.get(line.path), roof, peak_low)
        groups.setdefault((suspect, roof), []).append(line)
    return tuple(_explained(s, roof, found, work.peak) for (s, roof), found in groups.items())


def _peak_beaten_by_most(lines: tuple[LayerRoofline, ...], peak: MachinePeak) -> bool:
    """Most layers doing real arithmetic (right of the ridge point, timed) beat peak FLOP/s, two
    at least (one layer alone says more about its own numbers than about the peak)."""
    ridge = peak.gflops / peak.gbps if peak.gbps > 0 else float("inf")
    heavy = [x for x in lines if x.self_us and x.flops and (x.intensity or 0) >= ridge]
    beaten = [x for x in heavy if (x.pct_peak or 0) > 100]
    return len(beaten) >= 2 and 2 * len(beaten) >= len(heavy)


def _suspect(line: LayerRoofline, record: ModuleRecord | None, roof: str, peak_low: bool) -> str:
    if roof == "peak FLOP/s" and peak_low:
        return "peak"
    if (line.self_us or 0) < SHORT_TIME_US or _noisy(record):
        return "time"
    if roof == "peak FLOP/s" and (line.pct_peak or 0) < FAR_OVER_PCT:
        return "margin"  # a little over: no one number stands out
    return "count"


def _noisy(record: ModuleRecord | None) -> bool:
    series = record.per_iteration.self_cpu_us if record and record.per_iteration else None
    interval = median_ci(series.values) if series is not None else None
    return interval is not None and interval.half_width_pct() > NOISY_PCT


def _explained(
    suspect: str, roof: str, lines: list[LayerRoofline], peak: MachinePeak
) -> Inconsistency:
    worst = max(lines, key=lambda x: max(x.pct_peak or 0, x.pct_bandwidth or 0))
    pct = max(worst.pct_peak or 0, worst.pct_bandwidth or 0)
    names = ", ".join(x.path or "(root)" for x in lines[:4]) + (
        f" and {len(lines) - 4} more" if len(lines) > 4 else ""
    )
    head = f"{len(lines)} layer(s) above the {roof} (up to {pct:.0f}%: {names})"
    if suspect == "peak":
        why = (
            f"the peak ({peak.gflops:.4g} GFLOP/s, {peak.source}) is the number likely wrong: "
            "most layers beat it, so it was measured low (a busy machine?); measure it again "
            "(delete ~/.cache/hybridprof/peak.json, or the one under $XDG_CACHE_HOME) or give "
            "--peak-gflops"
        )
    elif suspect == "time":
        why = (
            "their own times are likely wrong: too short or too noisy to trust "
            "(more iterations, --threads 1, a quieter machine)"
        )
    elif suspect == "margin":
        why = (
            "a little over it, which no one number explains: the peak may have been measured "
            "low or the time caught short (give --peak-gflops, or run again with more iterations)"
        )
    elif roof == "peak bandwidth":
        why = (
            "the bytes counted are likely wrong: they are what the ops read and write, and small "
            "tensors stay in cache, which is faster than the memory the peak bandwidth is of"
        )
    else:
        why = "their FLOP counts are likely too high (an op's formula overcounts)"
    return Inconsistency(suspect, tuple(x.path for x in lines), pct, roof, f"{head}: {why}")


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
    "INCONSISTENT",
    "NOT_COUNTED",
    "OVERHEAD_FRACTION",
    "Inconsistency",
    "LayerRoofline",
    "by_path",
    "inconsistencies",
    "is_inconsistent",
    "layer_roofline",
    "session_rooflines",
    "step_self_us",
    "step_work",
    "unattributed_flops",
    "verdict",
]
