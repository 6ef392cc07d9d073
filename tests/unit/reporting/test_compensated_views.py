"""The views of a compensated table: the compensated headline with one line saying what was
taken out and where the raw figures are; raw columns in the HTML, text export and frames, none in
the PDF (its parts must fit the page); a raw table says nothing of the kind."""

from __future__ import annotations

from dataclasses import replace

from hybridprof.analysis.layer_table import build_layer_table, layer_table
from hybridprof.datamodel import Calibration, ProfileSession, Stat
from hybridprof.reporting.layer_columns import RAW_KEYS
from hybridprof.reporting.page.charts import session_charts
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.page.tree_table import page_columns
from hybridprof.reporting.text.text_report import render_text_report
from hybridprof.reporting.trust import headline_note, statistic_line
from tests.sessions import small_session

COSTS = Calibration(2.0, 1.0, 3.0, "measured", "2026-12-03T08:00:00+00:00")


def summed(calibration: Calibration | None) -> ProfileSession:
    return replace(small_session(), outside_cpu_us=Stat(20.0, 18.0, 22.0), calibration=calibration)


def test_the_statistic_line_says_what_was_taken_out_and_where_the_raw_figures_are() -> None:
    table = build_layer_table(summed(COSTS))
    line = statistic_line(table)
    assert "less the profiler's own cost (2.000us per op, 4.000us per layer call" in line
    assert f"{table.raw_iteration_us:.3f}us raw" in line and line.count("\n") == 0
    assert "less the profiler's own cost" in headline_note(table)
    raw = build_layer_table(summed(None))
    assert "profiler" not in statistic_line(raw) and "profiler" not in headline_note(raw)


def test_the_html_has_raw_columns_and_the_pdf_none() -> None:
    session = summed(COSTS)
    table = build_layer_table(session)
    html_keys = [c.key for c in page_columns(table)]
    assert {"raw-self", "raw-total"} <= set(html_keys)
    assert html_keys.index("raw-self") == html_keys.index("total") + 1
    assert not set(RAW_KEYS) & {c.key for c in page_columns(table, pdf=True)}
    page = render_html(session)
    assert "Raw self" in page and "less the profiler&#39;s own cost" in page
    assert not {"raw-self"} & {c.key for c in page_columns(build_layer_table(summed(None)))}


def test_the_text_export_has_the_raw_times_beside() -> None:
    text = render_text_report(summed(COSTS))
    assert "Self CPU (raw)" in text and "CPU total (raw)" in text
    assert "times: compensated, less the profiler's own cost" in text
    # An op's figures are raw: they sit under the raw columns, where they add up to the layer's.
    relu = [c.strip() for c in next(x for x in text.splitlines() if "aten::relu" in x).split("|")]
    assert relu[1:5] == ["", "100.000us", "", "100.000us"]
    plain = render_text_report(summed(None))
    assert "(raw)" not in plain and "compensated" not in plain


def test_the_charts_show_the_tables_compensated_figures() -> None:
    """The report's bar charts once read the raw records (0.fc 78us in the chart beside 49us in
    the table): each bar is now its row's figure."""
    session = summed(COSTS)
    table = layer_table(session)
    shown = {row.path: row.self_cpu.median for row in table.rows if row.self_cpu is not None}
    top, by_class = session_charts(session)[:2]
    assert top.bars and all(bar.values[0] == shown[bar.label] for bar in top.bars)
    raw = {r.path: r.self_cpu_us.median for r in session.records}
    assert any(raw[bar.label] != bar.values[0] for bar in top.bars)
    classes = {r.path: r.class_name for r in session.records}
    for bar in by_class.bars:
        paths = [p for p, name in classes.items() if name == bar.label]
        assert bar.values[0] == sum(shown[p] for p in paths)
