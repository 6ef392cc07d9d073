"""A session as pandas DataFrames: one row per profiled path (and one per op), typed, in us and
bytes.

`session_frame` is what `ProfileSession.to_dataframe()` (and `Profile.to_dataframe()`) return and
what the CSV/JSON exports write: the layer table (`analysis.layer_table`) as a DataFrame. pandas is
loaded only when this module is imported (on the first DataFrame asked for). Numbers stay raw (no
formatting); a quantity that was not measured (device time without a device, backward time
without backward) is NaN rather than 0, so a reader can tell "not measured" from "zero".

Shares come from one denominator, the median iteration's profiled time: `pct_self` (own time,
forward plus backward) adds up to ~100% over the rows, the `(outside modules)` row included;
`pct_total` is a row's subtree (inclusive) share. A training step's optimizer has rows of its
own before the outside row: `(optimizer)` (its total, like a container's) and its parts
(`(optimizer).step`, `(optimizer).step.AdamW group 0`, `(optimizer).clip_grad`, ...).
"""

from __future__ import annotations

import math

import pandas as pd

from hybridprof.analysis.layer_table import LayerRow, LayerTable, Timing, layer_table
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.memory import CATEGORIES, LAYER_BYTES

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


def _number(value: float | None, measured: bool = True) -> float:
    """A figure as the frame holds it: NaN when the quantity was not measured at all."""
    return value if value is not None else (0.0 if measured else math.nan)


def _pct(value: float | None) -> float:
    return math.nan if value is None else value


def _interval(row: LayerRow) -> tuple[float, float]:
    interval = row.self_cpu.interval if row.self_cpu else None
    return (interval.low, interval.high) if interval else (math.nan, math.nan)


def _tree_row(row: LayerRow, table: LayerTable) -> dict[str, object]:
    """A profiled layer's row, or a container's (no self figures or calls: 0 where the quantity
    was measured, as its time is its children's)."""
    rec = row.record
    assert rec is not None and row.total_cpu is not None
    own = row.self_cpu or Timing(0.0, 0.0, 0.0)
    ci_low, ci_high = _interval(row)
    return {
        "self_cpu_us_ci_low": ci_low,
        "self_cpu_us_ci_high": ci_high,
        "path": row.path,
        "name": row.path.rsplit(".", 1)[-1],
        "class_name": row.class_name,
        "depth": row.depth,
        "is_leaf": rec.is_leaf,
        "calls": rec.calls,
        "calls_per_iter": row.calls_per_iteration or 0.0,
        "self_cpu_us": own.median,
        "self_cpu_us_min": own.min,
        "self_cpu_us_max": own.max,
        "total_cpu_us": row.total_cpu.median,
        "total_cpu_us_min": row.total_cpu.min,
        "total_cpu_us_max": row.total_cpu.max,
        "self_device_us": _number(row.self_device_us, table.has_device and row.kind != "layer"),
        "total_device_us": _number(row.total_device_us, False),
        "backward_self_cpu_us": _number(
            row.backward_self_cpu_us, table.has_backward and row.kind != "layer"
        ),
        "backward_total_cpu_us": _number(row.backward_total_cpu_us, False),
        "self_cpu_mem": row.self_cpu_mem or 0,
        "cpu_mem": row.cpu_mem or 0,
        "self_device_mem": row.self_device_mem or 0,
        "device_mem": row.device_mem or 0,
        "param_count": row.param_count,
        "input_shapes": ", ".join(row.input_shapes),
        "output_shapes": ", ".join(row.output_shapes),
        "aliases": ", ".join(row.aliases),
        "op_count": row.op_count,
        "pct_total": _pct(row.pct_total),
        "pct_self": _pct(row.pct_self),
    }


