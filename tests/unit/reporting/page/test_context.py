"""The template context: header, rows, heat, charts, findings and the PDF's stated limits."""

from __future__ import annotations

import dataclasses

import pytest

from hybridprof.reporting.page.charts import session_charts
from hybridprof.reporting.page.context import build_context
from tests.report_page import context_cells
from tests.sessions import (
    backward_session,
    big_session,
    device_session,
    memory_session,
    nested_session,
    small_session,
)


def _header(session_ctx: object) -> dict[str, str]:
    return {h.label: h.value for h in session_ctx.header}  # type: ignore[attr-defined]


def test_header_names_the_run() -> None:
    header = _header(build_context(small_session()))
    assert header["Model file"] == "nets.py"
    assert header["Entry"] == "make_net"
    assert header["Root class"] == "Net"
    assert header["Parameters"] == "1,200"
    assert header["torch"] == "2.13.0+cpu"
    assert header["Device"] == "cpu"
    assert header["Threads"] == "1"
    assert header["Strategy"] == "session"
    assert header["Iterations"] == "2 warm-up, 3 measured"
    assert header["Total profiled time"].startswith("1.000ms")


def test_interrupted_run_says_so() -> None:
    session = dataclasses.replace(
        small_session(), interrupted=True, iterations=1, requested_iterations=3
    )
    assert "interrupted; 3 requested" in _header(build_context(session))["Iterations"]


def test_rows_are_formatted_and_keep_raw_numbers() -> None:
    ctx = build_context(small_session())
    rows = {r.path: r for r in ctx.rows}
    assert list(rows) == ["", "fc1", "act", "fc2"]  # module order, as the model defines it
    fc1, shown = rows["fc1"], context_cells(ctx, "fc1")
    assert (shown["self"], shown["total"], shown["subtree-share"]) == (
        "520.000us",
        "580.000us",
        "58.0%",
    )
    assert fc1.self_cpu == "520.000us" and shown["spread"] == "468.000us–572.000us"
    assert fc1.self_us == 520.0 and shown["params"] == "1,000"
    # 3 calls over the session's 3 iterations: shown per iteration, like the times
    assert (fc1.layer.calls_per_iteration, shown["calls"]) == (1.0, "1")
    assert fc1.layer.source is not None and fc1.layer.source.short() == "nets.py:8"
    assert fc1.heat == 5 and rows["act"].heat == 1
    root = rows[""]
    assert not root.profiled and root.has_children and root.name == "Net"
    assert rows["act"].parent == ""


def test_device_and_backward_columns_follow_the_session() -> None:
    ctx = build_context(device_session())
    assert ctx.has_device and not ctx.has_backward
    assert context_cells(ctx, "fc1")["dev-self"] == "260.000us"
    bwd = build_context(backward_session())
    assert bwd.has_backward
    assert context_cells(bwd, "fc1")["bwd-self"] == "1.040ms"


def test_charts_top_layers_by_class_and_backward() -> None:
    charts = {c.key: c for c in session_charts(backward_session())}
    assert [b.label for b in charts["top_layers"].bars] == ["fc1", "fc2", "act"]
    assert [(b.label, b.values) for b in charts["by_class"].bars] == [
        ("Linear", (820.0,)),
        ("ReLU", (100.0,)),
    ]
    assert charts["forward_backward"].bars[0].values == (520.0, 1040.0)
    assert "forward_backward" not in {c.key for c in session_charts(small_session())}
    assert charts["top_layers"].svg.count("<rect") == 3


def test_findings_compat_and_never_called() -> None:
    ctx = build_context(nested_session())
    kinds = [f.kind for f in ctx.findings]
    assert kinds == ["never_called", "inline_ops", "alias"]
    inline = ctx.findings[1]
    assert (inline.path, inline.where) == ("blocks.0", "nets.py:44")
    assert ctx.never_called == ("head",)
    assert ("raw_events", "kineto", "kineto_results.events() is readable") in ctx.compat
    assert {s.path for s in ctx.sources} >= {"blocks.0.conv", "blocks.1.act"}


def test_html_context_carries_every_op_as_compact_json() -> None:
    ctx = build_context(small_session(), "html")
    ops = ctx.data["ops"]
    assert set(ops) == {"fc1", "act", "fc2"}
    # device time and memory are left empty when the session has no such columns to show
    assert ops["fc1"][0] == ["aten::addmm", 3, "500.000us", "550.000us", "", "", False]
    assert ctx.op_tables == ()
    with_memory = build_context(memory_session(), "html").data["ops"]
    assert with_memory["fc1"][0][5] == "4.00 KB"


