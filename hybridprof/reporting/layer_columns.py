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

from hybridprof.analysis.layer_table import LayerRow, LayerTable, RawTimes, RowKind
from hybridprof.datamodel import OpStat
from hybridprof.reporting.column_figures import (
    OWN,
    SHARED,
    TOTALS,
    FrameField,
    bytes_text,
    calls_title,
    frame_name,
    has_backward,
    has_compiled,
    has_device,
    has_device_memory,
    has_flops,
    has_memory,
    has_memory_section,
    has_memory_section_backward,
    interval_end,
    is_leaf,
    median_of,
    memory_fields,
    memory_figure,
    own_work,
    page_work,
    percent_text,
    share_tip,
    spread_text,
    subtree_share_tip,
    time_text,
    timing_fields,
    torchprof_calls_title,
    work_fields,
    work_figure,
)
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
ALWAYS = 100  # a column of this rank is never left out to fit a terminal


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


# What a row is: its module, its class, where it sits, what it takes and gives.
_ROW_FACTS: tuple[LayerColumn, ...] = (
    LayerColumn(
        "name",
        lambda r: r.name,
        terminal=OnTerminal("Module", ALWAYS),
        text="Module",
        page=OnPage("Layer", css="name", order="tree"),
        frame=(
            FrameField("path", "str", lambda r: r.path),
            FrameField("name", "str", frame_name),
        ),
    ),
    LayerColumn(
        "class",
        lambda r: r.class_name,
        terminal=OnTerminal("Class", 40),
        page=OnPage("Class", css="cls", order="text"),
        frame=(FrameField("class_name", "str", lambda r: r.class_name),),
    ),
    LayerColumn(
        "depth", lambda r: r.depth, frame=(FrameField("depth", "int64", lambda r: r.depth),)
    ),
    LayerColumn("leaf", is_leaf, frame=(FrameField("is_leaf", "bool", is_leaf),)),
    LayerColumn(
        "params",
        lambda r: r.param_count or None,
        lambda n: f"{n:,}",
        sort=lambda r: r.param_count,
        page=OnPage("Params", order="num"),
        frame=(FrameField("param_count", "int64", lambda r: r.param_count),),
    ),
    LayerColumn(
        "inputs",
        lambda r: ", ".join(r.input_shapes),
        frame=(FrameField("input_shapes", "str", lambda r: ", ".join(r.input_shapes)),),
    ),
    LayerColumn(
        "output",
        lambda r: ", ".join(r.output_shapes),
        page=OnPage("Output", css="shape"),
        frame=(FrameField("output_shapes", "str", lambda r: ", ".join(r.output_shapes)),),
    ),
    LayerColumn(
        "aliases",
        lambda r: ", ".join(r.aliases),
        frame=(FrameField("aliases", "str", lambda r: ", ".join(r.aliases)),),
    ),
    LayerColumn(
        "ops", lambda r: r.op_count, frame=(FrameField("op_count", "int64", lambda r: r.op_count),)
    ),
    LayerColumn(
        "fused",  # a compiled session: the modules below it whose work its kernels did
        lambda r: ", ".join(r.fused),
        present=has_compiled,
        op=lambda _: "",
        text="Fused",
        frame=(FrameField("fused", "str", lambda r: ", ".join(r.fused)),),
    ),
)

