"""The memory section in the data model and every format: schema 5 round trip, old files, the
layer table's rows, text, terminal, CSV/DataFrame and HTML (names escaped)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hybridprof.analysis.layer_table import layer_table
from hybridprof.datamodel import SCHEMA_VERSION, ProfileSession
from hybridprof.datamodel.memory import ByteSeries
from hybridprof.errors import SessionFileError
from hybridprof.reporting.dataframe import (
    MEMORY_COLUMNS,
    memory_peak_frame,
    render_csv,
    session_frame,
)
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.memory_text import memory_lines
from hybridprof.reporting.text.text_report import render_text_report
from tests.memory_sessions import MiB, hostile_memory_session, layer_memory_session
from tests.paths import FIXTURES
from tests.sessions import HOSTILE

SCHEMA_4 = FIXTURES / "session_schema4.json"


def test_a_session_with_memory_round_trips_with_its_layers_as_columns() -> None:
    session = layer_memory_session()
    text = session.to_json()
    assert ProfileSession.from_json(text) == session
    data = json.loads(text)
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["memory"]["version"] == 1  # always written: a reader must see which it reads
    layers = data["memory"]["devices"][0]["layers"]
    assert layers["path"] == ["fc1", "act", "fc2"] and "saved_alloc" not in layers  # all 0
    assert data["memory"]["devices"][0]["timeline"]["live_bytes"].split()[0] == str(2 * MiB)


def test_a_schema_4_file_still_loads_and_renders() -> None:
    session = ProfileSession.from_json(SCHEMA_4.read_text())
    assert session.schema_version == 4 and session.memory is None and session.profile_memory
    assert "Self CPU Mem" in render_text_report(session)
    assert "mem_peak" not in session_frame(session).columns
    assert 'id="memory"' not in render_html(session)


def test_a_newer_memory_section_is_refused_by_name() -> None:
    data = json.loads(layer_memory_session().to_json())
    data["memory"]["version"] = 2
    with pytest.raises(SessionFileError, match=r"memory section is version 2.*upgrade"):
        ProfileSession.from_json(json.dumps(data))


@pytest.mark.parametrize("text", ["1.5 2", "1e3", "x", "1,2"])
def test_byte_series_take_whole_numbers_only(text: str) -> None:
    with pytest.raises(ValueError, match="whole numbers"):
        ByteSeries.json_decode(text)
    assert ByteSeries.json_decode("-3 0 12") == (-3, 0, 12)


def test_the_layer_table_rows_carry_the_model_devices_figures() -> None:
    table = layer_table(layer_memory_session())
    assert table.memory is not None and table.memory.device == "cpu"
    rows = {r.path: r for r in table.rows}
    assert rows["fc2"].memory is not None and rows["fc2"].memory.peak == 3 * MiB
    assert rows["fc1"].memory is not None and rows["fc1"].memory.self_net == -MiB
    outside = table.outside()
    assert outside is not None and outside.memory is not None
    assert outside.memory.self_alloc == 1024


def test_the_dataframe_has_every_figure_as_integer_columns() -> None:
    frame = session_frame(layer_memory_session())
    assert set(MEMORY_COLUMNS) <= set(frame.columns)
    fc2 = frame[frame["path"] == "fc2"].iloc[0]
    assert fc2["mem_peak"] == 3 * MiB and fc2["mem_backward_peak"] == 6 * MiB
    assert fc2["mem_self_net"] == -MiB  # the one signed figure
    assert str(frame["mem_peak"].dtype) == "int64"
    assert "mem_saved_unique" in render_csv(layer_memory_session()).splitlines()[0]


def test_text_and_terminal_say_where_the_peak_was_and_who_keeps_most() -> None:
    session = layer_memory_session()
    lines = memory_lines(session)
    assert (
        lines[0]
        == "memory on cpu (live bytes known to hybridprof: the CPU allocator keeps no total):"
    )
    assert (
        "step peak 6.00 MB at 700.000us of 1.000ms, in the backward of fc2 [AddmmBackward0]"
        in (lines[1])
    )
    assert lines[2] == (
        "  live then: activations saved for backward 3.00 MB, parameters 2.00 MB, "
        "temporaries 1.00 MB"
    )
    assert lines[3] == "  kept most for backward: fc2 768.00 KB, act 512.00 KB, fc1 256.00 KB"
    report = render_text_report(session)
    assert "memory per layer on cpu, per step:" in report
    assert "live at the peak, by the layer that allocated it:" in report
    assert "memory note: a note on the cpu" in report


def test_the_html_memory_section_escapes_every_name() -> None:
    html = render_html(hostile_memory_session())
    assert 'id="memory"' in html and 'class="chart memory-timeline"' in html
    assert HOSTILE not in html
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_the_html_has_the_memory_columns_and_the_activation_chart() -> None:
    html = render_html(layer_memory_session())
    for label in ("Peak (fwd)", "Peak (bwd)", "Net self mem", 'id="chart-activations"'):
        assert label in html
    assert "Live bytes over one measured step" in html


def test_no_memory_section_no_memory_block() -> None:
    session = replace(layer_memory_session(), memory=None)
    assert memory_lines(session) == []
    assert "memory per layer" not in render_text_report(session)


def test_the_live_set_at_the_peak_is_a_dataframe_too() -> None:
    frame = memory_peak_frame(layer_memory_session())
    assert list(frame["phase"]) == ["forward", "start", "backward"]
    assert list(frame["path"]) == ["fc2", "", ""]
    assert frame["bytes"].sum() == 6 * MiB and frame["activations_bytes"].sum() == 3 * MiB
    assert memory_peak_frame(replace(layer_memory_session(), memory=None)).empty
