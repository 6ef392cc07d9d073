"""The layer table (`analysis.layer_table`): every figure of every row worked out once, and every
format (text, HTML/PDF context, DataFrame, terminal) showing those same figures."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from hybridprof.analysis.layer_table import CI_VALUES, LayerRow, layer_table, profiled_layers
from hybridprof.analysis.tree import CutRows, heaviest_with_ancestors, with_cuts
from hybridprof.datamodel import IterationSeries, Series, Stat
from hybridprof.reporting.dataframe import session_frame
from hybridprof.reporting.format import format_bytes
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.tree_table import cell_text
from hybridprof.reporting.text.text_table import render_text
from hybridprof.reporting.trust import timing_text
from tests.sessions import (
    backward_session,
    big_session,
    device_session,
    hostile_session,
    memory_session,
    nested_session,
    small_session,
)
from tests.unit.reporting.test_complete_rows import complete_session


def test_rows_follow_the_tree_with_kinds_and_the_outside_row_last() -> None:
    table = layer_table(complete_session())
    kinds = {r.path: r.kind for r in table.rows}
    assert kinds["blocks"] == "container" and kinds["blocks.0.conv"] == "layer"
    assert table.rows[-1].kind == "outside" and table.outside() is table.rows[-1]
    assert [r.path for r in table.tree()][:3] == ["", "blocks", "blocks.0"]
    assert len(table.layers()) == len(complete_session().records)


def test_a_container_has_totals_but_no_figures_of_its_own() -> None:
    blocks = next(r for r in layer_table(complete_session()).rows if r.path == "blocks")
    assert blocks.self_cpu is None and blocks.calls_per_iteration is None
    assert blocks.total_cpu is not None and blocks.total_cpu.median == 920.0
    assert blocks.own_us == 0.0 and blocks.pct_self == 0.0
    assert blocks.pct_total == pytest.approx(92.0)


def test_own_shares_add_up_to_the_whole_iteration() -> None:
    table = layer_table(complete_session())
    assert sum(r.pct_self or 0.0 for r in table.rows) == pytest.approx(100.0)
    assert table.shares_of_us == pytest.approx(1000.0)


def _with_series(session, values_per_path):  # type: ignore[no-untyped-def]
    records = tuple(
        replace(r, per_iteration=IterationSeries(Series.of(values_per_path(r))))
        for r in session.records
    )
    return replace(session, records=records, iterations=CI_VALUES + 2)


def test_intervals_are_computed_once_and_shown_alike_by_every_format() -> None:
    spread = [0.9, 0.95, 1.0, 1.0, 1.0, 1.05, 1.1, 1.2]
    session = _with_series(complete_session(), lambda r: [r.self_cpu_us.median * s for s in spread])
    table = layer_table(session)
    conv = next(r for r in table.rows if r.path == "blocks.0.conv")
    assert conv.self_cpu is not None and conv.self_cpu.interval is not None
    assert conv.self_cpu.interval_pct() == pytest.approx(20.0)  # 8 values: [min, max]
    text = render_text(session)
    assert timing_text(conv.self_cpu) in text and "±20%" in timing_text(conv.self_cpu)
    view = next(r for r in build_context(session).rows if r.path == "blocks.0.conv")
    assert view.self_cpu == timing_text(conv.self_cpu)
    frame = session_frame(session).set_index("path")
    assert frame.loc["blocks.0.conv", "self_cpu_us_ci_low"] == conv.self_cpu.interval.low
    assert frame.loc["blocks.0.conv", "pct_self"] == conv.pct_self


def test_too_few_iterations_give_no_interval() -> None:
    session = _with_series(complete_session(), lambda r: [r.self_cpu_us.median] * 3)
    session = replace(session, iterations=3)
    assert all(r.self_cpu is None or r.self_cpu.interval is None for r in layer_table(session).rows)


def test_backward_and_memory_figures_reach_every_format() -> None:
    for session in (backward_session(), memory_session()):
        table = layer_table(session)
        frame = session_frame(session).set_index("path")
        views = {v.path: v for v in build_context(session).rows}
        for row in table.layers():
            assert row.record is not None
            if table.has_backward:
                assert frame.loc[row.path, "backward_self_cpu_us"] == row.backward_self_cpu_us
                assert views[row.path].backward_us == row.backward_self_cpu_us
            if table.has_memory:
                assert frame.loc[row.path, "self_cpu_mem"] == row.self_cpu_mem
                assert views[row.path].layer.self_cpu_mem == row.self_cpu_mem
                memory = next(c for c in build_context(session).columns if c.key == "mem-self")
                assert cell_text(views[row.path], memory) == format_bytes(row.self_cpu_mem or 0)


def own_us(row: LayerRow) -> float:
    return row.own_us


def test_the_heaviest_layers_are_kept_with_their_ancestors() -> None:
    table = layer_table(complete_session())
    # 4 rows ("", blocks, blocks.0, blocks.0.conv) and 2 lines for the rows left out
    for limit in (5, 6, 7):  # blocks.1.conv would take 2 rows more: 8 lines
        shown, kept = heaviest_with_ancestors(table.tree(), table.layers(), own_us, limit)
        assert [r.path for r in shown] == ([] if limit < 6 else ["blocks.0.conv"])
    assert kept == {"", "blocks", "blocks.0", "blocks.0.conv"}
    lines = with_cuts(table.tree(), kept)
    assert [x.label if isinstance(x, CutRows) else x.path for x in lines] == [
        "",
        "blocks",
        "blocks.0",
        "blocks.0.conv",
        "... 1 more",  # blocks.0.act, in its place under blocks.0
        "... 3 more",  # blocks.1 and its two layers, under blocks
    ]
    assert [x.depth for x in lines[4:]] == [3, 2]
    _, nothing = heaviest_with_ancestors(table.tree(), table.layers(), own_us, 5)
    assert [str(x) for x in with_cuts(table.tree(), nothing)] == [str(CutRows(None, 0, 8, ""))]
    every, _ = heaviest_with_ancestors(table.rows, table.layers(), own_us, 100)
    assert every == sorted(table.layers(), key=lambda r: -r.own_us)


def test_an_ancestor_that_is_no_row_is_not_kept() -> None:
    table = layer_table(complete_session())
    leaf = next(r for r in table.layers() if r.path == "blocks.0.conv")
    rows = [r for r in table.rows if r.path != "blocks"]  # a parent missing from the rows
    _, kept = heaviest_with_ancestors(rows, [leaf], own_us, 10)
    assert kept == {"blocks.0", "blocks.0.conv"}  # the walk up stops where the rows end


def test_an_unprofiled_parent_has_nothing_measured() -> None:
    session = complete_session()
    narrowed = replace(session, records=tuple(r for r in session.records if r.is_leaf))
    table = layer_table(narrowed)
    root = table.rows[0]
    assert root.kind == "unprofiled" and root.total_cpu is None and root.pct_total is None
    assert table.rows[-1].name == "(outside profiled modules)"
    assert Stat(40.0, 35.0, 50.0) == narrowed.outside_cpu_us


def test_a_session_s_table_is_built_once_and_kept_while_the_session_lives() -> None:
    import gc

    from hybridprof.analysis import layer_table as module

    session = complete_session()
    first = layer_table(session)
    assert layer_table(session) is first  # the same table, not a rebuild
    twin = complete_session()  # equal, but another object: its own table
    assert twin == session and layer_table(twin) is not first and layer_table(twin) == first
    key = id(session)
    assert key in module._TABLES
    del session, first
    gc.collect()
    assert key not in module._TABLES  # the table went with its session


@pytest.mark.parametrize(
    "make",
    [
        small_session,
        nested_session,
        backward_session,
        device_session,
        memory_session,
        hostile_session,
        complete_session,
        lambda: big_session(200),
    ],
)
def test_the_profiled_layers_alone_are_the_tables_layer_rows(make: Any) -> None:
    session = make()
    table = layer_table(session)
    alone = profiled_layers(session)
    assert {r.path: r for r in alone.rows} == {r.path: r for r in table.layers()}
    assert len(alone.rows) == len(table.layers()) and alone.iteration_us == table.iteration_us
