"""The pages' picture and order: the icicle chart's layout (widths, nesting, module order,
colours, escaping) and the tree opened along the heavy path, rows in module order."""

from __future__ import annotations

import pytest

from hybridprof.reporting.notebook import notebook_page
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.icicle import GREY, PALETTE, class_colours, icicles, render_svg
from hybridprof.reporting.page.row_limits import HEAVY_ROWS, heavy_paths
from hybridprof.reporting.page.tree_table import RowView
from tests.report_page import page_data, page_rows
from tests.sessions import (
    HOSTILE,
    _plan,
    _session,
    backward_session,
    big_session,
    hostile_session,
    nested_session,
    op,
    record,
    small_session,
    target,
)


def test_each_block_is_as_wide_as_its_subtree_and_sits_in_its_parent() -> None:
    ctx = build_context(nested_session())
    (forward,) = ctx.icicles  # no backward measured: one chart
    blocks = {b.path: b for b in forward.blocks}
    # self times: root 50, blocks 30 each, conv 340, act 100 each: 990 us in the tree
    assert forward.total_us == pytest.approx(990.0)
    assert blocks[""].x0 == 0 and blocks[""].x1 == pytest.approx(1.0)
    assert blocks["blocks.0"].x1 - blocks["blocks.0"].x0 == pytest.approx(470 / 990)
    for block in forward.blocks:
        parent = next((b for b in forward.blocks if block.path.startswith(b.path + ".")), None)
        if block.path and parent is not None and "." not in block.path[len(parent.path) + 1 :]:
            assert parent.x0 <= block.x0 < block.x1 <= parent.x1 + 1e-9  # inside its parent
            assert block.depth == parent.depth + 1
    conv, act = blocks["blocks.0.conv"], blocks["blocks.0.act"]
    assert conv.x1 <= act.x0 + 1e-9  # module order, left to right
    assert blocks["blocks.0"].x1 <= blocks["blocks.1"].x0 + 1e-9
    assert conv.color == blocks["blocks.1.conv"].color != -1  # one class, one colour


def test_a_container_is_grey_and_the_backward_gets_its_own_chart() -> None:
    session = backward_session()
    charts = {c.key: c for c in build_context(session).icicles}
    assert set(charts) == {"forward", "backward"}
    back = {b.path: b for b in charts["backward"].blocks}
    assert back["fc1"].us == pytest.approx(2 * 520.0)  # the backward self times
    data = charts["backward"].data()
    assert data["key"] == "backward" and data["depth"] == 2
    first = data["blocks"][0]
    assert first[0] == 0 and first[2:4] == [0.0, 1.0] and first[5].endswith("ms")
    from tests.unit.reporting.test_complete_rows import complete_session

    (forward,) = icicles(build_context(complete_session()).rows, backward=False)
    container = next(b for b in forward.blocks if b.path == "blocks")
    assert container.color == -1 and GREY in str(render_svg(forward))


def test_the_static_chart_escapes_names_and_leaves_out_hairlines() -> None:
    (chart,) = build_context(hostile_session(), "pdf").icicles
    svg = str(chart.svg())
    assert HOSTILE not in svg and "&lt;" in svg
    assert svg.count("<rect") == len([b for b in chart.blocks if (b.x1 - b.x0) * 1000 >= 0.6])
    assert any(color in svg for color in PALETTE)


def test_the_page_sends_the_blocks_and_a_big_model_stays_small() -> None:
    ctx = build_context(big_session(leaves=300))
    (chart,) = ctx.icicles
    assert len(chart.blocks) == len([r for r in ctx.rows if not r.outside])
    page = notebook_page(big_session(leaves=300), max_rows=80)
    rows = list(page_rows(page))
    data = page_data(page)
    indices = {block[0] for block in data["icicle"][0]["blocks"]}
    assert indices <= set(range(len(rows)))  # the notebook's blocks point at the rows it keeps


def test_rows_stay_in_module_order_and_open_along_the_heavy_path() -> None:
    session = small_session()  # fc1 520 us, act 100 us, fc2 300 us: module order fc1, act, fc2
    assert [r.path for r in build_context(session).rows] == ["", "fc1", "act", "fc2"]
    assert list(page_rows(notebook_page(session))) == ["", "fc1", "act", "fc2"]
    big = build_context(big_session(leaves=300))
    rows = list(big.rows)
    by_path = {r.path: r for r in rows}
    heaviest = max((r for r in rows if r.profiled and not r.has_children), key=lambda r: r.self_us)
    parent = heaviest.parent
    while parent is not None:  # every ancestor of the heaviest layer opens
        assert not by_path[parent].collapsed, parent
        parent = by_path[parent].parent
    assert any(r.collapsed for r in rows)  # the rest of a big tree stays folded


