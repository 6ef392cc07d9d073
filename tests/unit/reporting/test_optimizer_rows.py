"""The `(optimizer)` rows of a training step's session, in every format, from the one layer
table; and the session's training parts through JSON."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest

from hybridprof.analysis.layer_table import layer_table
from hybridprof.datamodel import (
    OptimizerPart,
    OptimizerRecord,
    ProfileSession,
    ScheduleInfo,
    Series,
    Stat,
)
from hybridprof.reporting.dataframe import class_totals, session_frame
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.templates import render_html
from hybridprof.reporting.page.tree_table import DERIVED, row_flags, table_data
from hybridprof.reporting.text.text_table import render_text
from tests.sessions import HOSTILE, backward_session, op

SERIES = {"step": (400.0, 410.0, 390.0), "g0": (250.0, 250.0, 240.0), "g1": (100.0, 110.0, 90.0)}


def part(name: str, values: tuple[float, ...], within: str = "", calls: int = 0) -> OptimizerPart:
    return OptimizerPart(name, Stat.of(values), calls, within, Series.of(values))


def training_session(classes: tuple[str, ...] = ("AdamW",)) -> ProfileSession:
    """The backward session with an optimizer (step with two param groups, clip_grad,
    zero_grad), 20 steps under a schedule, and the outside time."""
    parts = (
        part("step", SERIES["step"], calls=3),
        part("clip_grad", (60.0, 50.0, 70.0)),
        part("zero_grad", (10.0, 10.0, 10.0), calls=3),
        part("AdamW group 0", SERIES["g0"], "step"),
        part("AdamW group 1", SERIES["g1"], "step"),
    )
    optimizer = OptimizerRecord(
        classes=classes,
        calls=3,
        self_cpu_us=Stat.of((470.0, 470.0, 470.0)),
        parts=parts,
        ops=(op("Optimizer.step#AdamW.step", 1, 150.0, 400.0), op("aten::lerp_", 10, 80.0, 80.0)),
        per_iteration=Series.of((470.0, 470.0, 470.0)),
    )
    schedule = ScheduleInfo(wait=2, warmup=3, active=3, repeat=1)
    return replace(
        backward_session(),
        optimizer=optimizer,
        steps=20,
        schedule=schedule,
        outside_cpu_us=Stat(200.0, 190.0, 210.0),
    )


def test_the_layer_table_has_the_optimizer_and_its_parts_before_the_outside_row() -> None:
    table = layer_table(training_session())
    kinds = [r.kind for r in table.rows]
    assert kinds[-7:] == ["optimizer", *["optimizer_part"] * 5, "outside"]
    rows = {r.path: r for r in table.optimizer()}
    head = rows["(optimizer)"]
    assert head.self_cpu is None and head.total_cpu is not None
    assert head.total_cpu.median == 470.0 and head.class_name == "AdamW"
    step = rows["(optimizer).step"]
    assert step.parent == "(optimizer)" and step.depth == 1 and step.has_children
    assert step.self_cpu is not None and step.self_cpu.median == 50.0  # 400 less 250 and 100
    assert step.calls_per_iteration == 1.0
    group = rows["(optimizer).step.AdamW group 0"]
    assert group.parent == "(optimizer).step" and group.depth == 2
    # the self shares, optimizer parts included, add up to 100%
    total = sum(r.pct_self or 0.0 for r in table.rows)
    assert total == pytest.approx(100.0)
    assert [r.path for r in table.tree()] == [
        r.path for r in layer_table(backward_session()).tree()
    ]


def test_the_text_table_shows_them_as_a_tree() -> None:
    text = render_text(training_session())
    lines = [line.split("|")[0].rstrip() for line in text.splitlines()]
    assert lines[-7:] == [
        "(optimizer)",
        "├── step",
        "│   ├── AdamW group 0",
        "│   └── AdamW group 1",
        "├── clip_grad",
        "└── zero_grad",
        "(outside profiled modules)",  # the root is not profiled in this session
    ]
    with_ops = render_text(training_session(), show_events=True).splitlines()
    below = with_ops[with_ops.index(next(x for x in with_ops if x.startswith("(optimizer)"))) + 1]
    assert "Optimizer.step#AdamW.step" in below


def test_the_dataframe_and_csv_rows() -> None:
    frame = session_frame(training_session())
    rows = frame.set_index("path")
    assert rows.loc["(optimizer)", "total_cpu_us"] == 470.0
    assert rows.loc["(optimizer).clip_grad", "self_cpu_us"] == 60.0
    assert rows.loc["(optimizer).step", "calls_per_iter"] == 1.0
    assert math.isnan(rows.loc["(optimizer).step", "backward_self_cpu_us"])
    assert rows.loc["(optimizer).step.AdamW group 1", "depth"] == 2
    assert frame["path"].tolist()[-1] == "(outside profiled modules)"
    assert "AdamW" not in class_totals(training_session())["class_name"].tolist()


def test_the_html_page_rows_and_the_optimizers_ops() -> None:
    ctx = build_context(training_session())
    views = {r.path: r for r in ctx.rows}
    assert row_flags(views["(optimizer)"]) & DERIVED
    assert views["(optimizer).step"].self_cpu.startswith("50")
    data = table_data(ctx.columns, ctx.rows)
    paths = [row[0] for row in data["rows"]]
    parent = data["rows"][paths.index("(optimizer).step")][1]
    assert paths[parent] == "(optimizer)"
    assert ctx.data["ops"]["(optimizer)"][0][0] == "Optimizer.step#AdamW.step"
    assert any(c.key == "step" for c in ctx.charts)
    assert any(h.label == "Steps" and "20 in the block" in h.value for h in ctx.header)
    pdf = build_context(training_session(), mode="pdf")
    assert any(r.path == "(optimizer)" for r, _ in pdf.op_tables)


def test_a_hostile_optimizer_class_name_is_escaped() -> None:
    page = render_html(training_session(classes=(HOSTILE,)))
    assert HOSTILE not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page or "\\u003cimg" in page


def test_the_training_parts_round_trip_and_old_files_have_none() -> None:
    session = training_session()
    text = session.to_json()
    data = json.loads(text)
    assert data["steps"] == 20 and data["schedule"]["active"] == 3
    assert data["optimizer"]["parts"][0]["name"] == "step"
    assert ProfileSession.from_json(text) == session
    old = json.loads(backward_session().to_json())
    assert "optimizer" not in old and "steps" not in old and "schedule" not in old
    old["schema_version"] = 4
    assert ProfileSession.from_json(json.dumps(old)).optimizer is None


def test_an_optimizer_series_of_the_wrong_length_is_refused() -> None:
    session = training_session()
    assert session.optimizer is not None
    short = replace(session.optimizer, per_iteration=Series.of((1.0,)))
    with pytest.raises(Exception, match=r"'\(optimizer\)' do not hold 3 values"):
        ProfileSession.from_json(replace(session, optimizer=short).to_json())


def test_the_optimizer_is_in_no_pass_of_the_icicle() -> None:
    """The icicle draws the forward and the backward of the module tree: the optimizer's step
    runs in neither (the table and its own rows say its time)."""
    charts = build_context(training_session()).icicles
    assert {c.key for c in charts} == {"forward", "backward"}
    for chart in charts:
        assert not [b for b in chart.blocks if b.path.startswith("(optimizer")], chart.key
