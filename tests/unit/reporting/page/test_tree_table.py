"""The layer table's columns and the compact rows the HTML page draws (report.js reads them)."""

from __future__ import annotations

import math
from typing import Any

import pytest

from hybridprof.reporting.page.context import ReportContext, build_context
from hybridprof.reporting.page.tree_table import (
    COLLAPSED,
    HAS_CHILDREN,
    UNPROFILED,
    _compact,
)
from hybridprof.reporting.page.tree_table import (
    table_data as page_table_data,
)
from tests.sessions import backward_session, device_session, nested_session, small_session


def labels(session_factory: object) -> list[str]:
    return [c.label for c in build_context(session_factory()).columns]  # type: ignore[operator]


def table_data(ctx: ReportContext) -> dict[str, Any]:
    return page_table_data(ctx.columns, ctx.rows)


def test_columns_follow_what_the_session_measured() -> None:
    plain = labels(small_session)
    assert plain[:5] == ["Layer", "Class", "Calls/iter", "Self CPU", "Total CPU"]
    assert "Self device" not in plain and "Backward self" not in plain
    assert {"Self device", "Total device"} <= set(labels(device_session))
    assert {"Backward self", "Backward total"} <= set(labels(backward_session))


def test_every_time_column_sorts_by_its_raw_number() -> None:
    ctx = build_context(device_session())
    data = table_data(ctx)
    numeric = [c["label"] for c in data["columns"] if c["sort"] == "num"]
    assert "Self device" in numeric and "Total device" in numeric
    fc1 = next(r for r in data["rows"] if r[0] == "fc1")
    values = dict(zip(numeric, fc1[7], strict=True))
    rec = next(r for r in ctx.rows if r.path == "fc1")
    assert rec.layer.self_device_us is not None
    assert values["Self device"] == pytest.approx(rec.layer.self_device_us, abs=1e-3)
    assert values["Self CPU"] == pytest.approx(rec.self_us, abs=1e-3)


def test_rows_carry_their_parent_index_and_flags() -> None:
    data = table_data(build_context(nested_session()))
    paths = [r[0] for r in data["rows"]]
    for path, parent, depth, *_ in data["rows"]:
        assert depth == (0 if path == "" else path.count(".") + 1)
        assert (parent < 0) == (path == "")
        if parent >= 0:
            assert path.startswith(paths[parent]) and depth == data["rows"][parent][2] + 1
    by_path = {r[0]: r[3] for r in data["rows"]}
    assert by_path["blocks"] & HAS_CHILDREN and by_path["blocks"] & UNPROFILED
    assert not by_path["blocks.0.conv"] & (HAS_CHILDREN | COLLAPSED | UNPROFILED)


@pytest.mark.parametrize(
    ("value", "compact"),
    [(340.0, 340), (0.0139344, 0.014), (12.3456, 12.346), (-1.5, -1.5), (math.nan, 0)],
)
def test_sort_values_are_kept_to_the_thousandth(value: float, compact: float) -> None:
    assert _compact(value) == compact
    assert repr(_compact(value)) == repr(compact)
