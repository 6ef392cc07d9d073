"""One headline the rows add up to, in every view (a hand-made busy session).

On a busy machine every iteration loses its core once, in a different layer each time: each
row's median leaves the pause out, the median iteration and a parent's measured total keep it.
The session here has that shape (measured totals and iterations far above what their rows add
up to); every view must state the rows' sum as the iteration, and a parent's total as its
subtree's rows.
"""

from __future__ import annotations

import csv
import io
import math
import re
from dataclasses import replace

import pytest

from hybridprof.analysis.layer_table import LayerRow, LayerTable, layer_table
from hybridprof.cli.terminal import summary_line, where_lines
from hybridprof.datamodel import (
    Calibration,
    OptimizerPart,
    OptimizerRecord,
    ProfileSession,
    Series,
    Stat,
)
from hybridprof.diff import diff_sessions
from hybridprof.reporting.dataframe import render_csv, session_frame
from hybridprof.reporting.notebook import notebook_page
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.diff_text import render_diff_text
from hybridprof.reporting.text.fitted_table import TableChoice, fitted_table
from hybridprof.reporting.text.text_table import render_text
from tests.report_page import page_rows
from tests.unit.reporting.test_complete_rows import complete_session

UNITS = {"us": 1.0, "ms": 1e3, "s": 1e6}
PAUSE_US = 4000.0  # a scheduler's slice, kept by every measured total and by every iteration


def us(text: str) -> float:
    """The first time in a cell (`1.920ms ±3%`: 1920.0); 0 for an empty cell."""
    found = re.search(r"(\d+(?:\.\d+)?)(us|ms|s)\b", text)
    return float(found.group(1)) * UNITS[found.group(2)] if found else 0.0


def _part(name: str, values: tuple[float, ...], within: str = "", calls: int = 0) -> OptimizerPart:
    return OptimizerPart(name, Stat.of(values), calls, within, Series.of(values))


def busy_session() -> ProfileSession:
    """A training step whose measured totals and iterations each hold a pause its rows do not:
    backward, an optimizer (a step with a param group, zero_grad) and the outside row."""
    base = complete_session()
    records = tuple(
        replace(
            r,
            total_cpu_us=Stat(r.total_cpu_us.median + PAUSE_US, 0.0, 9000.0),
            backward_self_cpu_us=Stat(2 * r.self_cpu_us.median, 0.0, 3 * r.self_cpu_us.median),
            backward_total_cpu_us=Stat(2 * r.total_cpu_us.median + PAUSE_US, 0.0, 9000.0),
        )
        for r in base.records
    )
    parts = (
        _part("step", (300.0, 310.0, 290.0), calls=3),
        _part("zero_grad", (20.0, 20.0, 20.0), calls=3),
        _part("SGD group 0", (250.0, 240.0, 260.0), "step"),
    )
    optimizer = OptimizerRecord(("SGD",), 3, Stat.of((900.0,) * 3), parts=parts)
    return replace(
        base,
        records=records,
        backward=True,
        optimizer=optimizer,
        iteration_cpu_us=(9000.0, 9100.0, 8900.0),
    )


def test_the_headline_is_the_sum_of_the_rows_own_figures() -> None:
    table = layer_table(busy_session())
    own = sum(r.own_us for r in table.rows)
    # forward self 960, backward twice that, the optimizer's 320, the outside 40
    assert table.iteration_us == pytest.approx(own) == pytest.approx(3240.0)
    assert table.measured_iteration_us == 9000.0  # kept beside it, not shown as the headline
    assert sum(r.pct_self or 0.0 for r in table.rows) == pytest.approx(100.0)


def _subtree(table: LayerTable, row: LayerRow) -> list[LayerRow]:
    prefix = f"{row.path}." if row.path else ""
    return [r for r in table.tree() if r.path == row.path or r.path.startswith(prefix)]


def test_a_parents_totals_are_its_subtrees_rows() -> None:
    table = layer_table(busy_session())
    for row in table.tree():
        assert row.total_cpu is not None and row.backward_total_cpu_us is not None
        rows = _subtree(table, row)
        forward = sum(r.self_cpu.median for r in rows if r.self_cpu is not None)
        backward = sum(r.backward_self_cpu_us or 0.0 for r in rows)
        assert row.total_cpu.median == pytest.approx(forward), row.path
        assert row.backward_total_cpu_us == pytest.approx(backward), row.path
        assert row.share_us == pytest.approx(forward + backward), row.path
    step = next(r for r in table.optimizer() if r.name == "step")
    assert step.total_cpu is not None and step.total_cpu.median == pytest.approx(300.0)
    head = table.optimizer()[0]
    assert head.total_cpu is not None and head.total_cpu.median == pytest.approx(320.0)


def test_a_leafs_total_is_its_self_time_interval_and_all() -> None:
    table = layer_table(busy_session())
    leaf = next(r for r in table.rows if r.path == "blocks.0.conv")
    assert leaf.total_cpu == leaf.self_cpu