# Its calls and times, per iteration, and their shares of the iteration.
_TIMES: tuple[LayerColumn, ...] = (
    LayerColumn(
        "calls",
        lambda r: r.calls_per_iteration,
        format_calls,
        sort=lambda r: r.calls_per_iteration,
        op=lambda o: str(o.calls),
        terminal=OnTerminal(calls_title, 50, ops=True),
        text=torchprof_calls_title,
        page=OnPage(calls_title, order="num", tip=torchprof_calls_title),
        frame=(
            FrameField("calls", "int64", lambda r: r.record.calls if r.record else None),
            FrameField("calls_per_iter", "float64", lambda r: r.calls_per_iteration or 0.0),
        ),
    ),
    LayerColumn(
        "self",
        lambda r: r.self_cpu,
        timing_text,
        sort=lambda r: median_of(r.self_cpu),
        op=lambda o: time_text(o.self_cpu_us),
        terminal=OnTerminal("Self CPU", ALWAYS, ops=True),
        text="Self CPU total",
        page=OnPage("Self CPU", order="num"),
        frame=(
            *timing_fields("self_cpu_us", lambda r: r.self_cpu),
            FrameField(
                "self_cpu_us_ci_low", "float64", interval_end("low")
            ),  # NaN below 6 iterations
            FrameField("self_cpu_us_ci_high", "float64", interval_end("high")),
        ),
    ),
    LayerColumn(
        "total",
        lambda r: r.total_cpu,
        timing_text,
        sort=lambda r: median_of(r.total_cpu),
        op=lambda o: time_text(o.total_cpu_us),
        terminal=OnTerminal("Total CPU", 90, ops=True),
        text="CPU total",
        page=OnPage("Total CPU", order="num"),
        frame=timing_fields("total_cpu_us", lambda r: r.total_cpu),
    ),
    LayerColumn(
        "bwd-self",
        lambda r: r.backward_self_cpu_us,
        format_time_us,
        has_backward,
        sort=lambda r: r.backward_self_cpu_us,
        terminal=OnTerminal("Self bwd", 85),
        text="Self CPU (backward)",
        page=OnPage("Backward self", order="num", measured_in=OWN),
        frame=(
            FrameField(
                "backward_self_cpu_us",
                "float64",
                lambda r: r.backward_self_cpu_us,
                container_zero=has_backward,
            ),
        ),
    ),
    LayerColumn(
        "bwd-total",
        lambda r: r.backward_total_cpu_us,
        format_time_us,
        has_backward,
        sort=lambda r: r.backward_total_cpu_us,
        terminal=OnTerminal("Total bwd", 60),
        text="CPU total (backward)",
        page=OnPage("Backward total", order="num", measured_in=TOTALS),
        frame=(FrameField("backward_total_cpu_us", "float64", lambda r: r.backward_total_cpu_us),),
    ),
    LayerColumn(
        "dev-self",
        lambda r: r.self_device_us,
        format_time_us,
        has_device,
        sort=lambda r: r.self_device_us,
        op=lambda o: time_text(o.self_device_us),
        terminal=OnTerminal("Self CUDA", 95, ops=True),
        text="Self CUDA total",
        page=OnPage("Self device", order="num", measured_in=OWN),
        frame=(
            FrameField(
                "self_device_us", "float64", lambda r: r.self_device_us, container_zero=has_device
            ),
        ),
    ),
    LayerColumn(
        "dev-total",
        lambda r: r.total_device_us,
        format_time_us,
        has_device,
        sort=lambda r: r.total_device_us,
        op=lambda o: time_text(o.total_device_us),
        terminal=OnTerminal("Total CUDA", 70),
        text="CUDA total",
        page=OnPage("Total device", order="num", measured_in=TOTALS),
        frame=(FrameField("total_device_us", "float64", lambda r: r.total_device_us),),
    ),
    LayerColumn(
        "spread",  # the self time's min and max over the iterations
        lambda r: r.self_cpu if r.kind in SHARED else None,
        spread_text,
        page=OnPage("Spread (self, min–max)", css="num spread"),
    ),
    LayerColumn(
        "share",  # own time, forward and backward, as a share of the iteration
        lambda r: r.pct_self if r.kind in SHARED else None,
        percent_text,
        sort=lambda r: r.pct_self if r.kind in SHARED else None,
        terminal=OnTerminal("Self %", 88),
        page=OnPage("Self %", "num pct", "num", share_tip, SHARED),
        frame=(FrameField("pct_self", "float64", lambda r: r.pct_self),),
    ),
    LayerColumn(
        "subtree-share",  # the subtree's own times as a share of the iteration
        lambda r: r.pct_total if r.kind in TOTALS | {"outside"} else None,
        percent_text,
        sort=lambda r: r.pct_total,
        page=OnPage(
            "Total %", order="num", tip=subtree_share_tip, measured_in=TOTALS | {"outside"}
        ),
        frame=(FrameField("pct_total", "float64", lambda r: r.pct_total),),
    ),
)

