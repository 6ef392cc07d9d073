"""How the layer table's figures are read, shown and written: the pieces the column registry
(`reporting.layer_columns`) is declared from. Each reads a `LayerRow` (None: the row has no such
figure), says when a session has a column, or makes a DataFrame field. Torch-free; pandas-free.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from hybridprof.analysis.layer_table import LayerRow, LayerTable, RowKind, Timing
from hybridprof.analysis.roofline import LayerRoofline
from hybridprof.datamodel import LayerMemory, LayerWork
from hybridprof.datamodel.memory import LAYER_BYTES
from hybridprof.reporting.format import format_bytes, format_time_us

FrameType = Literal["float64", "int64", "str", "bool"]

OWN: frozenset[RowKind] = frozenset({"layer", "optimizer_part"})  # calls and self figures
TOTALS: frozenset[RowKind] = frozenset({"layer", "container", "optimizer", "optimizer_part"})
SHARED: frozenset[RowKind] = frozenset({*OWN, "outside"})  # own time: a share of the iteration


@dataclass(frozen=True, slots=True)
class FrameField:
    """One DataFrame (CSV, JSON) column: its name, type and value for a row; None writes the
    type's blank (NaN, 0, "" or False), or 0 in a container's row where `container_zero` says
    the session measured the quantity (a container's own figure: its time is its children's)."""

    name: str
    type: FrameType
    value: Callable[[LayerRow], Any]
    container_zero: Callable[[LayerTable], bool] | None = None


# How figures read: torchprof's units; an empty cell where a row has none.
def time_text(us: float | None) -> str:
    return "" if us is None else format_time_us(us)


def bytes_text(n: int | None) -> str:
    return "" if n is None else format_bytes(n)


def percent_text(pct: float) -> str:
    return f"{pct:.1f}%"


def spread_text(timing: Timing) -> str:
    return f"{format_time_us(timing.min)}–{format_time_us(timing.max)}"


def median_of(timing: Timing | None) -> float | None:
    return None if timing is None else timing.median


# When a session has a column.
def has_backward(table: LayerTable) -> bool:
    return table.has_backward


def has_device(table: LayerTable) -> bool:
    return table.has_device


def has_memory(table: LayerTable) -> bool:
    return table.has_memory


def has_device_memory(table: LayerTable) -> bool:
    return table.has_memory and table.has_device


def has_flops(table: LayerTable) -> bool:
    return table.has_flops


def has_memory_section(table: LayerTable) -> bool:
    return table.memory is not None


def has_memory_section_backward(table: LayerTable) -> bool:
    return table.memory is not None and table.has_backward


def has_compiled(table: LayerTable) -> bool:
    return table.has_compiled


# Titles that depend on the session.
def calls_title(table: LayerTable) -> str:
    return "Calls" if table.calls_title == "Number of Calls" else "Calls/iter"


def torchprof_calls_title(table: LayerTable) -> str:
    return table.calls_title


def share_tip(table: LayerTable) -> str:
    both = " + backward" if table.has_backward else ""
    return f"Own time (forward{both}) as a share of the iteration (the rows' sum): they add to 100%"


def subtree_share_tip(table: LayerTable) -> str:
    both = " + backward" if table.has_backward else ""
    return f"Subtree time (forward{both}) as a share of the iteration (the rows' sum)"


# Figures read from a row.
def own_work(row: LayerRow) -> LayerRoofline | None:
    """The printed and text tables judge only a profiled layer's own work (a container's is its
    children's)."""
    return row.roofline if row.kind == "layer" else None


def page_work(row: LayerRow) -> LayerRoofline | None:
    """The page shows the work of every row that ran, and of a parent that counted work of its
    own without being profiled."""
    line = row.roofline
    if line is None:
        return None
    ran = row.record is not None or row.kind in ("optimizer", "optimizer_part")
    return line if ran or line.flops or line.bytes else None


def counted_work(row: LayerRow) -> tuple[LayerWork, LayerRoofline] | None:
    """The --flops figures of a row the extra pass counted."""
    return (row.work, row.roofline) if row.work is not None and row.roofline is not None else None


def layer_memory(row: LayerRow) -> LayerMemory | None:
    """A profiled layer's memory on the model's device (the page's memory columns)."""
    return row.memory if row.kind == "layer" else None


def memory_figure(name: str) -> Callable[[LayerRow], int | None]:
    def figure(row: LayerRow) -> int | None:
        memory = layer_memory(row)
        return None if memory is None else int(getattr(memory, name))

    return figure


def work_figure(name: str) -> Callable[[LayerRow], float | None]:
    def figure(row: LayerRow) -> float | None:
        line = own_work(row)
        return None if line is None else getattr(line, name)

    return figure


# What the DataFrame writes.
def timing_fields(
    prefix: str, timing: Callable[[LayerRow], Timing | None]
) -> tuple[FrameField, ...]:
    """A time's median, min and max (a row without one of its own: 0)."""
    zero = Timing(0.0, 0.0, 0.0)
    return (
        FrameField(prefix, "float64", lambda r: (timing(r) or zero).median),
        FrameField(f"{prefix}_min", "float64", lambda r: (timing(r) or zero).min),
        FrameField(f"{prefix}_max", "float64", lambda r: (timing(r) or zero).max),
    )


def interval_end(end: Literal["low", "high"]) -> Callable[[LayerRow], float | None]:
    def value(row: LayerRow) -> float | None:
        interval = row.self_cpu.interval if row.self_cpu else None
        return None if interval is None else float(getattr(interval, end))

    return value


def frame_name(row: LayerRow) -> str:
    return row.path.rsplit(".", 1)[-1] if row.kind in ("layer", "container") else row.name


def is_leaf(row: LayerRow) -> bool:
    if row.record is not None:
        return row.record.is_leaf
    return not row.has_children if row.kind in ("optimizer", "optimizer_part") else False


WorkRead = Callable[[LayerWork, LayerRoofline], Any]  # a --flops figure of a counted row


def work_fields(*specs: tuple[str, FrameType, WorkRead]) -> tuple[FrameField, ...]:
    """--flops fields (name, type, figure): each blank where the extra pass counted nothing."""

    def field(name: str, type_: FrameType, read: WorkRead) -> FrameField:
        def value(row: LayerRow) -> Any:
            counted = counted_work(row)
            return None if counted is None else read(*counted)

        return FrameField(name, type_, value)

    return tuple(field(*spec) for spec in specs)


def memory_fields() -> tuple[FrameField, ...]:
    """Each LayerMemory figure as `mem_<figure>` (bytes; the nets are the only signed ones), and
    whether the model's own saved-tensor hooks hid its saves."""

    def figure(name: str) -> Callable[[LayerRow], Any]:
        return lambda r: None if r.memory is None else getattr(r.memory, name)

    ints = [*LAYER_BYTES, "self_net", "net"]
    fields = [FrameField(f"mem_{name}", "int64", figure(name)) for name in ints]
    return (*fields, FrameField("mem_saved_hidden", "bool", figure("saved_hidden")))
