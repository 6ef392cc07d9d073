"""A session as pandas DataFrames: one row per profiled path (and one per op), typed, in us and
bytes.

`session_frame` is what `ProfileSession.to_dataframe()` (and `Profile.to_dataframe()`) return and
what the CSV/JSON exports write. It lives in the data layer, beside the data model that offers it;
pandas is loaded only when this module is imported (on the first frame asked for). Numbers
stay raw (no formatting); a quantity that was not measured (device time without a device, backward
time without backward) is NaN rather than 0, so a reader can tell "not measured" from "zero".

Shares come from one denominator, the median iteration's profiled time: `pct_self` (own time,
forward plus backward) adds up to ~100% over the rows, the `(outside modules)` row included;
`pct_total` is a row's subtree (inclusive) share.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import pandas as pd

from hybridprof.analysis.roofline import by_path
from hybridprof.analysis.stats import median_ci
from hybridprof.analysis.tree import (
    depth_of,
    inclusive_us,
    outside_label,
    share_denominator_us,
    step_self_us,
    step_share_us,
    tree_rows,
)

if TYPE_CHECKING:  # the data model imports this module (to_dataframe); types only, no cycle
    from hybridprof.analysis.roofline import LayerRoofline
    from hybridprof.datamodel import LayerWork, ModuleRecord, ProfileSession, Stat

FLOAT_COLUMNS = (
    "self_cpu_us",
    "self_cpu_us_min",
    "self_cpu_us_max",
    "total_cpu_us",
    "total_cpu_us_min",
    "total_cpu_us_max",
    "self_device_us",
    "total_device_us",
    "backward_self_cpu_us",
    "backward_total_cpu_us",
    "pct_total",
    "pct_self",
    "calls_per_iter",
    "self_cpu_us_ci_low",  # the median's 95% interval (analysis.stats), NaN below 6 iterations
    "self_cpu_us_ci_high",
)
INT_COLUMNS = (
    "depth",
    "calls",
    "self_cpu_mem",
    "cpu_mem",
    "self_device_mem",
    "device_mem",
    "param_count",
    "op_count",
)
STR_COLUMNS = ("path", "name", "class_name", "input_shapes", "output_shapes", "aliases")
BOOL_COLUMNS = ("is_leaf",)
COLUMNS = (
    "path",
    "name",
    "class_name",
    "depth",
    "is_leaf",
    "calls",
    "calls_per_iter",
    *FLOAT_COLUMNS[:10],
    "self_cpu_mem",
    "cpu_mem",
    "self_device_mem",
    "device_mem",
    "param_count",
    "input_shapes",
    "output_shapes",
    "aliases",
    "op_count",
    "pct_total",
    "pct_self",
    "self_cpu_us_ci_low",
    "self_cpu_us_ci_high",
)
OP_COLUMNS = (
    "path",
    "op",
    "calls",
    "self_cpu_us",
    "total_cpu_us",
    "self_device_us",
    "total_device_us",
    "self_cpu_mem",
    "cpu_mem",
    "backward",
)


def _median(stat: Stat | None) -> float:
    return math.nan if stat is None else stat.median


def _self_interval(rec: ModuleRecord) -> tuple[float, float]:
    interval = median_ci(rec.per_iteration.self_cpu_us.values) if rec.per_iteration else None
    return (interval.low, interval.high) if interval else (math.nan, math.nan)


def _record_row(
    rec: ModuleRecord, total_us: float, iterations: int, inclusive: dict[str, float]
) -> dict[str, object]:
    ci_low, ci_high = _self_interval(rec)
    return {
        "self_cpu_us_ci_low": ci_low,
        "self_cpu_us_ci_high": ci_high,
        "path": rec.path,
        "name": rec.path.rsplit(".", 1)[-1],
        "class_name": rec.class_name,
        "depth": depth_of(rec.path),
        "is_leaf": rec.is_leaf,
        "calls": rec.calls,
        "calls_per_iter": rec.calls_per_iteration(iterations),
        "self_cpu_us": rec.self_cpu_us.median,
        "self_cpu_us_min": rec.self_cpu_us.min,
        "self_cpu_us_max": rec.self_cpu_us.max,
        "total_cpu_us": rec.total_cpu_us.median,
        "total_cpu_us_min": rec.total_cpu_us.min,
        "total_cpu_us_max": rec.total_cpu_us.max,
        "self_device_us": _median(rec.self_device_us),
        "total_device_us": _median(rec.total_device_us),
        "backward_self_cpu_us": _median(rec.backward_self_cpu_us),
        "backward_total_cpu_us": _median(rec.backward_total_cpu_us),
        "self_cpu_mem": rec.self_cpu_mem,
        "cpu_mem": rec.cpu_mem,
        "self_device_mem": rec.self_device_mem,
        "device_mem": rec.device_mem,
        "param_count": rec.param_count,
        "input_shapes": ", ".join(rec.input_shapes),
        "output_shapes": ", ".join(rec.output_shapes),
        "aliases": ", ".join(rec.aliases),
        "op_count": len(rec.ops),
        "pct_total": _pct(inclusive.get(rec.path, step_share_us(rec)), total_us),
        "pct_self": _pct(step_self_us(rec), total_us),
    }


def _pct(part_us: float, total_us: float) -> float:
    return 100.0 * part_us / total_us if total_us > 0 else math.nan


def _outside_row(session: ProfileSession, total_us: float) -> dict[str, object]:
    """The row of profiled time in no profiled module (forward and backward are one amount)."""
    assert session.outside_cpu_us is not None
    stat, label = session.outside_cpu_us, outside_label(session)
    row: dict[str, object] = {c: math.nan for c in FLOAT_COLUMNS}
    row.update({c: 0 for c in INT_COLUMNS})
    row.update({c: "" for c in STR_COLUMNS})
    row.update(path=label, name=label, is_leaf=False, calls_per_iter=0.0)
    row.update(self_cpu_us=stat.median, self_cpu_us_min=stat.min, self_cpu_us_max=stat.max)
    row.update(total_cpu_us=stat.median, total_cpu_us_min=stat.min, total_cpu_us_max=stat.max)
    row.update(pct_total=_pct(stat.median, total_us), pct_self=_pct(stat.median, total_us))
    return row


def _typed(frame: pd.DataFrame, floats: tuple[str, ...], ints: tuple[str, ...]) -> pd.DataFrame:
    # An empty frame would otherwise get object columns; fix every dtype so readers can rely on it.
    types: dict[str, str] = {c: "float64" for c in floats if c in frame.columns}
    types.update({c: "int64" for c in ints if c in frame.columns})
    types.update({c: "str" for c in STR_COLUMNS if c in frame.columns})
    types.update({c: "bool" for c in (*BOOL_COLUMNS, "backward") if c in frame.columns})
    return frame.astype(types)


def session_frame(session: ProfileSession) -> pd.DataFrame:
    """One row per profiled path, in module-tree order, then one for time outside every profiled
    module; columns as `COLUMNS` (times us, memory bytes), then `WORK_COLUMNS` when the session
    counted FLOPs (`run --flops`). A container that never runs itself (ModuleList) has a row with
    its children's totals and no calls or self time."""
    total = share_denominator_us(session)
    inclusive = inclusive_us(session)
    order = [row.record for row in tree_rows(session) if row.record is not None]
    rows = [_record_row(r, total, session.iterations, inclusive) for r in order]
    if session.outside_cpu_us is not None:
        rows.append(_outside_row(session, total))
    frame = _typed(pd.DataFrame(rows, columns=list(COLUMNS)), FLOAT_COLUMNS, INT_COLUMNS)
    return frame if session.flops is None else _with_work(frame, session)


