"""Every column of the layer table, declared once (after torchinfo's `ColumnSettings`).

The layer table's numbers are worked out once (`analysis.layer_table`); this registry says, for
each column, once: its key (what `--columns` and `--sort` call it), the figure it reads from a
`LayerRow`, how that figure reads (its unit), when a session has it, its title in each format
where it is shown (the printed table, the torchprof-style text table, the HTML/PDF table, the
DataFrame/CSV/JSON columns), its rank for fitting a terminal and the number it sorts by. The
formats only choose columns from it (each keeps its own order of keys) and lay them out:
`text.fitted_table` (printed), `text.text_table` (text), `page.tree_table` (HTML, PDF, notebook)
and `dataframe` (DataFrame, CSV, JSON).

A figure a row does not have is None: an empty cell in the printed and text tables. The page
tells "not measured for this row" (`-`) from "no such figure for a row of this kind" (empty):
`OnPage.measured_in` names the kinds of rows that measure the figure. The page reads three
figures otherwise than the text formats do (said where they are declared): a container's counted
work, with its unit, and a part of the optimizer's memory. The DataFrame writes a missing figure
as its type's blank: NaN, 0, "" or False. Torch-free; pandas-free.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from hybridprof.analysis.layer_table import LayerRow, LayerTable, RowKind, Timing
from hybridprof.analysis.roofline import LayerRoofline
from hybridprof.datamodel import LayerMemory, LayerWork, OpStat
from hybridprof.datamodel.memory import LAYER_BYTES
from hybridprof.reporting.format import (
    format_bytes,
    format_calls,
    format_count,
    format_rate,
    format_time_us,
)
from hybridprof.reporting.trust import timing_text

Title = str | Callable[[LayerTable], str]  # a title, or one that depends on the session
Sort = Literal["tree", "text", "num", ""]  # how the page's header orders rows ("": it does not)
FrameType = Literal["float64", "int64", "str", "bool"]
ALWAYS = 100  # a column of this rank is never left out to fit a terminal

OWN: frozenset[RowKind] = frozenset({"layer", "optimizer_part"})  # calls and self figures
TOTALS: frozenset[RowKind] = frozenset({"layer", "container", "optimizer", "optimizer_part"})
SHARED: frozenset[RowKind] = frozenset({*OWN, "outside"})  # own time: a share of the iteration


@dataclass(frozen=True, slots=True)
class OnTerminal:
    """The printed table's column (`hybridprof run`, `report`)."""

    title: Title
    keep: int  # the higher, the later it is left out to fit the terminal (ALWAYS: never)
    ops: bool = False  # its op rows (--show-events) show the op's figure


@dataclass(frozen=True, slots=True)
class OnPage:
    """The HTML/PDF table's column."""

    title: Title
    css: str = "num"  # the cells' class
    order: Sort = ""  # "num": its header orders rows by the column's sort figure
    tip: Title = ""  # the header's tooltip
    measured_in: frozenset[RowKind] = frozenset()  # rows whose missing figure reads `missing`
    missing: str = "-"
    # Where the page reads and shows the figure otherwise than the text formats (None: alike).
    figure: Callable[[LayerRow], Any] | None = None
    show: Callable[[Any], str] | None = None


@dataclass(frozen=True, slots=True)
class FrameField:
    """One DataFrame (CSV, JSON) column: its name, type and value for a row; None writes the
    type's blank (NaN, 0, "" or False)."""

    name: str
    type: FrameType
    value: Callable[[LayerRow, LayerTable], Any]


@dataclass(frozen=True, slots=True)
class LayerColumn:
    key: str  # what --columns and --sort call it (a printed column); an id otherwise
    figure: Callable[[LayerRow], Any]  # None: the row has no such figure
    show: Callable[[Any], str] = str  # how the figure reads
    present: Callable[[LayerTable], bool] = lambda _: True  # the session measured it
    sort: Callable[[LayerRow], float | None] | None = None  # --sort's and the page's number
    op: Callable[[OpStat], str] | None = None  # an op row's cell (show_events)
    terminal: OnTerminal | None = None
    text: Title | None = None  # the torchprof-style table's title
    page: OnPage | None = None
    frame: tuple[FrameField, ...] = ()  # what the DataFrame writes of it


