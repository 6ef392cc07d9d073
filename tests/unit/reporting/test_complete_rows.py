"""Rows of a complete selection (hand-made session): parents with totals, a container that never
runs summed from its children, the (outside modules) row, and shares from one denominator."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hybridprof.analysis.tree import tree_rows
from hybridprof.datamodel import Stat
from hybridprof.reporting.dataframe import session_frame
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.row_limits import open_depth
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.text.text_table import render_text
from tests.report_page import page_rows
from tests.sessions import _plan, _session, record, target

SELF_TOTAL = {  # path: (self, total); iteration 1000 us, 40 us outside every module
    "": (40.0, 960.0),
    "blocks.0": (30.0, 600.0),
    "blocks.0.conv": (400.0, 400.0),
    "blocks.0.act": (170.0, 170.0),
    "blocks.1": (20.0, 320.0),
    "blocks.1.conv": (200.0, 200.0),
    "blocks.1.act": (100.0, 100.0),
}


def complete_session():  # type: ignore[no-untyped-def]
    targets = [target("", "Net", leaf=False)]
    blocks = replace(target("blocks", "ModuleList", leaf=False), has_forward=False)
    targets.append(replace(blocks, selected=False, reason="container without a forward"))
    records = []
    for path, (self_us, total_us) in SELF_TOTAL.items():
        leaf = path.endswith(("conv", "act"))
        cls = "Net" if not path else ("Block" if not leaf else path.rsplit(".", 1)[-1].title())
        if path:
            targets.append(replace(target(path, cls, leaf=leaf), selected=True))
        records.append(record(path, cls, self_us, total_us, is_leaf=leaf, calls=3))
    outside = Stat(40.0, 35.0, 50.0)
    return _session(_plan("Net", tuple(targets)), tuple(records), outside_cpu_us=outside)


def test_a_container_without_forward_gets_its_childrens_totals() -> None:
    rows = {r.path: r for r in tree_rows(complete_session())}
    blocks = rows["blocks"]
    assert blocks.derived and blocks.record is not None
    assert blocks.record.total_cpu_us.median == 600.0 + 320.0
    assert blocks.record.self_cpu_us.median == 0.0 and blocks.record.calls == 0
    assert not rows["blocks.0"].derived


def test_text_table_shows_every_parent_total_and_the_outside_row() -> None:
    lines = render_text(complete_session()).splitlines()
    blocks = next(line for line in lines if line.startswith("├── blocks ") or "── blocks " in line)
    cells = [c.strip() for c in blocks.split("|")]
    assert cells[1:] == ["", "920.000us", ""]  # no self time or calls of its own: never runs
    assert lines[-1].split("|")[0].strip() == "(outside modules)"
    assert [c.strip() for c in lines[-1].split("|")[1:3]] == ["40.000us", "40.000us"]
    assert "(outside" not in render_text(complete_session(), outside_row=False)


def test_self_shares_add_up_to_the_whole_iteration() -> None:
    frame = session_frame(complete_session())
    assert frame["pct_self"].sum() == pytest.approx(100.0)
    assert frame["self_cpu_us"].sum() == pytest.approx(1000.0)  # the outside row included
    root = frame[frame["path"] == ""].iloc[0]
    assert root["pct_total"] == pytest.approx(96.0) and root["pct_self"] == pytest.approx(4.0)
    outside = frame.iloc[-1]
    assert outside["path"] == "(outside modules)" and outside["calls"] == 0
    blocks = frame[frame["path"] == "blocks"].iloc[0]
    assert blocks["total_cpu_us"] == 920.0 and blocks["pct_self"] == 0.0


def test_narrowed_selection_names_the_outside_row_for_what_it_holds() -> None:
    session = complete_session()
    leaves = replace(session, records=tuple(r for r in session.records if r.is_leaf))
    assert session_frame(leaves).iloc[-1]["path"] == "(outside profiled modules)"


def test_html_rows_put_heavy_children_first_and_open_to_the_heavy_blocks() -> None:
    ctx = build_context(complete_session())
    order = [r.path for r in ctx.rows]
    assert order[:3] == ["", "blocks", "blocks.0"]
    assert order.index("blocks.0.conv") < order.index("blocks.0.act") < order.index("blocks.1")
    assert order[-1] == "(outside modules)" and ctx.rows[-1].outside
    assert sum(r.self_pct for r in ctx.rows) == pytest.approx(100.0)
    # root (96%) and blocks (92%) hold most of the time: opened; the blocks show, collapsed
    # once the rows shown would pass the limit
    assert open_depth(list(ctx.rows)) >= 2
    collapsed = {r.path for r in ctx.rows if r.collapsed}
    assert not {"", "blocks"} & collapsed
    rows = page_rows(render_html(complete_session()))
    assert not rows[""].collapsed and rows[""].has_children  # the page opens the root
    assert list(rows)[-1] == "(outside modules)" and rows["(outside modules)"].outside


def test_open_depth_stops_where_many_light_rows_would_show() -> None:
    ctx = build_context(complete_session())
    rows = [replace(r, pct=10.0) for r in ctx.rows]  # nothing dominant
    assert open_depth(rows) == 3  # few rows: the whole tree opens
    many = rows + [replace(rows[3], path=f"x{i}", parent="", depth=1) for i in range(40)]
    assert open_depth(many) == 0


def test_shares_stay_whole_when_pauses_inflate_the_median_iteration() -> None:
    # A busy machine: each iteration paused in a different layer, so the median iteration (5 ms)
    # is far above the rows' medians (1 ms); the shares are of what the rows account for.
    session = replace(complete_session(), iteration_cpu_us=(5000.0, 5100.0, 4900.0))
    frame = session_frame(session)
    assert frame["pct_self"].sum() == pytest.approx(100.0)
    root = frame[frame["path"] == ""].iloc[0]
    assert root["pct_total"] == pytest.approx(96.0)  # the sum of its rows' shares
    header = {h.label: h for h in build_context(session).header}
    total = header["Total profiled time"]
    assert total.value == "1.000ms per iteration (the rows' sum)"  # one figure in the header...
    measured = "the median iteration took 5.000ms as measured (4.000ms more: waiting for a CPU"
    assert measured in total.note  # ...the measured one beside it, explained
    html = render_html(session)
    assert measured in html
    assert '<p class="footnote">* Each row is its median over 3 iterations, a total' in html
