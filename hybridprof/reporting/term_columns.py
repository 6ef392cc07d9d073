"""The printed table's columns: each a layer table figure (`analysis.layer_table`) with a short
key (what `--columns` and `--sort` call it), a title, and a rank (`keep`) that says how late it
is left out when the table must fit a terminal. Formatting only. Torch-free."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from hybridprof.analysis.layer_table import LayerRow, LayerTable
from hybridprof.analysis.roofline import LayerRoofline
from hybridprof.datamodel import OpStat
from hybridprof.reporting.format import (
    format_bytes,
    format_calls,
    format_count,
    format_rate,
    format_time_us,
)
from hybridprof.reporting.trust import timing_text

ALWAYS = 100  # a column of this rank is never left out to fit
# Every column a table can have (each session has those it measured), for checking --columns and
# --sort before a run rather than after it.
COLUMN_KEYS = (
    "class", "self", "total", "bwd-self", "bwd-total", "dev-self", "dev-total", "share",
    "mem-self", "mem", "dev-mem-self", "dev-mem", "flops", "intensity", "gflops", "verdict",
    "calls",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class TermColumn:
    key: str  # what --columns and --sort call it
    title: str
    of_row: Callable[[LayerRow], str]
    keep: int  # the higher, the later it is left out to fit
    value: Callable[[LayerRow], float | None] | None = None  # what --sort orders by
    of_op: Callable[[OpStat], str] | None = None


def _time(us: float | None) -> str:
    return "" if us is None else format_time_us(us)


def _bytes(n: int | None) -> str:
    return "" if n is None else format_bytes(n)


def _pct(pct: float | None) -> str:
    return "" if pct is None else f"{pct:.1f}%"


def _median(row: LayerRow, which: str) -> float | None:
    timing = row.self_cpu if which == "self" else row.total_cpu
    return None if timing is None else timing.median


def _work(show: Callable[[LayerRoofline], str]) -> Callable[[LayerRow], str]:
    # only a profiled layer's own work is judged (a container's is its children's)
    return lambda r: show(r.roofline) if r.roofline is not None and r.kind == "layer" else ""


def _work_value(
    figure: Callable[[LayerRoofline], float | None],
) -> Callable[[LayerRow], float | None]:
    return lambda r: figure(r.roofline) if r.roofline is not None and r.kind == "layer" else None


# The --flops figures: key, title, how a layer's figure reads, rank, the figure --sort orders by.
_WORK_COLUMNS: tuple[
    tuple[str, str, Callable[[LayerRoofline], str], int, Callable[[LayerRoofline], float | None]],
    ...,
] = (
    ("flops", "FLOPs", lambda f: format_count(f.flops, ""), 45, lambda f: f.flops),
    ("intensity", "FLOP/B", lambda f: format_rate(f.intensity, ""), 10, lambda f: f.intensity),
    ("gflops", "GFLOP/s", lambda f: format_rate(f.gflops, ""), 30, lambda f: f.gflops),
)


def term_columns(table: LayerTable) -> list[TermColumn]:
    """Every column this table has data for, in display order."""
    calls = "Calls" if table.calls_title == "Number of Calls" else "Calls/iter"
    cols = [
        TermColumn("class", "Class", lambda r: r.class_name, 40),
        TermColumn(
            "self",
            "Self CPU",
            lambda r: timing_text(r.self_cpu),
            ALWAYS,
            lambda r: _median(r, "self"),
            lambda o: _time(o.self_cpu_us),
        ),
        TermColumn(
            "total",
            "Total CPU",
            lambda r: timing_text(r.total_cpu),
            90,
            lambda r: _median(r, "total"),
            lambda o: _time(o.total_cpu_us),
        ),
    ]
    if table.has_backward:
        cols += [
            TermColumn(
                "bwd-self",
                "Self bwd",
                lambda r: _time(r.backward_self_cpu_us),
                85,
                lambda r: r.backward_self_cpu_us,
            ),
            TermColumn(
                "bwd-total",
                "Total bwd",
                lambda r: _time(r.backward_total_cpu_us),
                60,
                lambda r: r.backward_total_cpu_us,
            ),
        ]
    if table.has_device:
        cols += [
            TermColumn(
                "dev-self",
                "Self CUDA",
                lambda r: _time(r.self_device_us),
                95,
                lambda r: r.self_device_us,
                lambda o: _time(o.self_device_us),
            ),
            TermColumn(
                "dev-total",
                "Total CUDA",
                lambda r: _time(r.total_device_us),
                70,
                lambda r: r.total_device_us,
            ),
        ]
    cols.append(
        TermColumn(
            "share",
            "Self %",  # own time, forward and backward, as a share of the iteration
            lambda r: _pct(r.pct_self) if r.measured else "",
            88,
            lambda r: r.pct_self if r.measured else None,
        )
    )
    if table.has_memory:
        cols += [
            TermColumn(
                "mem-self",
                "Self mem",
                lambda r: _bytes(r.self_cpu_mem),
                35,
                lambda r: r.self_cpu_mem,
                lambda o: _bytes(o.self_cpu_mem),
            ),
            TermColumn("mem", "Mem", lambda r: _bytes(r.cpu_mem), 20, lambda r: r.cpu_mem),
        ]
        if table.has_device:
            cols += [
                TermColumn(
                    "dev-mem-self",
                    "Self CUDA mem",
                    lambda r: _bytes(r.self_device_mem),
                    34,
                    lambda r: r.self_device_mem,
                ),
                TermColumn(
                    "dev-mem",
                    "CUDA mem",
                    lambda r: _bytes(r.device_mem),
                    19,
                    lambda r: r.device_mem,
                ),
            ]
    if table.has_flops:
        cols += [
            TermColumn(key, title, _work(show), keep, _work_value(figure))
            for key, title, show, keep, figure in _WORK_COLUMNS
        ]
        cols.append(TermColumn("verdict", "Verdict", _work(lambda f: f.verdict), 80))
    cols.append(
        TermColumn(
            "calls",
            calls,
            lambda r: "" if r.calls_per_iteration is None else format_calls(r.calls_per_iteration),
            50,
            lambda r: r.calls_per_iteration,
            lambda o: str(o.calls),
        )
    )
    return cols


__all__ = ["ALWAYS", "COLUMN_KEYS", "TermColumn", "term_columns"]
