"""A session as the history keeps it: per layer the figures a trend needs, nothing per iteration.

The figures come from the layer table (`hybridprof.analysis.layer_table`), the numbers every
report shows, so a history's point is the report's row: the followed figure is the layer's self
time per iteration (its device time when the session measured one, else its CPU time) with the
median's 95% interval, then its total time, its share of the iteration, its forward FLOPs
(`--flops`) and its peak memory (`--profile-memory`) where measured. Self time, not total: a
parent's total moves whenever a child's does, and the change would be blamed on every ancestor.
Only profiled layers are kept (containers and unprofiled parents have no time of their own).
The figures are the raw ones, the profiler's cost still in, in every session alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Literal

from hybridprof.analysis.layer_table import LayerRow, profiled_layers
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.history.fingerprint import Machine, machine_of

Timing = Literal["cpu", "device"]


@dataclass(frozen=True, slots=True)
class LayerFigures:
    """One layer of one session (times in us per iteration)."""

    path: str
    class_name: str
    self_us: float  # the followed figure: device self time where measured, else CPU self time
    self_low: float | None = None  # its median's 95% interval, when the session has enough
    self_high: float | None = None  # iterations (and the figure is the CPU's)
    total_us: float | None = None
    share_pct: float | None = None  # its own time in % of the iteration
    flops: int | None = None  # forward FLOPs of its own ops (--flops)
    mem_bytes: int | None = None  # its forward peak memory on the model's device


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What one session adds to the history."""

    digest: str  # sha256 of the session's identity: the same session is never added twice
    model: str  # the series' model: "net.py:Net" (file name and root class), or as named
    model_hash: str | None
    machine: Machine
    started_at: str
    iterations: int
    iteration_us: float | None  # the median iteration's profiled time
    timing: Timing
    stability: str  # "stable", "noisy" or "unknown"
    layers: tuple[LayerFigures, ...]


def model_name(session: ProfileSession) -> str:
    """The model a session measured, as a series names it: the file's name (not its folder: a
    file read at a git revision is a temporary copy) and the root class."""
    root = session.plan.root_class
    file = session.model_file or session.plan.model_file
    return f"{PurePath(file).name}:{root}" if file else root


def snapshot_of(
    session: ProfileSession, machine_label: str = "", model: str | None = None
) -> Snapshot:
    """The session's figures for the history."""
    timing: Timing = "device" if session.use_device else "cpu"
    # The raw figures, as measured: a history holds sessions from before calibrations were
    # recorded beside later ones, and its points must be alike (a compensated point after raw
    # ones would read as a speed-up); the history reads no op lists either, which the
    # compensation counts (docs/trust.md).
    session = replace(session, calibration=None)
    with gc_paused():  # a 1,000-layer table is thousands of objects, none in a cycle
        table = profiled_layers(session)  # the table's layer rows, without the rest of it
        layers = tuple(_figures(row, timing) for row in table.rows)
    stability = session.stability.verdict if session.stability is not None else "unknown"
    return Snapshot(
        digest=digest_of(session),
        model=model or model_name(session),
        model_hash=session.model_hash,
        machine=machine_of(session.environment, machine_label),
        started_at=session.started_at,
        iterations=session.iterations,
        iteration_us=table.iteration_us if table.iteration_us > 0 else None,
        timing=timing,
        stability=stability,
        layers=tuple(layer for layer in layers if layer is not None),
    )


def digest_of(session: ProfileSession) -> str:
    """The sha256 of what makes a run that run: when it started, its command, model, machine and
    every measured iteration and layer median. Two runs never share all of them, and hashing
    them is far cheaper than writing the whole session's JSON again (benchmarks/README.md)."""
    env = session.environment
    identity = [
        session.started_at,
        list(session.command),
        session.model_file,
        session.model_hash,
        [env.hybridprof_version, env.torch_version, env.cpu, env.device, env.threads],
        list(session.iteration_cpu_us),
        [(r.path, r.calls, r.self_cpu_us.median, r.total_cpu_us.median) for r in session.records],
    ]
    text = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _figures(row: LayerRow, timing: Timing) -> LayerFigures | None:
    """A profiled layer's figures (None when it has no CPU time: it never ran)."""
    low = high = None
    if timing == "device":
        value = row.self_device_us or 0.0  # no device time: no device work of its own
    elif row.self_cpu is not None:
        value = row.self_cpu.median
        if row.self_cpu.interval is not None:
            low, high = row.self_cpu.interval.low, row.self_cpu.interval.high
    else:
        return None
    return LayerFigures(
        path=row.path,
        class_name=row.class_name,
        self_us=value,
        self_low=low,
        self_high=high,
        total_us=row.total_cpu.median if row.total_cpu is not None else None,
        share_pct=row.pct_self,
        flops=row.work.flops if row.work is not None else None,
        mem_bytes=row.memory.peak if row.memory is not None else None,
    )


__all__ = ["LayerFigures", "Snapshot", "Timing", "digest_of", "model_name", "snapshot_of"]