# A compensated table's figures as measured, the profiler's cost still in (`analysis.compensation`).
RAW_TIP = "As measured, the profiler's own cost still in (the table's figures have it taken out)"


def _compensated(table: LayerTable) -> bool:
    return table.compensated


def _compensated_backward(table: LayerTable) -> bool:
    return table.compensated and table.has_backward


def _raw(pick: Callable[[RawTimes], float | None]) -> Callable[[LayerRow], float | None]:
    return lambda r: pick(r.raw) if r.raw is not None else None


_RAW: tuple[LayerColumn, ...] = (
    LayerColumn(
        "raw-self",
        _raw(lambda t: t.self_cpu_us),
        format_time_us,
        _compensated,
        sort=_raw(lambda t: t.self_cpu_us),
        text="Self CPU (raw)",
        page=OnPage("Raw self", order="num", tip=RAW_TIP, measured_in=SHARED),
        frame=(
            FrameField("raw_self_cpu_us", "float64", _raw(lambda t: t.self_cpu_us)),
            FrameField("clamped", "bool", lambda r: r.clamped),
        ),
    ),
    LayerColumn(
        "raw-total",
        _raw(lambda t: t.total_cpu_us),
        format_time_us,
        _compensated,
        sort=_raw(lambda t: t.total_cpu_us),
        text="CPU total (raw)",
        page=OnPage("Raw total", order="num", tip=RAW_TIP, measured_in=TOTALS | {"outside"}),
        frame=(FrameField("raw_total_cpu_us", "float64", _raw(lambda t: t.total_cpu_us)),),
    ),
    LayerColumn(
        "raw-bwd-self",
        _raw(lambda t: t.backward_self_cpu_us),
        format_time_us,
        _compensated_backward,
        sort=_raw(lambda t: t.backward_self_cpu_us),
        text="Self CPU (backward, raw)",
        page=OnPage("Raw backward self", order="num", tip=RAW_TIP, measured_in=OWN),
        frame=(
            FrameField(
                "raw_backward_self_cpu_us", "float64", _raw(lambda t: t.backward_self_cpu_us)
            ),
        ),
    ),
    LayerColumn(
        "raw-bwd-total",
        _raw(lambda t: t.backward_total_cpu_us),
        format_time_us,
        _compensated_backward,
        sort=_raw(lambda t: t.backward_total_cpu_us),
        text="CPU total (backward, raw)",
        page=OnPage("Raw backward total", order="num", tip=RAW_TIP, measured_in=TOTALS),
        frame=(
            FrameField(
                "raw_backward_total_cpu_us", "float64", _raw(lambda t: t.backward_total_cpu_us)
            ),
        ),
    ),
)
RAW_KEYS = tuple(column.key for column in _RAW)

