"""Roofline arithmetic, verdicts, the chart and every report format for a hand-made --flops
session."""

from __future__ import annotations

import csv
import io
import json
import re
from dataclasses import replace

import pytest

from hybridprof.analysis.roofline import (
    LayerRoofline,
    inconsistencies,
    session_rooflines,
    verdict,
)
from hybridprof.datamodel import (
    LayerWork,
    MachinePeak,
    OpCount,
    ProfileSession,
    Stat,
    WorkProfile,
)
from hybridprof.reporting.dataframe import render_csv, render_json
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.roofline_chart import (
    _crosses,
    _overlaps,
    chart_dots,
    render_roofline,
    text_box,
)
from hybridprof.reporting.page.roofline_view import MAX_ROWS
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.text_report import render_text_report
from hybridprof.reporting.text.text_table import render_text
from tests.report_page import context_cells
from tests.sessions import HOSTILE, big_session, hostile_session, small_session

PEAK = MachinePeak(100.0, 10.0, "given", "given")  # ridge point: 10 FLOP/byte


def flops_session(base: ProfileSession | None = None) -> ProfileSession:
    """small_session (fc1 520 us, act 100 us, fc2 300 us self) with counted work."""
    session = base or small_session()
    layers = (
        LayerWork("", bytes=800, total_flops=26_000_000 + 300_000, total_bytes=5_000_800),
        # 26 MFLOP in 520 us = 50 GFLOP/s; 26e6 / 1e6 = 26 FLOP/byte: right of the ridge
        LayerWork("fc1", flops=26_000_000, bytes=1_000_000, total_flops=26_000_000),
        # 0 FLOP, 2 MB in 100 us = 20 GB/s: memory
        LayerWork("act", bytes=2_000_000, not_counted=(OpCount("aten.relu", 3),)),
        # 300 kFLOP, 2 MB in 300 us: 1 GFLOP/s, 6.7 GB/s: 67% of bandwidth
        LayerWork("fc2", flops=300_000, bytes=2_000_000, total_flops=300_000),
    )
    work = WorkProfile(layers, PEAK, forward_flops=26_300_000 + 1000, forward_bytes=5_000_800)
    return replace(session, flops=work)


def test_verdicts_follow_the_roofline() -> None:
    assert verdict(26_000_000, 1_000_000, 520.0, PEAK) == "compute-bound at 50% of peak"
    assert verdict(0, 2_000_000, 100.0, PEAK) == "inconsistent: 200% of peak bandwidth"
    assert verdict(300_000, 2_000_000, 300.0, PEAK) == "memory-bound at 67% of peak bandwidth"
    assert verdict(1000, 1000, 100.0, PEAK) == "overhead-bound"  # far below both roofs
    assert verdict(0, 0, 5.0, PEAK) == "overhead-bound"  # a view-only layer (Flatten)
    assert verdict(1000, 1000, 0.0, PEAK) == ""  # no time: no verdict


def test_no_verdict_above_a_roof() -> None:
    # 100 GFLOP/s is the peak: 130 MFLOP in 1 ms is 130 GFLOP/s, which cannot be
    assert verdict(130_000_000, 1_000_000, 1000.0, PEAK) == "inconsistent: 130% of peak FLOP/s"
    assert verdict(100_000_000, 1_000_000, 1000.0, PEAK) == "compute-bound at 100% of peak"
    assert verdict(0, 10_000_000, 1000.0, PEAK) == "memory-bound at 100% of peak bandwidth"


def _with_times(session: ProfileSession, times: dict[str, float]) -> ProfileSession:
    records = tuple(
        replace(r, self_cpu_us=Stat(times[r.path], times[r.path], times[r.path]))
        if r.path in times
        else r
        for r in session.records
    )
    return replace(session, records=records)


