"""session_frame / ops_frame / class_totals built from hand-made sessions with known numbers."""

from __future__ import annotations

import math

from hybridprof.analysis.tree import total_profiled_us
from hybridprof.reporting.dataframe import (
    COLUMNS,
    class_totals,
    ops_frame,
    session_frame,
)
from tests.sessions import (
    big_session,
    device_session,
    memory_session,
    nested_session,
    small_session,
)


def test_one_row_per_profiled_path_in_tree_order() -> None:
    frame = session_frame(nested_session())
    assert list(frame.columns) == list(COLUMNS)
    assert list(frame["path"]) == [
        "",
        "blocks.0",
        "blocks.0.conv",
        "blocks.0.act",
        "blocks.1",
        "blocks.1.conv",
        "blocks.1.act",
    ]


def test_columns_are_typed() -> None:
    dtypes = session_frame(small_session()).dtypes
    assert dtypes["self_cpu_us"] == "float64"
    assert dtypes["calls"] == "int64"
    assert dtypes["self_cpu_mem"] == "int64"
    assert dtypes["is_leaf"] == "bool"
    assert dtypes["path"] == "str"


def test_values_and_percent_of_total() -> None:
    frame = session_frame(small_session()).set_index("path")
    fc1 = frame.loc["fc1"]
    assert fc1["self_cpu_us"] == 520.0
    assert fc1["total_cpu_us"] == 580.0
    assert math.isclose(fc1["self_cpu_us_min"], 468.0)
    assert math.isclose(fc1["total_cpu_us_max"], 638.0)
    assert fc1["calls"] == 3
    assert fc1["param_count"] == 1000
    assert fc1["output_shapes"] == "4x64"
    assert fc1["op_count"] == 2
    # the median iteration is 1000 us
    assert math.isclose(fc1["pct_total"], 58.0)


def test_unmeasured_quantities_are_nan_not_zero() -> None:
    frame = session_frame(small_session())
    assert frame["self_device_us"].isna().all()
    assert frame["backward_self_cpu_us"].isna().all()
    device = session_frame(device_session()).set_index("path")
    assert device.loc["fc1", "self_device_us"] == 260.0


def test_memory_columns_in_bytes() -> None:
    frame = session_frame(memory_session())
    assert (frame["self_cpu_mem"] == 3 * 1024 * 1024).all()
    assert (frame["cpu_mem"] == 4 * 1024 * 1024).all()


def test_total_falls_back_to_root_then_top_level_records() -> None:
    import dataclasses

    nested = dataclasses.replace(nested_session(), iteration_cpu_us=())
    assert total_profiled_us(nested) == 1000.0  # the root record's total
    small = dataclasses.replace(small_session(), iteration_cpu_us=())
    assert total_profiled_us(small) == 580.0 + 100.0 + 320.0


def test_ops_frame_has_one_row_per_op() -> None:
    frame = ops_frame(small_session())
    assert list(zip(frame["path"], frame["op"], strict=True)) == [
        ("fc1", "aten::addmm"),
        ("fc1", "aten::t"),
        ("act", "aten::relu"),
        ("fc2", "aten::addmm"),
    ]
    assert frame["self_cpu_mem"].tolist() == [4096, 0, 0, 0]
    assert frame["calls"].dtype == "int64"


def test_class_totals_sum_self_time_per_class() -> None:
    totals = class_totals(small_session()).set_index("class_name")
    assert totals.loc["Linear", "sum"] == 820.0
    assert totals.loc["Linear", "count"] == 2
    assert list(totals.index) == ["Linear", "ReLU"]


def test_empty_session_gives_typed_empty_frame() -> None:
    frame = session_frame(big_session(leaves=0))
    assert len(frame) == 0
    assert frame["self_cpu_us"].dtype == "float64"
    assert frame["calls"].dtype == "int64"


def test_session_to_dataframe_is_the_report_frame() -> None:
    from hybridprof.reporting.dataframe import session_frame
    from tests.sessions import small_session

    session = small_session()
    assert session.to_dataframe().equals(session_frame(session))
    assert list(session.to_dataframe()["path"]) == ["fc1", "act", "fc2"]