def test_the_terminal_rows_add_up_to_its_headline() -> None:
    session = busy_session()
    text = fitted_table(session, TableChoice(width=200)).text
    lines = text.splitlines()
    header = [c.strip() for c in lines[0].split("|")]
    cells = [[c.strip() for c in line.split("|")] for line in lines[2:]]
    own = sum(
        us(row[header.index("Self CPU")]) + us(row[header.index("Self bwd")]) for row in cells
    )
    found = re.search(
        r"training steps, (\S+) profiled CPU each, the rows' sum", summary_line(session)
    )
    assert found is not None, summary_line(session)
    assert own == pytest.approx(us(found.group(1)), rel=0.01)
    root = cells[0]
    extras = [row for row in cells if row[0].startswith(("(optimizer)", "(outside"))]
    whole = us(root[header.index("Total CPU")]) + us(root[header.index("Total bwd")])
    whole += sum(us(row[header.index("Total CPU")]) for row in extras)
    assert whole == pytest.approx(us(found.group(1)), rel=0.01)


def test_the_terminal_says_the_statistic_and_the_measured_median_once() -> None:
    lines = where_lines(busy_session(), None, [], None)
    assert lines[1] == "each row is its median over 3 iterations; totals are the sums of their rows"
    assert lines[2] == (
        "the median iteration took 9.000ms as measured, 5.760ms of it waiting for a CPU or in no "
        "row's median: the rows' sum (3.240ms) is the headline"
    )


def test_a_compensated_run_states_its_median_iteration_with_the_cost_out_and_as_measured() -> None:
    """The median iteration beside a compensated headline is compensated too: it must not be
    labelled "as measured" (it read 662us "as measured" where 837us was measured)."""
    calibration = Calibration(1.0, 20.0, 30.0, "measured", "2026-12-03T12:00:00+00:00")
    session = replace(busy_session(), calibration=calibration)
    table = layer_table(session)
    assert table.raw_iteration_us is not None and table.raw_iteration_us > table.iteration_us
    lines = where_lines(session, None, [], None)
    gap = next(line for line in lines if line.startswith("the median iteration took"))
    found = re.search(r"took (\S+) with the profiler's cost out \((\S+) as measured\)", gap)
    assert found is not None, gap
    assert us(found.group(2)) == pytest.approx(9000.0, abs=0.01)
    assert us(found.group(1)) == pytest.approx(table.measured_iteration_us, abs=0.01)
    assert table.measured_iteration_us < 9000.0


def test_a_quiet_run_says_no_gap() -> None:
    session = complete_session()  # its iterations (1 ms) are what its rows add up to
    lines = where_lines(session, None, [], None)
    assert not any("as measured" in line for line in lines)


def _header_total(page: str) -> float:
    found = re.search(r"<dt>Total profiled time</dt><dd[^>]*>([^<]+)", page)
    assert found is not None
    assert "the rows&#39; sum" in found.group(1)
    return us(found.group(1))


@pytest.mark.parametrize("render", [render_html, notebook_page], ids=["html", "notebook"])
def test_the_page_header_is_its_rows_sum(render) -> None:  # type: ignore[no-untyped-def]
    page = render(busy_session())
    rows = page_rows(page)
    own = sum(
        us(r.cells.get("Self CPU", "")) + us(r.cells.get("Backward self", ""))
        for r in rows.values()
    )
    assert own == pytest.approx(_header_total(page), rel=0.01)
    root = rows[""].cells
    assert us(root["Total CPU"]) + us(root["Backward total"]) == pytest.approx(2880.0, rel=0.01)
    assert "9.000ms as measured" in page


def test_the_csv_rows_add_up_to_the_headline() -> None:
    session = busy_session()
    rows = list(csv.DictReader(io.StringIO(render_csv(session))))

    def figure(row: dict[str, str], name: str) -> float:
        return float(row[name]) if row[name] else 0.0

    own = sum(figure(r, "self_cpu_us") + figure(r, "backward_self_cpu_us") for r in rows)
    headline = layer_table(session).iteration_us
    assert own == pytest.approx(headline, rel=0.01)
    assert sum(figure(r, "pct_self") for r in rows) == pytest.approx(100.0, rel=0.01)
    tops = [r for r in rows if r["depth"] == "0"]  # the root, the optimizer, the outside row
    whole = sum(figure(r, "total_cpu_us") + figure(r, "backward_total_cpu_us") for r in tops)
    assert whole == pytest.approx(headline, rel=0.01)


def test_the_dataframe_rows_add_up_to_its_headline() -> None:
    frame = session_frame(busy_session())
    own = frame["self_cpu_us"].sum() + frame["backward_self_cpu_us"].fillna(0.0).sum()
    assert own == pytest.approx(frame.attrs["iteration_us"], rel=0.01)
    assert frame.attrs["measured_iteration_us"] == 9000.0
    blocks0 = frame[frame["path"] == "blocks.0"].iloc[0]
    assert blocks0["total_cpu_us"] == pytest.approx(600.0)  # its rows, not its 4.6 ms measured
    assert not math.isnan(blocks0["backward_total_cpu_us"])


def test_the_text_report_totals_are_their_rows() -> None:
    lines = render_text(busy_session()).splitlines()
    blocks0 = next(line for line in lines if "── 0 " in line)
    cells = [c.strip() for c in blocks0.split("|")]
    assert cells[2] == "600.000us" and cells[4] == "1.200ms"


def test_diff_states_each_runs_headline_as_the_whole_iteration() -> None:
    base = busy_session()
    slower = replace(base, iteration_cpu_us=(9900.0, 10000.0, 9800.0))
    result = diff_sessions(base, slower)
    assert result.total.base == pytest.approx(layer_table(base).iteration_us)
    assert result.total.new == pytest.approx(layer_table(slower).iteration_us)
    assert "whole iteration: 3.240ms -> 3.240ms" in render_diff_text(result)