def test_inconsistent_layers_name_the_number_likely_wrong() -> None:
    # fc1 and fc2 both do real arithmetic (right of the ridge) and both beat the peak: the peak
    session = flops_session()
    work = session.flops
    assert work is not None
    layers = tuple(replace(w, flops=200_000_000) if w.path == "fc2" else w for w in work.layers)
    peak_low = _with_times(replace(session, flops=replace(work, layers=layers)), {"fc1": 200.0})
    (found, *others) = [x for x in inconsistencies(peak_low) if x.roof == "peak FLOP/s"]
    assert others == [] and found.suspect == "peak" and set(found.paths) == {"fc1", "fc2"}
    assert "--peak-gflops" in found.text and "up to 667%" in found.text
    # only fc1 beats it, and its own time is 10 us: the time
    short = _with_times(session, {"fc1": 10.0})
    assert [(x.suspect, x.paths) for x in inconsistencies(short) if x.roof == "peak FLOP/s"] == [
        ("time", ("fc1",))
    ]

    # fc1 alone, three times the peak in a steady 520 us: its count; a little over: no culprit
    def fc1_flops(flops: int) -> ProfileSession:
        layers = tuple(replace(w, flops=flops) if w.path == "fc1" else w for w in work.layers)
        return replace(session, flops=replace(work, layers=layers))

    far = [x for x in inconsistencies(fc1_flops(156_000_000)) if x.roof == "peak FLOP/s"]
    assert [(x.suspect, x.paths) for x in far] == [("count", ("fc1",))]
    assert "FLOP counts are likely too high" in far[0].text
    near = [x for x in inconsistencies(fc1_flops(62_400_000)) if x.roof == "peak FLOP/s"]
    assert [(x.suspect, x.paths) for x in near] == [("margin", ("fc1",))]
    assert "--peak-gflops" in near[0].text
    # act moves 2 MB in 100 us, twice the peak bandwidth: bytes from cache, not memory
    (moved,) = [x for x in inconsistencies(session) if x.roof == "peak bandwidth"]
    assert moved.suspect == "count" and moved.paths == ("act",) and "cache" in moved.text
    assert inconsistencies(small_session()) == ()


def test_reports_say_what_is_inconsistent() -> None:
    session = flops_session()
    ctx = build_context(session)
    assert context_cells(ctx, "act")["verdict"] == "inconsistent: 200% of peak bandwidth"
    assert ctx.roofline is not None
    assert any(
        n.startswith("Inconsistent: 1 layer(s) above the peak bandwidth")
        for n in ctx.roofline.notes
    )
    assert "inconsistent: 200% of peak bandwidth" in render_text(session)
    assert 'fill="#c0392b"' not in str(ctx.roofline.svg)  # act has no FLOPs: not on the chart
    fast = build_context(_with_times(session, {"fc1": 10.0})).roofline
    assert fast is not None and 'fill="#c0392b"' in str(fast.svg)  # the impossible dot stands out


def test_layer_figures_and_unprofiled_rows() -> None:
    lines = {x.path: x for x in session_rooflines(flops_session())}
    fc1 = lines["fc1"]
    assert fc1.intensity == pytest.approx(26.0)
    assert fc1.gflops == pytest.approx(50.0) and fc1.pct_peak == pytest.approx(50.0)
    assert lines["act"].not_counted == "aten.relu x3"
    assert lines[""].self_us is None and lines[""].verdict == ""  # the root was not profiled


def test_a_backward_step_joins_both_passes() -> None:
    session = flops_session()
    work = session.flops
    assert work is not None
    layers = tuple(replace(w, backward_flops=2 * w.flops) for w in work.layers)
    records = tuple(
        replace(r, backward_self_cpu_us=Stat(2 * r.self_cpu_us.median, 0, 0))
        for r in session.records
    )
    step = replace(session, backward=True, records=records, flops=replace(work, layers=layers))
    fc1 = {x.path: x for x in session_rooflines(step)}["fc1"]
    assert fc1.flops == 3 * 26_000_000 and fc1.self_us == pytest.approx(3 * 520.0)
    assert fc1.gflops == pytest.approx(50.0)


def test_text_table_and_report_show_the_verdicts() -> None:
    session = flops_session()
    table = render_text(session)
    assert "Verdict" in table.splitlines()[0] and "compute-bound at 50% of peak" in table
    report = render_text_report(session)
    assert "roofline, self figures per step" in report and "aten.relu x3" in report
    assert "1 kFLOP outside the model" in report


def test_without_flops_nothing_changes() -> None:
    session = small_session()
    assert "FLOPs" not in render_text(session) and "roofline" not in render_text_report(session)
    assert "flops" not in render_csv(session) and build_context(session).roofline is None
    assert "roofline" not in render_html(session)


def test_csv_and_json_carry_the_work_columns() -> None:
    rows = list(csv.DictReader(io.StringIO(render_csv(flops_session()))))
    fc1 = next(r for r in rows if r["path"] == "fc1")
    assert fc1["flops"] == "26000000" and fc1["verdict"] == "compute-bound at 50% of peak"
    records = json.loads(render_json(flops_session()))
    act = next(r for r in records if r["path"] == "act")
    assert act["flops"] == 0 and act["not_counted"] == "aten.relu x3" and act["intensity"] == 0