def _outside_row(row: LayerRow) -> dict[str, object]:
    """The row of profiled time in no profiled module (forward and backward are one amount)."""
    assert row.self_cpu is not None
    stat = row.self_cpu
    frame_row: dict[str, object] = {c: math.nan for c in FLOAT_COLUMNS}
    frame_row.update({c: 0 for c in INT_COLUMNS})
    frame_row.update({c: "" for c in STR_COLUMNS})
    frame_row.update(path=row.path, name=row.name, is_leaf=False, calls_per_iter=0.0)
    frame_row.update(self_cpu_us=stat.median, self_cpu_us_min=stat.min, self_cpu_us_max=stat.max)
    frame_row.update(total_cpu_us=stat.median, total_cpu_us_min=stat.min, total_cpu_us_max=stat.max)
    frame_row.update(pct_total=_pct(row.pct_total), pct_self=_pct(row.pct_self))
    return frame_row


def _optimizer_row(row: LayerRow) -> dict[str, object]:
    """The optimizer's row (a container: its total is its parts') or one of its parts."""
    assert row.total_cpu is not None
    own = row.self_cpu or Timing(0.0, 0.0, 0.0)
    ci_low, ci_high = _interval(row)
    frame_row: dict[str, object] = {c: math.nan for c in FLOAT_COLUMNS}
    frame_row.update({c: 0 for c in INT_COLUMNS})
    frame_row.update({c: "" for c in STR_COLUMNS})
    frame_row.update(
        path=row.path,
        name=row.name,
        class_name=row.class_name,
        depth=row.depth,
        is_leaf=not row.has_children,
        calls_per_iter=row.calls_per_iteration or 0.0,
        self_cpu_us=own.median,
        self_cpu_us_min=own.min,
        self_cpu_us_max=own.max,
        total_cpu_us=row.total_cpu.median,
        total_cpu_us_min=row.total_cpu.min,
        total_cpu_us_max=row.total_cpu.max,
        total_device_us=_number(row.total_device_us, False),
        op_count=row.op_count,
        pct_total=_pct(row.pct_total),
        pct_self=_pct(row.pct_self),
        self_cpu_us_ci_low=ci_low,
        self_cpu_us_ci_high=ci_high,
    )
    return frame_row


def _frame_row(row: LayerRow, table: LayerTable) -> dict[str, object]:
    if row.kind == "outside":
        return _outside_row(row)
    if row.kind in ("optimizer", "optimizer_part"):
        return _optimizer_row(row)
    return _tree_row(row, table)


def _typed(frame: pd.DataFrame, floats: tuple[str, ...], ints: tuple[str, ...]) -> pd.DataFrame:
    # An empty frame would otherwise get object columns; fix every dtype so readers can rely on it.
    types: dict[str, str] = {c: "float64" for c in floats if c in frame.columns}
    types.update({c: "int64" for c in ints if c in frame.columns})
    types.update({c: "str" for c in STR_COLUMNS if c in frame.columns})
    types.update({c: "bool" for c in (*BOOL_COLUMNS, "backward") if c in frame.columns})
    return frame.astype(types)


def session_frame(session: ProfileSession) -> pd.DataFrame:
    """One row per profiled path, in module-tree order, then the optimizer's of a training step,
    then one for time outside every profiled module; columns as `COLUMNS` (times us, memory
    bytes), then `fused` for a compiled model, `WORK_COLUMNS` when the session counted FLOPs
    (`run --flops`), and `MEMORY_COLUMNS` when it has the memory section (`--profile-memory`,
    bytes on the model's device; 0 where a row has none). A container that never runs itself
    (ModuleList) has a row with its children's totals and no calls or self time."""
    table = layer_table(session)
    shown = [row for row in table.rows if row.kind != "unprofiled"]
    rows = [_frame_row(r, table) for r in shown]
    frame = _typed(pd.DataFrame(rows, columns=list(COLUMNS)), FLOAT_COLUMNS, INT_COLUMNS)
    if session.compiled is not None:  # what each layer's compiled kernels fused ("ln_2, mlp.0")
        frame["fused"] = pd.Series([", ".join(r.fused) for r in shown], dtype="str").values
    frame = frame if session.flops is None else _with_work(frame, shown)
    return frame if table.memory is None else _with_memory(frame, shown)


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