# How figures read: torchprof's units; an empty cell where a row has none.
def _time(us: float | None) -> str:
    return "" if us is None else format_time_us(us)


def _bytes(n: int | None) -> str:
    return "" if n is None else format_bytes(n)


def _percent(pct: float) -> str:
    return f"{pct:.1f}%"


def _spread(timing: Timing) -> str:
    return f"{format_time_us(timing.min)}–{format_time_us(timing.max)}"


def _median(timing: Timing | None) -> float | None:
    return None if timing is None else timing.median


# When a session has a column.
def _backward(table: LayerTable) -> bool:
    return table.has_backward


def _device(table: LayerTable) -> bool:
    return table.has_device


def _memory(table: LayerTable) -> bool:
    return table.has_memory


def _device_memory(table: LayerTable) -> bool:
    return table.has_memory and table.has_device


def _flops(table: LayerTable) -> bool:
    return table.has_flops


def _memory_section(table: LayerTable) -> bool:
    return table.memory is not None


def _memory_section_backward(table: LayerTable) -> bool:
    return table.memory is not None and table.has_backward


def _compiled(table: LayerTable) -> bool:
    return table.has_compiled


# Titles that depend on the session.
def _calls_title(table: LayerTable) -> str:
    return "Calls" if table.calls_title == "Number of Calls" else "Calls/iter"


def _torchprof_calls_title(table: LayerTable) -> str:
    return table.calls_title


def _share_tip(table: LayerTable) -> str:
    both = " + backward" if table.has_backward else ""
    return f"Own time (forward{both}) as a share of the median iteration; these add up to 100%"


def _subtree_share_tip(table: LayerTable) -> str:
    both = " + backward" if table.has_backward else ""
    return f"Subtree time (forward{both}) as a share of the median iteration"


# Figures read from a row.
def _own_work(row: LayerRow) -> LayerRoofline | None:
    """The printed and text tables judge only a profiled layer's own work (a container's is its
    children's)."""
    return row.roofline if row.kind == "layer" else None


def _page_work(row: LayerRow) -> LayerRoofline | None:
    """The page shows the work of every row that ran, and of a parent that counted work of its
    own without being profiled."""
    line = row.roofline
    if line is None:
        return None
    ran = row.record is not None or row.kind in ("optimizer", "optimizer_part")
    return line if ran or line.flops or line.bytes else None


def _counted(row: LayerRow) -> tuple[LayerWork, LayerRoofline] | None:
    """The --flops figures of a row the extra pass counted."""
    return (row.work, row.roofline) if row.work is not None and row.roofline is not None else None


def _layer_memory(row: LayerRow) -> LayerMemory | None:
    """A profiled layer's memory on the model's device (the page's memory columns)."""
    return row.memory if row.kind == "layer" else None


def _memory_figure(name: str) -> Callable[[LayerRow], int | None]:
    def figure(row: LayerRow) -> int | None:
        memory = _layer_memory(row)
        return None if memory is None else int(getattr(memory, name))

    return figure


def _work_figure(name: str) -> Callable[[LayerRow], float | None]:
    def figure(row: LayerRow) -> float | None:
        line = _own_work(row)
        return None if line is None else getattr(line, name)

    return figure


# What the DataFrame writes.
def _field(name: str, type_: FrameType, figure: Callable[[LayerRow], Any]) -> FrameField:
    return FrameField(name, type_, lambda row, _: figure(row))


def _timing_fields(
    prefix: str, timing: Callable[[LayerRow], Timing | None]
) -> tuple[FrameField, ...]:
    """A time's median, min and max (a row without one of its own: 0)."""
    zero = Timing(0.0, 0.0, 0.0)
    return (
        _field(prefix, "float64", lambda r: (timing(r) or zero).median),
        _field(f"{prefix}_min", "float64", lambda r: (timing(r) or zero).min),
        _field(f"{prefix}_max", "float64", lambda r: (timing(r) or zero).max),
    )


