"""A session as the history keeps it: per layer the figures a trend needs, nothing per iteration.

The figures are the layer table's (`hybridprof.analysis.layer_table`), worked out as it works
them out, so a history's point is the report's row before compensation: the followed figure is
the layer's self time per iteration (its device time when the session measured one, else its CPU
time) with the median's 95% interval, then its total time, its share of the iteration, its
forward FLOPs (`--flops`) and its peak memory (`--profile-memory`) where measured. Self time, not
total: a parent's total moves whenever a child's does, and the change would be blamed on every
ancestor. Only profiled layers are kept (containers and unprofiled parents have no time of
their own). The figures are the raw ones, the profiler's cost still in, in every session alike.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Literal

from hybridprof.analysis.layer_table import CI_VALUES, rows_sum_us
from hybridprof.analysis.stats import median_ci
from hybridprof.analysis.tree import measured_total_us, sums_over_subtrees
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.files.storage import read_text, session_of_text
from hybridprof.history.fingerprint import Machine, machine_of
from hybridprof.history.session_figures import (
    LayerMeasures,
    SessionFigures,
    figures_of,
    read_figures,
)

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
    return _model_name(session.model_file or session.plan.model_file, session.plan.root_class)


def _model_name(file: str | None, root: str) -> str:
    return f"{PurePath(file).name}:{root}" if file else root


def snapshot_of(
    session: ProfileSession, machine_label: str = "", model: str | None = None
) -> Snapshot:
    """The session's figures for the history."""
    with gc_paused():  # a 1,000-layer session's columns are thousands of objects, none in a cycle
        return snapshot_from(figures_of(session), machine_label, model)


def read_snapshot(path: Path, machine_label: str = "", model: str | None = None) -> Snapshot:
    """The snapshot of a saved session file: its figures read straight from the JSON where the
    file is in the current form (`read_figures`), else through the full reader, which reads
    older files and names what is wrong with a bad one."""
    text = read_text(path, "session")
    figures = read_figures(text)
    if figures is None:
        figures = figures_of(session_of_text(path, text, ops=False))
    with gc_paused():
        return snapshot_from(figures, machine_label, model)


def snapshot_from(
    figures: SessionFigures, machine_label: str = "", model: str | None = None
) -> Snapshot:
    """The snapshot of a session's figures: per layer the figures its layer-table row shows
    (`analysis.layer_table`), worked out as the table works them out, without the table."""
    layers = figures.layers
    timing: Timing = "device" if figures.use_device else "cpu"
    own_us = [  # forward plus backward self time, as `analysis.tree.step_self_us`
        own + (back if back is not None else 0.0)
        for own, back in zip(layers.self_cpu, layers.backward_self_cpu, strict=True)
    ]
    if figures.outside_us is None:
        totals = list(zip(layers.paths, layers.total_cpu, strict=True))
        headline = measured_total_us(figures.iteration_cpu_us, totals)
    else:
        headline = rows_sum_us(own_us, figures.outside_us, figures.optimizer_own_us)
    shares = [100.0 * own / headline for own in own_us] if headline > 0 else [None] * len(own_us)
    return Snapshot(
        digest=_digest(figures),
        model=model or _model_name(figures.model_file or figures.plan_model_file, figures.root),
        model_hash=figures.model_hash,
        machine=machine_of(figures.environment, machine_label),
        started_at=figures.started_at,
        iterations=figures.iterations,
        iteration_us=headline if headline > 0 else None,
        timing=timing,
        stability=figures.stability,
        layers=_layer_figures(figures, timing, shares),
    )


def _layer_figures(
    figures: SessionFigures, timing: Timing, shares: list[float] | list[None]
) -> tuple[LayerFigures, ...]:
    layers, flops, peaks = figures.layers, figures.flops, figures.memory_peaks
    values, lows, highs = _followed(layers, timing)
    columns = (layers.paths, layers.class_names, values, lows, highs, _totals(figures), shares)
    return tuple(
        LayerFigures(path, name, value, low, high, total, share, flops.get(path), peaks.get(path))
        for path, name, value, low, high, total, share in zip(*columns, strict=True)
    )


def _followed(
    layers: LayerMeasures, timing: Timing
) -> tuple[list[float], list[float | None], list[float | None]]:
    """Each layer's followed figure and its median's 95% interval: its device self time where
    the session measured one (no interval), else its CPU self time with the interval of its
    per-iteration series (when long enough)."""
    count = len(layers.paths)
    if timing == "device":
        return [d or 0.0 for d in layers.self_device], [None] * count, [None] * count
    intervals = [
        median_ci(s) if s is not None and len(s) >= CI_VALUES else None for s in layers.self_series
    ]
    lows = [i.low if i is not None else None for i in intervals]
    highs = [i.high if i is not None else None for i in intervals]
    return list(layers.self_cpu), lows, highs


def _totals(figures: SessionFigures) -> list[float]:
    """Each layer's forward total as its table row shows it: with the outside time measured its
    subtree's self times summed (a leaf's: its self time), else as measured."""
    layers = figures.layers
    if figures.outside_us is None:
        columns = (layers.self_cpu, layers.total_cpu, layers.total_is_self)
        return [own if same else total for own, total, same in zip(*columns, strict=True)]
    forward = sums_over_subtrees(layers.paths, layers.self_cpu)
    rows = sums_over_subtrees(layers.paths, [1.0] * len(layers.paths))
    return [
        own if rows.get(path, 0.0) <= 1.0 else forward[path]
        for path, own in zip(layers.paths, layers.self_cpu, strict=True)
    ]


def digest_of(session: ProfileSession) -> str:
    """The sha256 of what makes a run that run (see `_digest`)."""
    return _digest(figures_of(session))


def _digest(figures: SessionFigures) -> str:
    """The sha256 of what makes a run that run: when it started, its command, model, machine and
    every measured iteration and layer median. Two runs never share all of them, and hashing
    them is far cheaper than writing the whole session's JSON again (benchmarks/README.md)."""
    env, layers = figures.environment, figures.layers
    identity = [
        figures.started_at,
        list(figures.command),
        figures.model_file,
        figures.model_hash,
        [env.hybridprof_version, env.torch_version, env.cpu, env.device, env.threads],
        list(figures.iteration_cpu_us),
        list(zip(layers.paths, layers.calls, layers.self_cpu, layers.total_cpu, strict=True)),
    ]
    text = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


__all__ = [
    "LayerFigures",
    "Snapshot",
    "Timing",
    "digest_of",
    "model_name",
    "read_snapshot",
    "snapshot_from",
    "snapshot_of",
]