def _work_row(row: LayerRow) -> dict[str, object]:
    work, line = row.work, row.roofline
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
        "intensity": _pct(line.intensity),
        "achieved_gflops": _pct(line.gflops),
        "achieved_gbps": _pct(line.gbps),
        "pct_peak": _pct(line.pct_peak),
        "verdict": line.verdict,
        "not_counted": line.not_counted,
    }


def _with_work(frame: pd.DataFrame, rows: list[LayerRow]) -> pd.DataFrame:
    work = pd.DataFrame([_work_row(r) for r in rows], columns=list(WORK_COLUMNS))
    types = {c: "int64" for c in WORK_INT_COLUMNS} | {c: "float64" for c in WORK_FLOAT_COLUMNS}
    work = work.astype(types | {"verdict": "str", "not_counted": "str"})
    return pd.concat([frame, work.set_index(frame.index)], axis=1)


# Each LayerMemory figure as `mem_<field>` (bytes; `mem_self_net`/`mem_net` are the only signed
# ones: allocated minus freed), and whether the model's own saved-tensor hooks hid its saves.
MEMORY_INT_COLUMNS = (*(f"mem_{name}" for name in LAYER_BYTES), "mem_self_net", "mem_net")
MEMORY_COLUMNS = (*MEMORY_INT_COLUMNS, "mem_saved_hidden")


def _memory_row(row: LayerRow) -> dict[str, object]:
    memory = row.memory
    if memory is None:
        empty: dict[str, object] = {c: 0 for c in MEMORY_INT_COLUMNS}
        return empty | {"mem_saved_hidden": False}
    values: dict[str, object] = {f"mem_{name}": getattr(memory, name) for name in LAYER_BYTES}
    values.update(mem_self_net=memory.self_net, mem_net=memory.net)
    return values | {"mem_saved_hidden": memory.saved_hidden}


def _with_memory(frame: pd.DataFrame, rows: list[LayerRow]) -> pd.DataFrame:
    memory = pd.DataFrame([_memory_row(r) for r in rows], columns=list(MEMORY_COLUMNS))
    memory = memory.astype({c: "int64" for c in MEMORY_INT_COLUMNS} | {"mem_saved_hidden": "bool"})
    return pd.concat([frame, memory.set_index(frame.index)], axis=1)


PEAK_COLUMNS = ("device", "phase", "path", "bytes", *(f"{name}_bytes" for name in CATEGORIES))


def memory_peak_frame(session: ProfileSession) -> pd.DataFrame:
    """What was live at the step's peak, per device: one row per allocating layer and phase
    (`phase` "start": alive before the step; `path` empty: in no profiled layer), its bytes by
    category. Empty without the memory section or its breakdown."""
    devices = session.memory.devices if session.memory is not None else ()
    rows = [
        {
            "device": device.device,
            "phase": share.phase,
            "path": "" if share.path is None else share.path,
            "bytes": share.bytes,
            **{f"{name}_bytes": getattr(share.categories, name) for name in CATEGORIES},
        }
        for device in devices
        for share in device.peak.by_layer
    ]
    frame = pd.DataFrame(rows, columns=list(PEAK_COLUMNS))
    ints = {c: "int64" for c in PEAK_COLUMNS if c.endswith("bytes")}
    return frame.astype(ints | {"device": "str", "phase": "str", "path": "str"})


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
    modules = sum(1 for r in layer_table(session).tree() if r.kind != "unprofiled")
    frame = frame.iloc[:modules]  # the optimizer's and the outside rows belong to no class
    grouped = frame.groupby("class_name", sort=False)["self_cpu_us"].agg(["sum", "count"])
    return grouped.sort_values("sum", ascending=False).reset_index()