def _interval_end(end: Literal["low", "high"]) -> Callable[[LayerRow], float | None]:
    def value(row: LayerRow) -> float | None:
        interval = row.self_cpu.interval if row.self_cpu else None
        return None if interval is None else float(getattr(interval, end))

    return value


def _blank_or_zero(
    figure: Callable[[LayerRow], float | None], measured: Callable[[LayerTable], bool]
) -> Callable[[LayerRow, LayerTable], float | None]:
    """A container's missing own figure is 0 where the session measured the quantity (its time
    is its children's); elsewhere a missing figure is NaN."""

    def value(row: LayerRow, table: LayerTable) -> float | None:
        found = figure(row)
        if found is None and row.kind == "container" and measured(table):
            return 0.0
        return found

    return value


def _frame_name(row: LayerRow) -> str:
    return row.path.rsplit(".", 1)[-1] if row.kind in ("layer", "container") else row.name


def _is_leaf(row: LayerRow) -> bool:
    if row.record is not None:
        return row.record.is_leaf
    return not row.has_children if row.kind in ("optimizer", "optimizer_part") else False


def _work_fields(
    *names: tuple[str, FrameType, Callable[[LayerWork, LayerRoofline], Any]],
) -> tuple[FrameField, ...]:
    def field(
        name: str, type_: FrameType, read: Callable[[LayerWork, LayerRoofline], Any]
    ) -> FrameField:
        def value(row: LayerRow, _: LayerTable) -> Any:
            counted = _counted(row)
            return None if counted is None else read(*counted)

        return FrameField(name, type_, value)

    return tuple(field(*spec) for spec in names)


def _memory_fields() -> tuple[FrameField, ...]:
    """Each LayerMemory figure as `mem_<figure>` (bytes; the nets are the only signed ones), and
    whether the model's own saved-tensor hooks hid its saves."""

    def figure(name: str) -> Callable[[LayerRow], Any]:
        return lambda r: None if r.memory is None else getattr(r.memory, name)

    ints = [*LAYER_BYTES, "self_net", "net"]
    fields = [_field(f"mem_{name}", "int64", figure(name)) for name in ints]
    return (*fields, _field("mem_saved_hidden", "bool", figure("saved_hidden")))