def test_pdf_context_limits_rows_and_op_tables_and_says_so() -> None:
    session = big_session(leaves=500)
    ctx = build_context(session, "pdf", pdf_max_rows=200, pdf_op_layers=5)
    assert len(ctx.rows) <= 200
    assert ctx.total_rows == 2 + 50 * 2 + 500  # root, "blocks", blocks.i, blocks.i.layers, leaves
    cuts = [r for r in ctx.rows if r.name.startswith("... ")]
    kept = {r.path for r in ctx.rows if r not in cuts}
    assert all(r.parent in kept for r in ctx.rows if r.parent is not None)  # still a tree
    # where rows were left out, a '... N more' row says how many: every row accounted for
    assert cuts and len(kept) + sum(int(r.name.split()[1]) for r in cuts) == 602
    leaves = [r for r in build_context(session, "html").rows if r.op_count]
    kept_leaves = [r.total_us for r in leaves if r.path in kept]
    dropped = [r.total_us for r in leaves if r.path not in kept]
    assert min(kept_leaves) >= max(dropped)  # the heaviest layers are the ones kept
    assert len(ctx.op_tables) == 5
    heaviest = [r.self_us for r, _ in ctx.op_tables]
    assert heaviest == sorted(heaviest, reverse=True)
    shown = len(kept_leaves)
    assert f"the {shown} heaviest of 500 profiled layers" in ctx.notes[0]
    assert f"({len(kept)} of 602 rows; " in ctx.notes[0]
    assert any("top 5 of 500 layers" in n for n in ctx.notes)
    assert ctx.data == {}


def test_pdf_context_of_a_small_session_keeps_all_rows() -> None:
    ctx = build_context(small_session(), "pdf")
    assert len(ctx.rows) == ctx.total_rows == 4
    assert len(ctx.notes) == 1  # only the op-breakdown note


def test_share_of_a_training_step_counts_both_passes() -> None:
    from dataclasses import replace

    from hybridprof.datamodel import Stat
    from tests.sessions import small_session

    base = small_session()
    records = tuple(
        replace(r, backward_total_cpu_us=Stat.of([2 * r.total_cpu_us.median])) for r in base.records
    )
    # fc1: 580 us forward + 1160 us backward in a 3000 us step
    session = replace(base, records=records, backward=True, iteration_cpu_us=(3000.0,))
    ctx = build_context(session)
    assert context_cells(ctx, "fc1")["subtree-share"] == "58.0%"
    assert {r.path: r for r in ctx.rows}["fc1"].pct == pytest.approx(58.0)


def test_findings_from_one_source_line_are_one_row_and_root_is_named() -> None:
    from dataclasses import replace

    from hybridprof.datamodel import Finding, FindingKind, SourceSpan
    from tests.sessions import small_session

    base = small_session()
    repeated = tuple(
        Finding(
            FindingKind.INLINE_OPS,
            str(i),
            "Block.forward runs 1 op(s) directly (+)",
            SourceSpan("n.py", 9),
        )
        for i in range(50)
    )
    root = Finding(
        FindingKind.INLINE_OPS, "", "Net.forward runs torch.flatten", SourceSpan("n.py", 30)
    )
    session = replace(base, plan=replace(base.plan, findings=(*repeated, root)))
    views = build_context(session).findings
    assert [(v.path, v.where) for v in views] == [
        ("0, 1, 2 and 47 more", "n.py:9"),
        ("(root)", "n.py:30"),
    ]


def test_a_legend_gives_each_label_its_own_room() -> None:
    """A long series name ends before the next swatch starts (a fixed step let it run into it)."""
    import re

    from hybridprof.reporting.page.charts import Bar, make_chart

    long_name = "kept (each storage once, parameters apart)"
    svg = str(make_chart("k", "t", [Bar("a", (1.0, 2.0))], (long_name, "second")).svg)
    xs = [float(x) for x in re.findall(r'<rect x="([0-9.]+)" y="[0-9.]+" width="10"', svg)]
    label_x = float(re.search(rf'<text x="([0-9.]+)"[^>]*>{re.escape(long_name)}<', svg)[1])
    assert len(xs) == 2 and xs[1] >= label_x + len(long_name) * 6  # ~6 px a character at 11 px
