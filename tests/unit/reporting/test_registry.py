"""write_report picks a renderer by extension, checks the path first and writes atomically."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pandas as pd
import pytest

from hybridprof.errors import OutputError, UsageError
from hybridprof.reporting import Renderer, known_extensions, renderer_for, write_report
from hybridprof.reporting.dataframe import render_json
from tests.sessions import small_session


def test_known_extensions() -> None:
    assert known_extensions() == (".csv", ".htm", ".html", ".json", ".pdf", ".txt")


@pytest.mark.parametrize("ext", [".html", ".HTM", ".csv", ".json", ".pdf", ".txt"])
def test_every_renderer_follows_the_protocol(ext: str) -> None:
    renderer = renderer_for(f"out{ext}")
    assert isinstance(renderer, Renderer)
    assert ext.lower() in renderer.extensions
    assert renderer.binary == (ext == ".pdf")


def test_unknown_extension_lists_the_known_ones(tmp_path: Path) -> None:
    with pytest.raises(
        UsageError, match=r"'\.xlsx'; use one of \.csv, \.htm, \.html, \.json, \.pdf, \.txt"
    ):
        write_report(small_session(), tmp_path / "out.xlsx")
    with pytest.raises(UsageError, match="no extension"):
        write_report(small_session(), tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_existing_output_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "r.html"
    target.write_text("old")
    with pytest.raises(OutputError, match="--force"):
        write_report(small_session(), target)
    assert target.read_text() == "old"
    assert write_report(small_session(), target, force=True) == target
    assert target.read_text().startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["r.html"]  # no temp file left


def test_missing_folder_is_refused_before_rendering(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        write_report(small_session(), tmp_path / "nope" / "r.pdf")


def test_csv_export_reads_back_as_the_table(tmp_path: Path) -> None:
    path = write_report(small_session(), tmp_path / "layers.csv")
    frame = pd.read_csv(path)
    assert list(frame["path"]) == ["fc1", "act", "fc2"]
    assert list(frame["self_cpu_us"]) == [520.0, 100.0, 300.0]
    assert math.isnan(frame["self_device_us"][0])


def test_json_export_is_records_with_null_for_unmeasured() -> None:
    records = json.loads(render_json(small_session()))
    assert [r["path"] for r in records] == ["fc1", "act", "fc2"]
    assert records[0]["total_cpu_us"] == 580.0
    assert records[0]["calls"] == 3 and records[0]["is_leaf"] is True
    assert records[0]["self_device_us"] is None
    assert pd.read_json(io.StringIO(json.dumps(records))).shape == (3, 30)


def test_txt_goes_to_the_text_renderer(tmp_path: Path) -> None:
    text = write_report(small_session(), tmp_path / "r.txt").read_text()
    assert "fc1" in text and "520.000us" in text
