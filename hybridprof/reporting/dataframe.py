"""A session as pandas DataFrames: one row per profiled path (and one per op), typed, in us and
bytes.

`session_frame` is what `ProfileSession.to_dataframe()` (and `Profile.to_dataframe()`) return and
what the CSV/JSON exports write: the layer table (`analysis.layer_table`) as a DataFrame. pandas is
loaded only when this module is imported (on the first DataFrame asked for). Numbers stay raw (no
formatting); a quantity that was not measured (device time without a device, backward time
without backward) is NaN rather than 0, so a reader can tell "not measured" from "zero".

Shares come from one denominator, the table's headline (`frame.attrs["iteration_us"]`: the rows'
own times summed, see `analysis.layer_table.LayerTable`): `pct_self` (own time, forward plus
backward) adds up to 100% over the rows, the `(outside modules)` row included; `pct_total` is a
row's subtree (inclusive) share, and a parent's `total_cpu_us` is its subtree's self times summed.
The median iteration as measured is `frame.attrs["measured_iteration_us"]`. A training step's
optimizer has rows of its own before the outside row: `(optimizer)` (its total, like a
container's) and its parts (`(optimizer).step`, `(optimizer).step.AdamW group 0`,
`(optimizer).clip_grad`, ...).
"""

from __future__ import annotations

import json
import math

import pandas as pd

from hybridprof.analysis.layer_table import LayerTable, layer_table
from hybridprof.analysis.tree import outside_label
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.memory import CATEGORIES
from hybridprof.reporting.column_figures import FrameField
from hybridprof.reporting.csv_cells import csv_text
from hybridprof.reporting.layer_columns import (
    BY_KEY,
    COMM_KEYS,
    LAYER_COLUMNS,
    RAW_KEYS,
    frame_value,
)

# The columns every layer frame has, in order (`reporting.layer_columns` declares each): a
# quantity the session did not measure is NaN (or 0) there, so readers can rely on the names.
COLUMNS = (
    "path", "name", "class_name", "depth", "is_leaf", "calls", "calls_per_iter", "self_cpu_us",
    "self_cpu_us_min", "self_cpu_us_max", "total_cpu_us", "total_cpu_us_min", "total_cpu_us_max",
    "self_device_us", "total_device_us", "backward_self_cpu_us", "backward_total_cpu_us",
    "self_cpu_mem", "cpu_mem", "self_device_mem", "device_mem", "param_count", "input_shapes",
    "output_shapes", "aliases", "op_count", "pct_total", "pct_self", "self_cpu_us_ci_low",
    "self_cpu_us_ci_high",
)  # fmt: skip
# The columns whose fields follow them when the session has them: a compiled model's, --flops'
# and the memory section's (`--profile-memory`, bytes on the model's device; 0 where a row has
# none), an FSDP2-sharded model's communication per unit (NaN and 0 in rows of no unit), and a
# compensated table's raw times (the profiler's cost still in) and clamp flag.
WHEN_MEASURED = (
    "fused", "flops", "intensity", "gflops", "verdict", "mem-peak", *COMM_KEYS, *RAW_KEYS
)  # fmt: skip
_FIELDS = {f.name: f for column in LAYER_COLUMNS for f in column.frame}
WORK_COLUMNS = tuple(f.name for key in WHEN_MEASURED[1:5] for f in BY_KEY[key].frame)
MEMORY_COLUMNS = tuple(f.name for f in BY_KEY["mem-peak"].frame)
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


def frame_fields(table: LayerTable) -> list[FrameField]:
    """The frame's columns for this table: `COLUMNS`, then those of what it measured."""
    fields = [_FIELDS[name] for name in COLUMNS]
    measured = [BY_KEY[key] for key in WHEN_MEASURED if BY_KEY[key].present(table)]
    return fields + [f for column in measured for f in column.frame]


def _typed(frame: pd.DataFrame, types: dict[str, str]) -> pd.DataFrame:
    # An empty frame would otherwise get object columns; fix every dtype so readers can rely on it.
    return frame.astype({name: kind for name, kind in types.items() if name in frame.columns})


def session_frame(session: ProfileSession) -> pd.DataFrame:
    """One row per profiled path, in module-tree order, then the optimizer's of a training step,
    then one for time outside every profiled module; columns as `COLUMNS` (times us, memory
    bytes), then `fused` for a compiled model, `WORK_COLUMNS` when the session counted FLOPs
    (`run --flops`), and `MEMORY_COLUMNS` when it has the memory section (`--profile-memory`,
    bytes on the model's device; 0 where a row has none). A container that never runs itself
    (ModuleList) has a row with its children's totals and no calls or self time; an FSDP2 unit
    that is not profiled itself has a row with its communication and no times."""
    table = layer_table(session)
    fields = frame_fields(table)
    rows = [
        [frame_value(f, row, table) for f in fields]
        for row in table.rows
        if row.kind != "unprofiled" or row.comm  # an FSDP2 unit has figures of its own
    ]
    frame = _typed(
        pd.DataFrame(rows, columns=[f.name for f in fields]), {f.name: f.type for f in fields}
    )
    frame.attrs["iteration_us"] = table.iteration_us  # the headline the rows add up to
    frame.attrs["measured_iteration_us"] = table.measured_iteration_us
    return frame


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
    """One row per (path, op): the show_events breakdown of every profiled path, then the
    outside row's ops under its name (`(outside modules)`: what the time in no layer is)."""
    outside = outside_label(session)
    owned = [(rec.path, rec.ops) for rec in session.records]
    if session.outside_cpu_us is not None:
        owned.append((outside, session.outside_ops))
    rows = [
        {
            "path": path,
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
        for path, ops in owned
        for o in ops
    ]
    frame = pd.DataFrame(rows, columns=list(OP_COLUMNS))
    floats = ("self_cpu_us", "total_cpu_us", "self_device_us", "total_device_us")
    types = {c: "float64" for c in floats} | {
        c: "int64" for c in ("calls", "self_cpu_mem", "cpu_mem")
    }
    return _typed(frame, types | {"path": "str", "op": "str", "backward": "bool"})


def class_totals(session: ProfileSession) -> pd.DataFrame:
    """Self CPU time summed per layer class (e.g. all Conv2d), heaviest first."""
    frame = session_frame(session)
    modules = sum(1 for r in layer_table(session).tree() if r.kind != "unprofiled")
    frame = frame.iloc[:modules]  # the optimizer's and the outside rows belong to no class
    grouped = frame.groupby("class_name", sort=False)["self_cpu_us"].agg(["sum", "count"])
    return grouped.sort_values("sum", ascending=False).reset_index()


def render_csv(session: ProfileSession) -> str:
    """The layer table as CSV, one row per profiled path."""
    frame = session_frame(session)
    return csv_text(list(frame.columns), frame.itertuples(index=False, name=None))


def render_json(session: ProfileSession) -> str:
    """The layer table as JSON records (one per profiled path); the session file itself is
    `session.to_json()`."""
    # NaN (not measured) becomes null: strict JSON has no NaN.
    records = session_frame(session).to_dict(orient="records")
    clean = [
        {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in r.items()}
        for r in records
    ]
    return json.dumps(clean, indent=1, default=_plain) + "\n"


def _plain(value: object) -> object:
    item = getattr(value, "item", None)  # numpy scalars
    if callable(item):
        return item()
    raise TypeError(f"cannot export {type(value).__name__} to JSON")


class CsvRenderer:
    extensions = (".csv",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_csv(session)


class JsonRenderer:
    extensions = (".json",)
    binary = False

    def render(self, session: ProfileSession) -> str:
        return render_json(session)