def test_chart_places_layers_with_flops_and_escapes_names() -> None:
    session = hostile_session()
    (rec,) = session.records
    work = WorkProfile((LayerWork(rec.path, flops=10**6, bytes=10**5),), PEAK, 10**6, 10**5)
    hostile = replace(session, flops=work)
    lines = session_rooflines(hostile)
    assert [d.path for d in chart_dots(lines)] == [HOSTILE]
    svg = str(render_roofline(lines, PEAK))
    assert HOSTILE not in svg and "&lt;img" in svg and svg.count("<circle") == 1
    html = render_html(hostile)
    assert HOSTILE not in html and 'id="chart-roofline"' in html


def test_html_context_fills_the_tree_rows() -> None:
    ctx = build_context(flops_session())
    fc1 = context_cells(ctx, "fc1")
    assert fc1["verdict"] == "compute-bound at 50% of peak"
    assert fc1["flops"] == "26 MFLOP"
    assert ctx.roofline is not None and len(ctx.roofline.rows) == 4
    assert any("1 of 3 profiled layers are not on the chart" in n for n in ctx.roofline.notes)


def test_session_file_round_trip_and_v1_files() -> None:
    session = flops_session()
    assert ProfileSession.from_json(session.to_json()) == session
    plain = json.loads(small_session().to_json())
    assert "flops" not in plain
    plain["schema_version"] = 1  # written before flops existed
    assert ProfileSession.from_json(json.dumps(plain)).flops is None


def test_chart_labels_do_not_pile_up_on_one_spot() -> None:
    session = small_session()
    same = [LayerWork(r.path, flops=10**6, bytes=10**5) for r in session.records]
    records = tuple(replace(r, self_cpu_us=Stat(100.0, 100.0, 100.0)) for r in session.records)
    work = WorkProfile(tuple(same), PEAK, 3 * 10**6, 3 * 10**5)
    lines = session_rooflines(replace(session, records=records, flops=work))
    svg = str(render_roofline(lines, PEAK))
    assert svg.count("<circle") == 3
    labels = [p for p in ("fc1", "act", "fc2") if f">{p}</text>" in svg]
    assert len(labels) == 2  # one above the spot, one below, the third only in its tooltip


def test_a_model_of_thousands_of_layers_lists_the_heaviest_in_the_roofline_table() -> None:
    base = big_session(leaves=300)
    layers = tuple(
        LayerWork(r.path, flops=1000 * (i + 1), bytes=4000, total_flops=1000 * (i + 1))
        for i, r in enumerate(base.records)
    )
    work = WorkProfile(layers, PEAK, forward_flops=10**9, forward_bytes=10**8)
    view = build_context(replace(base, flops=work)).roofline
    assert view is not None and len(view.rows) == MAX_ROWS
    assert {r.path for r in view.rows} == {r.path for r in base.records[-MAX_ROWS:]}
    assert any(f"{MAX_ROWS} of 300 layers with the most FLOPs" in n for n in view.notes)
    small = build_context(flops_session()).roofline
    assert small is not None and not any("most FLOPs" in n for n in small.notes)


def _roofline_line(path: str, intensity: float, gflops: float, self_us: float) -> LayerRoofline:
    return LayerRoofline(
        path, "Linear", 10**6, 10**5, self_us, intensity, gflops, None, None, None, "compute", ""
    )


def test_chart_labels_keep_off_the_roof_and_its_labels() -> None:
    """Layers near the compute peak (where the busiest sit) had their names drawn across the
    peak line and over "peak N GFLOP/s"; such a label goes below its dot, or is left off."""
    lines = [
        _roofline_line("blocks.0.mlp.fc_up", 50.0, 97.0, 300.0),  # just under the flat roof
        _roofline_line("blocks.1.mlp.fc_up", 400.0, 96.0, 250.0),  # under the peak's own label
        _roofline_line("blocks.2.attn.qkv", 9.0, 85.0, 200.0),  # just under the ridge
        _roofline_line("head", 2.0, 3.0, 100.0),  # far from the roof
    ]
    svg = str(render_roofline(lines, PEAK))
    (points,) = re.findall(r'<polyline points="([^"]+)"', svg)
    roof = [tuple(map(float, p.split(","))) for p in points.split()]
    texts = re.findall(r'<text x="([\d.]+)" y="([\d.]+)"( text-anchor="end")?>([^<]+)</text>', svg)
    roof_labels = [
        text_box(float(x), float(y), t, "end") for x, y, end, t in texts if end and "GB/s" in t
    ] + [text_box(float(x), float(y), t, "end") for x, y, end, t in texts if t.startswith("peak")]
    dots = {t: text_box(float(x), float(y), t) for x, y, end, t in texts if "." in t or t == "head"}
    assert "head" in dots and len(dots) >= 2  # some are labelled at all
    for name, box in dots.items():
        assert not _crosses(box, roof), name
        assert not any(_overlaps(box, other) for other in roof_labels), name
