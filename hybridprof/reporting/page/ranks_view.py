"""The ranks section of a merged session's report: plain data the templates display.

A merged session (from `hybridprof merge` or rank 0 under torchrun) has each rank's step time and
communication, each layer's figures per rank, and the communication rows; this turns them into
formatted rows and a chart of per-rank step time (split into communication and the rest).
"""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.datamodel import (
    CollectiveStat,
    MergedRanks,
    ProfileSession,
    RankLayer,
    RankSummary,
    Stat,
)
from hybridprof.reporting.format import format_bytes, format_calls, format_time_us
from hybridprof.reporting.page.charts import Bar, Chart, make_chart

MAX_LAYER_ROWS = 60  # layers with the largest spread across ranks first


@dataclass(frozen=True, slots=True)
class RankRowView:
    rank: int
    host: str
    device: str
    backend: str
    ddp: bool
    iterations: int
    step: str
    comm: str
    share: str
    waiting: str


@dataclass(frozen=True, slots=True)
class LayerSpreadView:
    path: str
    median: str
    min: str
    max: str
    slowest_rank: int
    spread: str
    per_rank: tuple[str, ...]
    straggler: bool


@dataclass(frozen=True, slots=True)
class CommView:
    name: str
    kind: str
    where: str  # the layer that called it, or the layers whose gradients the bucket carried
    calls: str
    time: str  # median across ranks
    time_range: str  # min-max across ranks
    waiting: str
    size: str


@dataclass(frozen=True, slots=True)
class RanksView:
    world_size: int
    ranks: tuple[RankRowView, ...]
    layers: tuple[LayerSpreadView, ...]
    layer_note: str
    comm: tuple[CommView, ...]
    chart: Chart


def ranks_view(session: ProfileSession) -> RanksView | None:
    """The ranks section, or None for a session that is not merged."""
    merged = session.ranks
    if merged is None:
        return None
    layers = sorted(merged.layers, key=lambda layer: -layer.spread_us)
    shown = layers[:MAX_LAYER_ROWS]
    note = (
        f"The {len(shown)} layers with the largest spread of {len(layers)}."
        if len(shown) < len(layers)
        else ""
    )
    return RanksView(
        world_size=merged.world_size,
        ranks=tuple(_rank_row(r) for r in merged.ranks),
        layers=tuple(_layer_view(layer, merged) for layer in shown),
        layer_note=note,
        comm=tuple(map(_comm_view, session.collectives)),
        chart=step_chart(merged),
    )


def step_chart(merged: MergedRanks) -> Chart:
    """Per rank: the step's median time, as communication in flight and the rest."""
    bars = [
        Bar(
            f"rank {r.info.rank}",
            (max(r.step_us.median - r.comm_us.median, 0.0), r.comm_us.median),
        )
        for r in merged.ranks
    ]
    return make_chart(
        "rank_steps",
        "Step time per rank (median)",
        bars,
        ("computing", "communication in flight"),
    )


def _rank_row(r: RankSummary) -> RankRowView:
    return RankRowView(
        rank=r.info.rank,
        host=r.info.host,
        device=r.info.device,
        backend=r.info.backend,
        ddp=r.info.ddp,
        iterations=r.iterations,
        step=_stat_range(r.step_us),
        comm=format_time_us(r.comm_us.median),
        share=f"{r.comm_share:.0%}",
        waiting=format_time_us(r.waiting_us),
    )


def _stat_range(stat: Stat) -> str:
    return f"{format_time_us(stat.median)} ({format_time_us(stat.min)}–{format_time_us(stat.max)})"


def _layer_view(layer: RankLayer, merged: MergedRanks) -> LayerSpreadView:
    across = Stat.of(list(layer.rank_us))
    flagged = {(s.path, s.rank) for s in merged.stragglers}
    return LayerSpreadView(
        path=layer.path or "(root)",
        median=format_time_us(across.median),
        min=format_time_us(across.min),
        max=format_time_us(across.max),
        slowest_rank=layer.slowest_rank,
        spread=format_time_us(layer.spread_us),
        per_rank=tuple(format_time_us(us) for us in layer.rank_us),
        straggler=(layer.path, layer.slowest_rank) in flagged,
    )


def _comm_view(c: CollectiveStat) -> CommView:
    if c.layer is not None:
        where = f"called in {c.layer or '(root)'}"
    else:
        where = "gradients of " + ", ".join(c.carries) if c.carries else ""
    return CommView(
        name=c.name,
        kind="DDP gradient bucket (backward)" if c.kind == "ddp_bucket" else "model collective",
        where=where,
        calls=format_calls(c.calls),
        time=format_time_us(c.time_us.median),
        time_range=f"{format_time_us(c.time_us.min)}–{format_time_us(c.time_us.max)}",
        waiting=format_time_us(c.waiting_us.median) if c.waiting_us else "-",
        size=format_bytes(c.nbytes) if c.nbytes else "-",
    )


__all__ = ["RanksView", "ranks_view", "step_chart"]