LAYER_COLUMNS: tuple[LayerColumn, ...] = (
    LayerColumn(
        "name",
        lambda r: r.name,
        terminal=OnTerminal("Module", ALWAYS),
        text="Module",
        page=OnPage("Layer", css="name", order="tree"),
        frame=(_field("path", "str", lambda r: r.path), _field("name", "str", _frame_name)),
    ),
    LayerColumn(
        "class",
        lambda r: r.class_name,
        terminal=OnTerminal("Class", 40),
        page=OnPage("Class", css="cls", order="text"),
        frame=(_field("class_name", "str", lambda r: r.class_name),),
    ),
    LayerColumn("depth", lambda r: r.depth, frame=(_field("depth", "int64", lambda r: r.depth),)),
    LayerColumn("leaf", _is_leaf, frame=(_field("is_leaf", "bool", _is_leaf),)),
    LayerColumn(
        "calls",
        lambda r: r.calls_per_iteration,
        format_calls,
        sort=lambda r: r.calls_per_iteration,
        op=lambda o: str(o.calls),
        terminal=OnTerminal(_calls_title, 50, ops=True),
        text=_torchprof_calls_title,
        page=OnPage(_calls_title, order="num", tip=_torchprof_calls_title),
        frame=(
            _field("calls", "int64", lambda r: r.record.calls if r.record else None),
            _field("calls_per_iter", "float64", lambda r: r.calls_per_iteration or 0.0),
        ),
    ),
    LayerColumn(
        "self",
        lambda r: r.self_cpu,
        timing_text,
        sort=lambda r: _median(r.self_cpu),
        op=lambda o: _time(o.self_cpu_us),
        terminal=OnTerminal("Self CPU", ALWAYS, ops=True),
        text="Self CPU total",
        page=OnPage("Self CPU", order="num"),
        frame=(
            *_timing_fields("self_cpu_us", lambda r: r.self_cpu),
            _field("self_cpu_us_ci_low", "float64", _interval_end("low")),  # NaN below 6 iterations
            _field("self_cpu_us_ci_high", "float64", _interval_end("high")),
        ),
    ),
    LayerColumn(
        "total",
        lambda r: r.total_cpu,
        timing_text,
        sort=lambda r: _median(r.total_cpu),
        op=lambda o: _time(o.total_cpu_us),
        terminal=OnTerminal("Total CPU", 90, ops=True),
        text="CPU total",
        page=OnPage("Total CPU", order="num"),
        frame=_timing_fields("total_cpu_us", lambda r: r.total_cpu),
    ),
    LayerColumn(
        "bwd-self",
        lambda r: r.backward_self_cpu_us,
        format_time_us,
        _backward,
        sort=lambda r: r.backward_self_cpu_us,
        terminal=OnTerminal("Self bwd", 85),
        text="Self CPU (backward)",
        page=OnPage("Backward self", order="num", measured_in=OWN),
        frame=(
            FrameField(
                "backward_self_cpu_us",
                "float64",
                _blank_or_zero(lambda r: r.backward_self_cpu_us, _backward),
            ),
        ),
    ),
    LayerColumn(
        "bwd-total",
        lambda r: r.backward_total_cpu_us,
        format_time_us,
        _backward,
        sort=lambda r: r.backward_total_cpu_us,
        terminal=OnTerminal("Total bwd", 60),
        text="CPU total (backward)",
        page=OnPage("Backward total", order="num", measured_in=TOTALS),
        frame=(_field("backward_total_cpu_us", "float64", lambda r: r.backward_total_cpu_us),),
    ),
    LayerColumn(
        "dev-self",
        lambda r: r.self_device_us,
        format_time_us,
        _device,
        sort=lambda r: r.self_device_us,
        op=lambda o: _time(o.self_device_us),
        terminal=OnTerminal("Self CUDA", 95, ops=True),
        text="Self CUDA total",
        page=OnPage("Self device", order="num", measured_in=OWN),
        frame=(
            FrameField(
                "self_device_us", "float64", _blank_or_zero(lambda r: r.self_device_us, _device)
            ),
        ),
    ),
    LayerColumn(
        "dev-total",
        lambda r: r.total_device_us,
        format_time_us,
        _device,
        sort=lambda r: r.total_device_us,
        op=lambda o: _time(o.total_device_us),
        terminal=OnTerminal("Total CUDA", 70),
        text="CUDA total",
        page=OnPage("Total device", order="num", measured_in=TOTALS),
        frame=(_field("total_device_us", "float64", lambda r: r.total_device_us),),
    ),
    LayerColumn(
        "share",  # own time, forward and backward, as a share of the iteration
        lambda r: r.pct_self if r.kind in SHARED else None,
        _percent,
        sort=lambda r: r.pct_self if r.kind in SHARED else None,
        terminal=OnTerminal("Self %", 88),
        page=OnPage("Self %", "num pct", "num", _share_tip, SHARED),
        frame=(_field("pct_self", "float64", lambda r: r.pct_self),),
    ),
    LayerColumn(
        "subtree-share",  # the subtree's own times as a share of the iteration
        lambda r: r.pct_total if r.kind in TOTALS | {"outside"} else None,
        _percent,
        sort=lambda r: r.pct_total,
        page=OnPage(
            "Total %", order="num", tip=_subtree_share_tip, measured_in=TOTALS | {"outside"}
        ),
        frame=(_field("pct_total", "float64", lambda r: r.pct_total),),
    ),
    LayerColumn(
        "mem-self",
        lambda r: r.self_cpu_mem,
        format_bytes,
        _memory,
        sort=lambda r: r.self_cpu_mem,
        op=lambda o: _bytes(o.self_cpu_mem),
        terminal=OnTerminal("Self mem", 35, ops=True),
        text="Self CPU Mem",
        # The page writes a part of the optimizer's (no memory of its own) as 0 B.
        page=OnPage(
            "Net self mem",
            order="num",
            tip="Allocated less freed by its own ops in the forward (torchprof's Self CPU Mem): "
            "the one figure that can be negative",
            measured_in=OWN,
            missing=format_bytes(0),
        ),
        frame=(_field("self_cpu_mem", "int64", lambda r: r.self_cpu_mem),),
    ),
    LayerColumn(
        "mem",
        lambda r: r.cpu_mem,
        format_bytes,
        _memory,
        sort=lambda r: r.cpu_mem,
        op=lambda o: _bytes(o.cpu_mem),
        terminal=OnTerminal("Mem", 20),
        text="CPU Mem",
        frame=(_field("cpu_mem", "int64", lambda r: r.cpu_mem),),
    ),
    LayerColumn(
        "dev-mem-self",
        lambda r: r.self_device_mem,
        format_bytes,
        _device_memory,
        sort=lambda r: r.self_device_mem,
        op=lambda o: _bytes(o.self_device_mem),
        terminal=OnTerminal("Self CUDA mem", 34),
        text="Self CUDA Mem",
        frame=(_field("self_device_mem", "int64", lambda r: r.self_device_mem),),
    ),
    LayerColumn(
        "dev-mem",
        lambda r: r.device_mem,
        format_bytes,
        _device_memory,
        sort=lambda r: r.device_mem,
        op=lambda o: _bytes(o.device_mem),
        terminal=OnTerminal("CUDA mem", 19),
        text="CUDA Mem",
        frame=(_field("device_mem", "int64", lambda r: r.device_mem),),
    ),
    LayerColumn(
        "mem-peak",
        _memory_figure("peak"),
        format_bytes,
        _memory_section,
        sort=_memory_figure("peak"),
        page=OnPage(
            "Peak (fwd)",
            order="num",
            tip="The most bytes live in its forward calls above what was live when each began",
        ),
        frame=_memory_fields(),
    ),
    LayerColumn(
        "mem-saved",
        _memory_figure("saved"),
        format_bytes,
        _memory_section,
        sort=_memory_figure("saved"),
        page=OnPage(
            "Saved",
            order="num",
            tip="Bytes its forward saved for backward (each storage once; parameters apart)",
        ),
    ),
    LayerColumn(
        "mem-bwd-peak",
        _memory_figure("backward_peak"),
        format_bytes,
        _memory_section_backward,
        sort=_memory_figure("backward_peak"),
        page=OnPage(
            "Peak (bwd)",
            order="num",
            tip="The most bytes live during its backward above what was live when it began",
        ),
    ),
    LayerColumn(
        "flops",
        _own_work,
        lambda x: format_count(x.flops, ""),
        _flops,
        sort=_work_figure("flops"),
        terminal=OnTerminal("FLOPs", 45),
        text="FLOPs",
        page=OnPage("FLOPs", figure=_page_work, show=lambda x: format_count(x.flops, "FLOP")),
        frame=_work_fields(
            ("flops", "int64", lambda w, _: w.flops),  # forward, self; backward_flops beside it
            ("bytes", "int64", lambda w, _: w.bytes),
            ("total_flops", "int64", lambda w, _: w.total_flops),
            ("total_bytes", "int64", lambda w, _: w.total_bytes),
            ("backward_flops", "int64", lambda w, _: w.backward_flops),
            ("backward_bytes", "int64", lambda w, _: w.backward_bytes),
        ),
    ),
    LayerColumn(
        "intensity",
        _own_work,
        lambda x: format_rate(x.intensity, ""),
        _flops,
        sort=_work_figure("intensity"),
        terminal=OnTerminal("FLOP/B", 10),
        text="FLOP/B",
        frame=_work_fields(("intensity", "float64", lambda _, x: x.intensity)),
    ),
    LayerColumn(
        "gflops",
        _own_work,
        lambda x: format_rate(x.gflops, ""),
        _flops,
        sort=_work_figure("gflops"),
        terminal=OnTerminal("GFLOP/s", 30),
        text="GFLOP/s",
        page=OnPage("GFLOP/s", figure=_page_work),
        frame=_work_fields(
            ("achieved_gflops", "float64", lambda _, x: x.gflops),
            ("achieved_gbps", "float64", lambda _, x: x.gbps),
            ("pct_peak", "float64", lambda _, x: x.pct_peak),
        ),
    ),
    LayerColumn(
        "verdict",
        _own_work,
        lambda x: x.verdict,
        _flops,
        terminal=OnTerminal("Verdict", 80),
        text="Verdict",
        page=OnPage("Verdict", css="verdict", figure=_page_work),
        frame=_work_fields(
            ("verdict", "str", lambda _, x: x.verdict),
            ("not_counted", "str", lambda _, x: x.not_counted),
        ),
    ),
    LayerColumn(
        "fused",  # a compiled session: the modules below it whose work its kernels did
        lambda r: ", ".join(r.fused),
        present=_compiled,
        op=lambda _: "",
        text="Fused",
        frame=(_field("fused", "str", lambda r: ", ".join(r.fused)),),
    ),
    LayerColumn(
        "spread",  # the self time's min and max over the iterations
        lambda r: r.self_cpu if r.kind in SHARED else None,
        _spread,
        page=OnPage("Spread (self, min–max)", css="num spread"),
    ),
    LayerColumn(
        "params",
        lambda r: r.param_count or None,
        lambda n: f"{n:,}",
        sort=lambda r: r.param_count,
        page=OnPage("Params", order="num"),
        frame=(_field("param_count", "int64", lambda r: r.param_count),),
    ),
    LayerColumn(
        "inputs",
        lambda r: ", ".join(r.input_shapes),
        frame=(_field("input_shapes", "str", lambda r: ", ".join(r.input_shapes)),),
    ),
    LayerColumn(
        "output",
        lambda r: ", ".join(r.output_shapes),
        page=OnPage("Output", css="shape"),
        frame=(_field("output_shapes", "str", lambda r: ", ".join(r.output_shapes)),),
    ),
    LayerColumn(
        "aliases",
        lambda r: ", ".join(r.aliases),
        frame=(_field("aliases", "str", lambda r: ", ".join(r.aliases)),),
    ),
    LayerColumn(
        "ops", lambda r: r.op_count, frame=(_field("op_count", "int64", lambda r: r.op_count),)
    ),
)
BY_KEY = {column.key: column for column in LAYER_COLUMNS}


