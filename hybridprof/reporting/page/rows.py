"""A layer table row as the HTML and PDF pages show it: formatted text beside the raw numbers it
sorts by. Formatting only: every figure is the layer table's (`analysis.layer_table`)."""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.analysis.layer_table import LayerRow, Timing
from hybridprof.datamodel import OpStat
from hybridprof.reporting.format import format_bytes, format_calls, format_time_us
from hybridprof.reporting.page.memory_view import memory_cells
from hybridprof.reporting.page.roofline_view import cells
from hybridprof.reporting.trust import timing_text


@dataclass(frozen=True, slots=True)
class OpView:
    name: str
    calls: int
    self_cpu: str
    total_cpu: str
    self_device: str
    memory: str
    backward: bool


@dataclass(frozen=True, slots=True)
class RowView:
    """One line of the tree table; raw numbers (for sorting) next to their formatted text."""

    path: str
    name: str
    depth: int
    parent: str | None
    class_name: str
    profiled: bool
    has_children: bool
    calls: float  # per iteration (as the times are)
    calls_text: str
    self_us: float
    total_us: float
    pct: float  # subtree (inclusive) share of the iteration, forward plus backward
    heat: int  # 0..5: self time relative to the heaviest row, for shading
    self_cpu: str
    total_cpu: str
    self_device: str
    total_device: str
    backward: str
    backward_total: str
    pct_text: str
    self_pct: float  # own share of the iteration: the rows' self shares add up to ~100%
    self_pct_text: str
    memory: str
    memory_bytes: int
    spread: str
    params: int
    output_shape: str
    source: str
    op_count: int
    flops: str = ""  # with --flops: the layer's FLOPs per step, achieved GFLOP/s, verdict
    gflops: str = ""
    verdict: str = ""
    derived: bool = False  # a container that never runs: its children's totals only
    outside: bool = False  # the row of time in no profiled module
    collapsed: bool = False  # the HTML tree opens with this row's children hidden
    self_device_us: float = 0.0  # raw numbers the HTML table sorts these columns by
    total_device_us: float = 0.0
    backward_us: float = 0.0
    backward_total_us: float = 0.0
    mem_peak: str = ""  # --profile-memory: forward peak, saved for backward, backward peak
    mem_peak_bytes: int = 0
    mem_saved: str = ""
    mem_saved_bytes: int = 0
    mem_backward_peak: str = ""
    mem_backward_peak_bytes: int = 0


def _dash(us: float | None) -> str:
    """A time a row has, or "-" where its quantity was not measured for it."""
    return "-" if us is None else format_time_us(us)


def _percent(pct: float | None) -> str:
    return "-" if pct is None else f"{pct:.1f}%"


def _heat(self_us: float, peak: float) -> int:
    return 0 if peak <= 0 else min(5, int(6 * self_us / peak))


def row_view(row: LayerRow, peak: float) -> RowView:
    """A layer table row as the page shows it (formatting only: every figure is the table's)."""
    own = row.kind in ("layer", "optimizer_part")  # has calls and self figures of its own
    # a layer, a container with its children's totals, or the optimizer's rows
    measured = row.record is not None or row.kind in ("optimizer", "optimizer_part")
    self_us = row.self_cpu.median if row.self_cpu else 0.0
    work = row.roofline
    flops, gflops, verdict = (
        cells(work) if work is not None and (measured or work.flops or work.bytes) else ("", "", "")
    )
    return RowView(
        path=row.path,
        name=row.name,
        depth=row.depth,
        parent=row.parent,
        class_name=row.class_name,
        profiled=measured,
        has_children=row.has_children,
        calls=row.calls_per_iteration or 0.0,
        calls_text=_calls_text(row) if own else "",
        self_us=self_us,
        total_us=row.total_cpu.median if row.total_cpu else 0.0,
        pct=row.pct_total or 0.0,
        heat=_heat(self_us, peak),
        self_cpu=timing_text(row.self_cpu),
        total_cpu=timing_text(row.total_cpu),
        self_device=_dash(row.self_device_us) if own else "",
        total_device=_dash(row.total_device_us) if measured else "",
        backward=_dash(row.backward_self_cpu_us) if own else "",
        backward_total=_dash(row.backward_total_cpu_us) if measured else "",
        pct_text=_percent(row.pct_total) if measured else "",
        self_pct=row.pct_self or 0.0,
        self_pct_text=_percent(row.pct_self) if own else "",
        memory=format_bytes(row.self_cpu_mem or 0) if own else "",
        memory_bytes=row.self_cpu_mem or 0,
        spread=_spread(row.self_cpu) if own and row.self_cpu else "",
        params=row.param_count,
        output_shape=", ".join(row.output_shapes),
        source=row.source.short() if row.source else "",
        op_count=row.op_count,
        flops=flops,
        gflops=gflops,
        verdict=verdict,
        derived=row.kind in ("container", "optimizer"),
        self_device_us=row.self_device_us or 0.0,
        total_device_us=row.total_device_us or 0.0,
        backward_us=row.backward_self_cpu_us or 0.0,
        backward_total_us=row.backward_total_cpu_us or 0.0,
        **memory_cells(row),
    )


def _calls_text(row: LayerRow) -> str:
    calls = row.calls_per_iteration
    return "" if calls is None else format_calls(calls)


def _spread(timing: Timing) -> str:
    return f"{format_time_us(timing.min)}–{format_time_us(timing.max)}"


def outside_view(row: LayerRow, peak: float) -> RowView:
    """The `(outside modules)` row: one amount, forward and backward together."""
    assert row.self_cpu is not None
    stat = row.self_cpu
    text = format_time_us(stat.median)
    return RowView(
        path=row.path, name=row.name, depth=0, parent=None, class_name="", profiled=True,
        has_children=False, calls=0.0, calls_text="", self_us=stat.median, total_us=stat.median,
        pct=row.pct_total or 0.0, heat=_heat(stat.median, peak), self_cpu=text, total_cpu=text,
        self_device="", total_device="", backward="", backward_total="",
        pct_text=_percent(row.pct_total), self_pct=row.pct_self or 0.0,
        self_pct_text=_percent(row.pct_self), memory="", memory_bytes=0, spread=_spread(stat),
        params=0, output_shape="", source="", op_count=0, outside=True,
    )  # fmt: skip


def op_view(o: OpStat) -> OpView:
    return OpView(
        name=o.name,
        calls=o.calls,
        self_cpu=format_time_us(o.self_cpu_us),
        total_cpu=format_time_us(o.total_cpu_us),
        self_device=format_time_us(o.self_device_us),
        memory=format_bytes(o.self_cpu_mem),
        backward=o.backward,
    )


__all__ = ["OpView", "RowView", "op_view", "outside_view", "row_view"]