# Its memory: torchprof's allocation figures, and the memory section's (--profile-memory).
_MEMORY: tuple[LayerColumn, ...] = (
    LayerColumn(
        "mem-self",
        lambda r: r.self_cpu_mem,
        format_bytes,
        has_memory,
        sort=lambda r: r.self_cpu_mem,
        op=lambda o: bytes_text(o.self_cpu_mem),
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
        frame=(FrameField("self_cpu_mem", "int64", lambda r: r.self_cpu_mem),),
    ),
    LayerColumn(
        "mem",
        lambda r: r.cpu_mem,
        format_bytes,
        has_memory,
        sort=lambda r: r.cpu_mem,
        op=lambda o: bytes_text(o.cpu_mem),
        terminal=OnTerminal("Mem", 20),
        text="CPU Mem",
        frame=(FrameField("cpu_mem", "int64", lambda r: r.cpu_mem),),
    ),
    LayerColumn(
        "dev-mem-self",
        lambda r: r.self_device_mem,
        format_bytes,
        has_device_memory,
        sort=lambda r: r.self_device_mem,
        op=lambda o: bytes_text(o.self_device_mem),
        terminal=OnTerminal("Self CUDA mem", 34),
        text="Self CUDA Mem",
        frame=(FrameField("self_device_mem", "int64", lambda r: r.self_device_mem),),
    ),
    LayerColumn(
        "dev-mem",
        lambda r: r.device_mem,
        format_bytes,
        has_device_memory,
        sort=lambda r: r.device_mem,
        op=lambda o: bytes_text(o.device_mem),
        terminal=OnTerminal("CUDA mem", 19),
        text="CUDA Mem",
        frame=(FrameField("device_mem", "int64", lambda r: r.device_mem),),
    ),
    LayerColumn(
        "mem-peak",
        memory_figure("peak"),
        format_bytes,
        has_memory_section,
        sort=memory_figure("peak"),
        page=OnPage(
            "Peak (fwd)",
            order="num",
            tip="The most bytes live in its forward calls above what was live when each began",
        ),
        frame=memory_fields(),
    ),
    LayerColumn(
        "mem-saved",
        memory_figure("saved"),
        format_bytes,
        has_memory_section,
        sort=memory_figure("saved"),
        page=OnPage(
            "Saved",
            order="num",
            tip="Bytes its forward saved for backward (each storage once; parameters apart)",
        ),
    ),
    LayerColumn(
        "mem-bwd-peak",
        memory_figure("backward_peak"),
        format_bytes,
        has_memory_section_backward,
        sort=memory_figure("backward_peak"),
        page=OnPage(
            "Peak (bwd)",
            order="num",
            tip="The most bytes live during its backward above what was live when it began",
        ),
    ),
)