def title(of: Title, table: LayerTable) -> str:
    return of if isinstance(of, str) else of(table)


def present(keys: Sequence[str], table: LayerTable) -> list[LayerColumn]:
    """The columns named by `keys` that `table`'s session has, in that order."""
    return [column for key in keys if (column := BY_KEY[key]).present(table)]


def cell(column: LayerColumn, row: LayerRow) -> str:
    """The printed and the text table's cell: the figure, or empty where the row has none."""
    figure = column.figure(row)
    return "" if figure is None else column.show(figure)


def op_cell(column: LayerColumn, op: OpStat) -> str:
    return "" if column.op is None else column.op(op)


def page_cell(column: LayerColumn, row: LayerRow) -> str:
    """The page's cell: the figure, `-` where the row measures it but has none, else empty."""
    page = column.page
    assert page is not None, f"{column.key} is not a column of the page"
    figure = (page.figure or column.figure)(row)
    if figure is None:
        return page.missing if row.kind in page.measured_in else ""
    return (page.show or column.show)(figure)


def frame_value(field: FrameField, row: LayerRow, table: LayerTable) -> Any:
    """A DataFrame cell: the field's value, or its type's blank where the row has none."""
    value = field.value(row, table)
    if value is not None:
        return value
    return {"float64": math.nan, "int64": 0, "str": "", "bool": False}[field.type]


__all__ = [
    "ALWAYS",
    "BY_KEY",
    "LAYER_COLUMNS",
    "FrameField",
    "LayerColumn",
    "OnPage",
    "OnTerminal",
    "Sort",
    "cell",
    "frame_value",
    "op_cell",
    "page_cell",
    "present",
    "title",
]