def wide_and_tall() -> list[RowView]:
    """Where the walk and the ancestor rule disagree: `wide` holds 78% of the iteration in 70
    light leaves (5 us each, under wide.inner), `tall` one heavy leaf (100 us), the heaviest
    layer by its own time. Opening wide shows more than HEAVY_ROWS rows, so only the walk down
    each level's heaviest row (by subtree) opens it."""
    targets = [target("", "Net", leaf=False)]
    records = [record("", "Net", 0.0, 450.0, is_leaf=False)]
    containers = (("wide", 350.0), ("wide.inner", 350.0), ("tall", 100.0))
    for path, total in containers:
        targets.append(target(path, "Block", leaf=False))
        records.append(record(path, "Block", 0.0, total, is_leaf=False))
    leaves = [(f"wide.inner.{i}", 5.0) for i in range(70)] + [("tall.big", 100.0)]
    for path, us in leaves:
        targets.append(target(path, "Linear"))
        records.append(record(path, "Linear", us, us, ops=(op("aten::addmm", 1, us, us),)))
    session = _session(_plan("Net", tuple(targets)), tuple(records))
    return list(build_context(session).rows)


def test_the_heavy_path_walk_opens_the_heaviest_subtree_down_to_its_leaves() -> None:
    rows = wide_and_tall()
    by_path = {r.path: r for r in rows}
    assert by_path["wide"].pct > by_path["tall"].pct >= by_path["tall.big"].pct
    assert len(rows) > HEAVY_ROWS
    # the walk: "", wide, wide.inner; the ancestor rule: tall (the heaviest layer's parent)
    assert heavy_paths(rows) == {"", "wide", "wide.inner", "tall"}


COMMON = (
    "Linear", "Conv2d", "BatchNorm2d", "LayerNorm", "ReLU", "GELU", "Dropout", "Embedding",
    "MultiheadAttention", "Sequential", "ModuleList", "Attention", "MLP", "Block",
    "CausalSelfAttention", "Conv1D", "MaxPool2d", "AdaptiveAvgPool2d", "SiLU", "Softmax",
)  # fmt: skip


def test_no_two_of_the_common_classes_share_a_colour_in_one_chart() -> None:
    colours = class_colours({name: float(i + 1) for i, name in enumerate(COMMON)})
    assert len(set(colours.values())) == len(COMMON) == 20  # crc32 % 10 gave Conv2d BatchNorm2d one
    assert all(0 <= i < len(PALETTE) for i in colours.values())
    assert GREY not in PALETTE and len(set(PALETTE)) == len(PALETTE)
    # a common torch class keeps its colour whatever else the chart holds
    assert class_colours({"Linear": 1.0, "Block": 5.0})["Linear"] == colours["Linear"]
    # the classes of one model: Attention and MLP apart from each other and from the rest
    gpt = class_colours({"GPT": 9.0, "Block": 8.0, "Attention": 5.0, "MLP": 4.0, "Linear": 3.0})
    assert len(set(gpt.values())) == 5


def test_parents_are_told_from_leaves_and_blocks_carry_their_times() -> None:
    (forward,) = build_context(nested_session()).icicles
    blocks = {b.path: b for b in forward.blocks}
    parent, leaf = blocks["blocks.0"], blocks["blocks.0.conv"]
    assert (parent.kind, leaf.kind) == (1, 0) and parent.color != leaf.color
    assert parent.self_us == pytest.approx(30.0) and parent.us == pytest.approx(470.0)
    assert parent.tip() == "blocks.0 (Block): total 470.000us, self 30.000us, 47.5% of the pass"
    svg = str(render_svg(forward))
    assert 'fill-opacity="0.5"' in svg  # the parents: lighter, outlined
    assert "total 470.000us, self 30.000us, 47.5% of the pass" in svg
    assert ">0 470.000us</text>" in svg  # its name and time where they fit (the PDF has no tips)
    data = forward.data()
    assert data["palette"] == list(PALETTE)
    row = next(x for x in data["blocks"] if x[0] == parent.row)
    assert row[7:] == ["30.000us", 1]