# Its counted work and the roofline's verdict (--flops).
_WORK: tuple[LayerColumn, ...] = (
    LayerColumn(
        "flops",
        own_work,
        lambda x: format_count(x.flops, ""),
        has_flops,
        sort=work_figure("flops"),
        terminal=OnTerminal("FLOPs", 45),
        text="FLOPs",
        page=OnPage("FLOPs", figure=page_work, show=lambda x: format_count(x.flops, "FLOP")),
        frame=work_fields(
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
        own_work,
        lambda x: format_rate(x.intensity, ""),
        has_flops,
        sort=work_figure("intensity"),
        terminal=OnTerminal("FLOP/B", 10),
        text="FLOP/B",
        frame=work_fields(("intensity", "float64", lambda _, x: x.intensity)),
    ),
    LayerColumn(
        "gflops",
        own_work,
        lambda x: format_rate(x.gflops, ""),
        has_flops,
        sort=work_figure("gflops"),
        terminal=OnTerminal("GFLOP/s", 30),
        text="GFLOP/s",
        page=OnPage("GFLOP/s", figure=page_work),
        frame=work_fields(
            ("achieved_gflops", "float64", lambda _, x: x.gflops),
            ("achieved_gbps", "float64", lambda _, x: x.gbps),
            ("pct_peak", "float64", lambda _, x: x.pct_peak),
        ),
    ),
    LayerColumn(
        "verdict",
        own_work,
        lambda x: x.verdict,
        has_flops,
        terminal=OnTerminal("Verdict", 80),
        text="Verdict",
        page=OnPage("Verdict", css="verdict", figure=page_work),
        frame=work_fields(
            ("verdict", "str", lambda _, x: x.verdict),
            ("not_counted", "str", lambda _, x: x.not_counted),
        ),
    ),
)


# An FSDP2 unit's communication (a sharded model): per iteration, time and bytes of each kind.
def _comm_us(kind: str) -> Callable[[LayerRow], float | None]:
    def figure(row: LayerRow) -> float | None:
        comm = row.comm_of(kind)
        return comm.time_us.median if comm is not None else None

    return figure


def _comm_bytes(kind: str) -> Callable[[LayerRow], int | None]:
    def figure(row: LayerRow) -> int | None:
        comm = row.comm_of(kind)
        return comm.nbytes if comm is not None else None

    return figure


def has_fsdp(table: LayerTable) -> bool:
    return table.has_fsdp


def has_wait(table: LayerTable) -> bool:
    return table.has_wait


def _waited_for_text(row: LayerRow) -> str | None:
    rank = row.waited_for
    return str(rank) if rank is not None else None


def _comm_column(
    key: str,
    kind: str,
    title: str,
    keep: int,
    tip: str,
    size: bool,
    shown: Callable[[LayerTable], bool] = has_fsdp,
) -> LayerColumn:
    """One communication column (FSDP2's, or with `shown=has_tp` tensor parallel's): the row's
    time of `kind` per iteration, or (`size`) its bytes."""
    figure = _comm_bytes(kind) if size else _comm_us(kind)
    field = (
        FrameField(kind + "_bytes", "int64", figure)
        if size
        else (FrameField(kind + "_us", "float64", figure))
    )
    return LayerColumn(
        key,
        figure,
        format_bytes if size else format_time_us,
        shown,
        sort=figure,
        terminal=OnTerminal(title, keep),
        text=title,
        page=OnPage(title, order="num", tip=tip, missing=""),
        frame=(field,),
    )


def _comm_time(key: str, kind: str, title: str, keep: int, tip: str) -> LayerColumn:
    return _comm_column(key, kind, title, keep, tip, size=False)


def _comm_size(key: str, kind: str, title: str, keep: int, tip: str) -> LayerColumn:
    return _comm_column(key, kind, title, keep, tip, size=True)


def _time_column(
    key: str,
    figure: Callable[[LayerRow], float | None],
    title: str,
    keep: int,
    tip: str,
    frame: str,
    shown: Callable[[LayerTable], bool],
) -> LayerColumn:
    """A time per iteration a row's communication gives (its compute, its exposed or waited
    part), when `shown`."""
    return LayerColumn(
        key,
        figure,
        format_time_us,
        shown,
        sort=figure,
        terminal=OnTerminal(title, keep),
        text=title,
        page=OnPage(title, order="num", tip=tip, missing=""),
        frame=(FrameField(frame, "float64", figure),),
    )


_WALL = "wall time per iteration of FSDP2's ranges for this unit, waiting for other ranks included"
_COMM: tuple[LayerColumn, ...] = (
    _comm_time("gather", "all_gather", "All-gather", 58, f"Forward all-gather: {_WALL}"),
    _comm_size(
        "gather-bytes", "all_gather", "Gathered", 57,
        "Bytes the forward all-gathers gave this rank per iteration (the unit's padded "
        "unsharded parameters, from its FSDP parameter group)",
    ),
    _comm_time("copy-out", "copy_out", "Copy-out", 52, f"All-gather copy-out: {_WALL}"),
    _comm_time("regather", "regather", "Re-gather", 54, f"Backward all-gather: {_WALL}"),
    _comm_time("scatter", "reduce_scatter", "Reduce-scatter", 56, f"Gradients: {_WALL}"),
    _comm_size(
        "scatter-bytes", "reduce_scatter", "Scattered", 53,
        "Bytes of gradients this rank reduce-scattered per iteration (from its FSDP parameter "
        "group)",
    ),
    _time_column(
        "exposed", lambda r: r.exposed_us, "Exposed", 57,
        "Of the unit's communication per iteration, the time the rank's thread spent in the "
        "collectives' calls and waits, not computing (on CPU with gloo nearly all of it; a "
        "merged session: the median rank's)", "exposed_us", has_fsdp,
    ),
    _time_column(
        "wait", lambda r: r.wait_us, "Wait", 58,
        "The most a rank waited per iteration in the unit's collectives for another rank: its "
        "time beyond the shortest rank's in the same iteration, median over iterations",
        "wait_us", has_wait,
    ),
    LayerColumn(
        "waited-for",
        lambda r: r.waited_for,
        lambda rank: f"rank {rank}",
        has_wait,
        terminal=OnTerminal("Waited for", 57),
        text="Waited for",
        page=OnPage(
            "Waited for", order="text", missing="",
            tip="The rank the waiting rank waited for: the one with the shortest time in the "
            "collective in most iterations (the late rank arrives last and waits least)",
        ),
        frame=(FrameField("waited_for", "str", _waited_for_text),),
    ),
)  # fmt: skip


# A tensor-parallel layer's collectives (DTensor): per iteration, forward and backward, and the
# layer's own time without them.
def has_tp(table: LayerTable) -> bool:
    return table.has_tp


def _tp_group(row: LayerRow) -> str | None:
    return next((c.group for c in row.comm if c.kind.startswith("tp_") and c.group), None)


def _tp_column(key: str, kind: str, title: str, keep: int, tip: str, size: bool) -> LayerColumn:
    return _comm_column(key, kind, title, keep, tip, size, shown=has_tp)


_TP_TIME = (
    "CPU time per iteration of the collectives this layer issued (DTensor's hooks included) "
    "and of the waits for them, wherever they ran; waiting for other ranks included"
)
_TP: tuple[LayerColumn, ...] = (
    _tp_column("tp-fwd", "tp_forward", "TP comm", 59, f"Forward: {_TP_TIME}", size=False),
    _tp_column(
        "tp-fwd-bytes", "tp_forward", "TP sent", 55,
        "Bytes the forward's collectives sent per iteration (their inputs)", size=True,
    ),
    _tp_column("tp-bwd", "tp_backward", "TP comm bwd", 51, f"Backward: {_TP_TIME}", size=False),
    _tp_column(
        "tp-bwd-bytes", "tp_backward", "TP sent bwd", 50,
        "Bytes the backward's collectives sent per iteration (their inputs)", size=True,
    ),
    _time_column(
        "compute", lambda r: r.compute_us, "Compute", 60,
        "Self time without the layer's tensor-parallel communication", "compute_us", has_tp,
    ),
    _time_column(
        "bwd-compute", lambda r: r.backward_compute_us, "Compute bwd", 49,
        "Backward self time without the layer's tensor-parallel communication",
        "backward_compute_us", has_tp,
    ),
    LayerColumn(
        "tp-group",
        _tp_group,
        str,
        has_tp,
        text="TP group",
        page=OnPage("TP group", order="text", missing=""),
        frame=(FrameField("tp_group", "str", _tp_group),),
    ),
)  # fmt: skip

LAYER_COLUMNS = (*_ROW_FACTS, *_TIMES, *_RAW, *_MEMORY, *_WORK, *_COMM, *_TP)
COMM_KEYS = tuple(column.key for column in (*_COMM, *_TP))
BY_KEY = {column.key: column for column in LAYER_COLUMNS}


def title(of: Title, table: LayerTable) -> str:
    return of if isinstance(of, str) else of(table)


def present(keys: Sequence[str], table: LayerTable) -> list[LayerColumn]:
    """The columns named by `keys` that `table`'s session has, in that order."""
    return [column for key in keys if (column := BY_KEY[key]).present(table)]


def text_cells(columns: Sequence[LayerColumn]) -> Callable[[LayerRow], list[str]]:
    """A row's cells in the printed and the text table: each figure as it reads, empty where the
    row has none (the readers bound once: a table makes them for thousands of rows)."""
    readers = [(c.figure, c.show) for c in columns]

    def cells(row: LayerRow) -> list[str]:
        return ["" if (v := figure(row)) is None else show(v) for figure, show in readers]

    return cells


# An op of the backward pass shows its self and total times under the backward columns.
OP_BACKWARD_COLUMNS = {"self": "bwd-self", "total": "bwd-total"}
OP_RAW_COLUMNS = ("self", "total", "bwd-self", "bwd-total")


def op_cells(
    columns: Sequence[LayerColumn], shown: Callable[[LayerColumn], bool] = lambda _: True
) -> Callable[[OpStat], list[str]]:
    """An op row's cells (show_events): the `shown` columns with an op figure show it, the rest
    are empty; a backward op's times under the backward columns where the table has them."""
    readers = [c.op if shown(c) else None for c in columns]
    place = {c.key: i for i, c in enumerate(columns)}
    moves = [(place[f], place[b]) for f, b in OP_BACKWARD_COLUMNS.items() if {f, b} <= place.keys()]

    # Beside a compensated layer's raw times, an op's (always raw) sit under the raw columns,
    # where they add up to the layer's.
    raws = [
        (place[k], place[f"raw-{k}"]) for k in OP_RAW_COLUMNS if {k, f"raw-{k}"} <= place.keys()
    ]

    def cells(op: OpStat) -> list[str]:
        row = [read(op) if read is not None else "" for read in readers]
        for forward, backward in moves if op.backward else ():
            row[backward], row[forward] = row[forward], ""
        for own, raw in raws:
            row[raw], row[own] = row[own], ""
        return row

    return cells


# The op columns whose figures include nested ops: a sum over ops would count a nested op twice.
OP_INCLUSIVE_COLUMNS = frozenset(
    {"total", "bwd-total", "raw-total", "raw-bwd-total", "dev-total", "mem", "dev-mem"}
)


def op_rest_cells(
    columns: Sequence[LayerColumn], shown: Callable[[LayerColumn], bool] = lambda _: True
) -> Callable[[OpStat], list[str]]:
    """The cells of a `... K more ops` row, given its ops summed into one OpStat: the self
    figures and calls (so each self column still adds up to the layer's), the inclusive ones
    empty."""
    plain = op_cells(columns, shown)
    inclusive = [i for i, c in enumerate(columns) if c.key in OP_INCLUSIVE_COLUMNS]

    def cells(summed: OpStat) -> list[str]:
        row = plain(summed)
        for i in inclusive:
            row[i] = ""
        return row

    return cells


def cell(column: LayerColumn, row: LayerRow) -> str:
    return text_cells([column])(row)[0]


def page_cell(column: LayerColumn, row: LayerRow) -> str:
    """The page's cell: the figure, `-` where the row measures it but has none, else empty."""
    page = column.page
    assert page is not None, f"{column.key} is not a column of the page"
    figure = (page.figure or column.figure)(row)
    if figure is None:
        return page.missing if row.kind in page.measured_in else ""
    return (page.show or column.show)(figure)


def frame_value(field: FrameField, row: LayerRow, table: LayerTable) -> Any:
    """A DataFrame cell: the field's value, or its blank where the row has none (see
    `FrameField`)."""
    value = field.value(row)
    if value is not None:
        return value
    measured = field.container_zero
    if measured is not None and row.kind == "container" and measured(table):
        return 0.0
    return _BLANK[field.type]


_BLANK = {"float64": math.nan, "int64": 0, "str": "", "bool": False}


__all__ = [
    "ALWAYS",
    "BY_KEY",
    "COMM_KEYS",
    "LAYER_COLUMNS",
    "RAW_KEYS",
    "FrameField",
    "LayerColumn",
    "OnPage",
    "OnTerminal",
    "Sort",
    "cell",
    "frame_value",
    "op_cells",
    "op_rest_cells",
    "page_cell",
    "present",
    "text_cells",
    "title",
]