WORK_INT_COLUMNS = (
    "flops",
    "bytes",
    "total_flops",
    "total_bytes",
    "backward_flops",
    "backward_bytes",
)
WORK_FLOAT_COLUMNS = ("intensity", "achieved_gflops", "achieved_gbps", "pct_peak")
WORK_COLUMNS = (*WORK_INT_COLUMNS, *WORK_FLOAT_COLUMNS, "verdict", "not_counted")


def _work_row(
    path: str, works: dict[str, LayerWork], lines: dict[str, LayerRoofline]
) -> dict[str, object]:
    work, line = works.get(path), lines.get(path)
    if work is None or line is None:
        return {c: (0 if c in WORK_INT_COLUMNS else math.nan) for c in WORK_COLUMNS} | {
            "verdict": "",
            "not_counted": "",
        }
    return {
        "flops": work.flops,  # forward, self; backward_flops beside it
        "bytes": work.bytes,
        "total_flops": work.total_flops,
        "total_bytes": work.total_bytes,
        "backward_flops": work.backward_flops,
        "backward_bytes": work.backward_bytes,
        "intensity": _or_nan(line.intensity),
        "achieved_gflops": _or_nan(line.gflops),
        "achieved_gbps": _or_nan(line.gbps),
        "pct_peak": _or_nan(line.pct_peak),
        "verdict": line.verdict,
        "not_counted": line.not_counted,
    }


def _or_nan(value: float | None) -> float:
    return math.nan if value is None else value


def _with_work(frame: pd.DataFrame, session: ProfileSession) -> pd.DataFrame:
    works = {w.path: w for w in session.flops.layers} if session.flops else {}
    lines = by_path(session)
    rows = [_work_row(p, works, lines) for p in frame["path"]]
    work = pd.DataFrame(rows, columns=list(WORK_COLUMNS))
    types = {c: "int64" for c in WORK_INT_COLUMNS} | {c: "float64" for c in WORK_FLOAT_COLUMNS}
    work = work.astype(types | {"verdict": "str", "not_counted": "str"})
    return pd.concat([frame, work.set_index(frame.index)], axis=1)


def ops_frame(session: ProfileSession) -> pd.DataFrame:
    """One row per (path, op): the show_events breakdown of every profiled path."""
    rows = [
        {
            "path": rec.path,
            "op": o.name,
            "calls": o.calls,
            "self_cpu_us": o.self_cpu_us,
            "total_cpu_us": o.total_cpu_us,
            "self_device_us": o.self_device_us,
            "total_device_us": o.total_device_us,
            "self_cpu_mem": o.self_cpu_mem,
            "cpu_mem": o.cpu_mem,
            "backward": o.backward,
        }
        for rec in session.records
        for o in rec.ops
    ]
    frame = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    floats = ("self_cpu_us", "total_cpu_us", "self_device_us", "total_device_us")
    return _typed(frame, floats, ("calls", "self_cpu_mem", "cpu_mem")).astype({"op": "str"})


def class_totals(session: ProfileSession) -> pd.DataFrame:
    """Self CPU time summed per layer class (e.g. all Conv2d), heaviest first."""
    frame = session_frame(session)
    frame = frame[frame["class_name"] != ""]  # the outside row belongs to no class
    grouped = frame.groupby("class_name", sort=False)["self_cpu_us"].agg(["sum", "count"])
    return grouped.sort_values("sum", ascending=False).reset_index()
