"""What the HTML and PDF reports show of a session's memory section: the step's peak, what was
live then (by category and by allocating layer), the timeline, the bar chart of activations per
layer, the layers' figures, and in a merged torchrun session each rank's peak. Plain, formatted
data (templates only display it); every figure is the layer table's or the session's.
"""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup

from hybridprof.analysis.layer_table import LayerRow, LayerTable, layer_table
from hybridprof.datamodel import DeviceMemory, ProfileSession
from hybridprof.reporting.format import format_bytes
from hybridprof.reporting.page.charts import Bar, Chart, make_chart
from hybridprof.reporting.page.memory_chart import PeakMark, render_timeline
from hybridprof.reporting.text.memory_text import (
    LABELS,
    keepers,
    layer_name,
    peak_line,
    start_text,
    where_text,
)

BAR_LAYERS = 12
TABLE_LAYERS = 30  # the section's table: the layers with the highest peaks (all in CSV/JSON)


@dataclass(frozen=True, slots=True)
class CategoryView:
    name: str
    bytes: str
    share: str


@dataclass(frozen=True, slots=True)
class ShareView:
    phase: str
    layer: str
    bytes: str
    activations: str
    temporaries: str


@dataclass(frozen=True, slots=True)
class LayerMemoryView:
    path: str
    peak: str
    self_alloc: str
    self_freed: str
    net: str
    saved: str
    saved_unique: str
    saved_alloc: str
    saved_params: str
    backward_peak: str
    backward_self_alloc: str
    hidden: bool


@dataclass(frozen=True, slots=True)
class DeviceView:
    device: str
    start: str
    peak: str
    timeline: Markup | None
    categories: tuple[CategoryView, ...]
    shares: tuple[ShareView, ...]
    notes: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class RankPeakView:
    rank: int
    device: str
    peak: str
    reserved: str
    where: str


@dataclass(frozen=True, slots=True)
class MemoryView:
    devices: tuple[DeviceView, ...]  # the model's first
    bars: Chart | None
    layers: tuple[LayerMemoryView, ...]
    layer_note: str
    method: str
    notes: tuple[str, ...]
    ranks: tuple[RankPeakView, ...] = ()


def _device_view(device: DeviceMemory, session: ProfileSession) -> DeviceView:
    peak = device.peak
    parts = peak.categories
    total = parts.total() if parts is not None else 0
    categories = tuple(
        CategoryView(LABELS[name], format_bytes(n), f"{100 * n / total:.1f}%")
        for name, n in (parts.items() if parts is not None else [])
    )
    shares = tuple(
        ShareView(
            "before the step" if s.phase == "start" else s.phase,
            "" if s.phase == "start" else layer_name(s.path, session),
            format_bytes(s.bytes),
            format_bytes(s.categories.activations),
            format_bytes(s.categories.temporaries),
        )
        for s in peak.by_layer
    )
    timeline = None
    if device.timeline is not None:
        label = f"peak {format_bytes(peak.live_bytes)}, {where_text(peak, session)}"
        timeline = render_timeline(device.timeline, PeakMark(peak.time_us, peak.live_bytes, label))
    return DeviceView(
        device=device.device,
        start=start_text(device),
        peak=peak_line(device, session),
        timeline=timeline,
        categories=categories,
        shares=shares,
        notes=device.notes,
    )


def _bars(table: LayerTable) -> Chart | None:
    kept = keepers(table, BAR_LAYERS)
    if not kept:
        return None
    bars = [
        Bar(
            r.name if r.kind == "outside" else r.path or "(root)",
            (float(r.memory.saved_unique), float(r.memory.saved)) if r.memory else (0.0, 0.0),
        )
        for r in kept
    ]
    return make_chart(
        "activations",
        f"Activations kept for backward: the top {len(bars)} layers",
        bars,
        ("kept (each storage once)", "saved by the layer"),
        format_bytes,
    )


def _layer_view(row: LayerRow) -> LayerMemoryView:
    m = row.memory
    assert m is not None
    return LayerMemoryView(
        path=row.name if row.kind == "outside" else row.path or "(root)",
        peak=format_bytes(m.peak),
        self_alloc=format_bytes(m.self_alloc),
        self_freed=format_bytes(m.self_freed),
        net=format_bytes(m.self_net),
        saved=format_bytes(m.saved),
        saved_unique=format_bytes(m.saved_unique),
        saved_alloc=format_bytes(m.saved_alloc),
        saved_params=format_bytes(m.saved_params),
        backward_peak=format_bytes(m.backward_peak),
        backward_self_alloc=format_bytes(m.backward_self_alloc),
        hidden=m.saved_hidden,
    )


def _layers(table: LayerTable) -> tuple[tuple[LayerMemoryView, ...], str]:
    rows = [r for r in table.rows if r.memory is not None]
    if len(rows) <= TABLE_LAYERS:
        return tuple(map(_layer_view, rows)), ""

    def weight(r: LayerRow) -> int:
        m = r.memory
        return max(m.peak, m.backward_peak, m.saved) if m else 0

    kept = {id(r) for r in sorted(rows, key=lambda r: -weight(r))[:TABLE_LAYERS]}
    note = (
        f"The {TABLE_LAYERS} of {len(rows)} layers with the highest peaks or saved bytes; the "
        "CSV and JSON reports have every layer's figures (mem_* columns)."
    )
    return tuple(_layer_view(r) for r in rows if id(r) in kept), note


def memory_view(session: ProfileSession) -> MemoryView | None:
    """None without the memory section."""
    memory = session.memory
    if memory is None or not memory.devices:
        return None
    table = layer_table(session)
    layers, note = _layers(table)
    ranks = tuple(
        RankPeakView(
            r.rank,
            r.device,
            format_bytes(r.peak_live_bytes),
            format_bytes(r.peak_reserved_bytes) if r.peak_reserved_bytes is not None else "",
            f"{r.phase} of {layer_name(r.path, session)}" if r.phase in ("forward", "backward")
            else r.phase,
        )
        for r in memory.rank_peaks
    )  # fmt: skip
    return MemoryView(
        devices=tuple(_device_view(d, session) for d in memory.devices),
        bars=_bars(table),
        layers=layers,
        layer_note=note,
        method=f"Measured from {memory.method}.",
        notes=memory.notes,
        ranks=ranks,
    )


__all__ = ["MemoryView", "memory_view"]
