"""Compensated figures: the profiler's calibrated cost out of every row's CPU times, the raw
figures kept beside, nothing below zero (a clamped row flagged), and the rows still adding up to
the headline in every view."""

from __future__ import annotations

import io
import json
import math
from dataclasses import replace

import pandas as pd
import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.analysis.compensation import OUTSIDE, compensated
from hybridprof.analysis.layer_table import LayerTable, build_layer_table
from hybridprof.datamodel import Calibration, ProfileSession, Stat
from hybridprof.reporting.dataframe import render_csv, render_json, session_frame
from hybridprof.reporting.trust import compensation_text
from tests.sessions import nested_session, op, small_session

COSTS = Calibration(2.0, 1.0, 3.0, "measured", "2026-12-03T08:00:00+00:00")


def test_each_figure_loses_the_cost_of_what_was_recorded_inside_it() -> None:
    session = replace(nested_session(), calibration=COSTS)  # one call of each per iteration
    found = compensated(session)
    assert found is not None and not found.clamped
    by_path = {r.path: r for r in found.session.records}
    # a leaf: its one op (2 us) and the part of its range inside it (1 us)
    assert by_path["blocks.0.conv"].self_cpu_us.median == 340.0 - 3.0
    assert by_path["blocks.0.conv"].total_cpu_us.median == 340.0 - 3.0
    # a block: its range's inside part, and the wrappers of its two children (3 us each)
    assert by_path["blocks.0"].self_cpu_us.median == 30.0 - 7.0
    assert by_path["blocks.0"].total_cpu_us.median == 470.0 - (7.0 + 3.0 + 3.0)
    # the root: the same for its blocks; its own wrapper runs in no range (in no figure)
    assert by_path[""].self_cpu_us.median == 50.0 - 7.0
    assert by_path[""].total_cpu_us.median == 1000.0 - 33.0
    assert found.cost_us == 33.0
    assert found.session.iteration_cpu_us == (967.0, 977.0, 957.0)
    table = build_layer_table(session)
    assert table.compensated and table.raw_iteration_us == 1000.0 and table.iteration_us == 967.0
    conv = next(r for r in table.rows if r.path == "blocks.0.conv")
    assert conv.raw is not None and conv.raw.self_cpu_us == 340.0
    assert conv.self_cpu is not None and conv.self_cpu.median == 337.0


def test_each_call_s_dispatch_moves_from_its_caller_into_the_layer() -> None:
    """`nn.Module.__call__` runs in the caller's range before the layer's opens: the layer gains
    its calls x `call_us`, its nearest profiled ancestor loses as much, the outermost layer's
    own dispatch (in no range) is in no figure; nothing is taken out for it."""
    session = replace(nested_session(), calibration=replace(COSTS, call_us=0.5))
    found = compensated(session)
    assert found is not None and not found.clamped
    by_path = {r.path: r for r in found.session.records}
    assert by_path["blocks.0.conv"].self_cpu_us.median == 340.0 - 3.0 + 0.5
    assert by_path["blocks.0.conv"].total_cpu_us.median == 340.0 - 3.0 + 0.5
    # a block: gains its own dispatch, loses its two children's
    assert by_path["blocks.0"].self_cpu_us.median == 30.0 - 7.0 + 0.5 - 1.0
    assert by_path["blocks.0"].total_cpu_us.median == 470.0 - 13.0 + 0.5
    assert by_path[""].self_cpu_us.median == 50.0 - 7.0 - 1.0
    assert by_path[""].total_cpu_us.median == 1000.0 - 33.0  # moved inside it, not taken out
    assert found.cost_us == 33.0
    table = build_layer_table(session)
    assert table.iteration_us == 967.0  # the headline as without the move


def test_the_outside_row_loses_its_ops_cost_and_backward_its_events() -> None:
    base = small_session()
    fc1 = base.records[0]
    backward_ops = (*fc1.ops, op("AddmmBackward0", 2, 40.0, 60.0, bwd=True))
    records = (
        replace(
            fc1,
            ops=backward_ops,
            backward_self_cpu_us=Stat(50.0, 45.0, 55.0),
            backward_total_cpu_us=Stat(50.0, 45.0, 55.0),
        ),
        *base.records[1:],
    )
    session = replace(
        base,
        records=records,
        backward=True,
        outside_cpu_us=Stat(30.0, 25.0, 35.0),
        outside_ops=(op("aten::mean", 2, 20.0, 20.0), op("aten::sum", 1, 10.0, 10.0)),
        calibration=COSTS,
    )
    found = compensated(session)
    assert found is not None
    assert found.session.outside_cpu_us == Stat(30.0 - 6.0, 25.0 - 6.0, 35.0 - 6.0)
    fc1_less = found.session.records[0]
    assert fc1_less.backward_self_cpu_us == Stat(50.0 - 4.0, 45.0 - 4.0, 55.0 - 4.0)
    table = build_layer_table(session)
    assert math.isclose(sum(r.own_us for r in table.rows), table.iteration_us)
    outside = table.outside()
    assert outside is not None and outside.raw is not None and outside.raw.self_cpu_us == 30.0


def test_a_figure_the_costs_exceed_is_zero_and_its_row_says_so() -> None:
    huge = replace(COSTS, event_us=400.0)
    session = replace(small_session(), outside_cpu_us=Stat(5.0, 4.0, 6.0), calibration=huge)
    session = replace(session, outside_ops=(op("aten::mean", 1, 5.0, 5.0),))
    found = compensated(session)
    assert found is not None and {"fc1", "act", "fc2", OUTSIDE} <= found.clamped
    table = build_layer_table(session)
    outside = table.outside()
    assert outside is not None and outside.clamped and outside.self_cpu is not None
    assert outside.self_cpu.median == 0.0
    assert {r.path for r in table.clamped()} == {"fc1", "act", "fc2", outside.path}
    _no_figure_below_zero(table)
    frame = session_frame(session)
    assert frame.loc[frame["path"] == "act", "clamped"].item()
    assert (frame["self_cpu_us"].fillna(0) >= 0).all()


def test_without_a_calibration_the_table_is_the_raw_one() -> None:
    session = small_session()
    assert session.calibration is None and compensated(session) is None
    table = build_layer_table(session)
    assert not table.compensated and table.raw_iteration_us is None
    assert all(r.raw is None and not r.clamped for r in table.rows)
    assert "raw_self_cpu_us" not in session_frame(session).columns


def _no_figure_below_zero(table: LayerTable) -> None:
    for row in table.rows:
        figures = [row.own_us, row.share_us, row.backward_self_cpu_us, row.backward_total_cpu_us]
        figures += [t.min for t in (row.self_cpu, row.total_cpu) if t is not None]
        assert all(f is None or f >= 0 for f in figures), row.path


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.mlp = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 16))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(self.norm(x))


def small_models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    torch.manual_seed(0)
    cnn = nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
        nn.Flatten(), nn.Linear(8, 4),
    )  # fmt: skip
    blocks = nn.Sequential(Block(), Block(), nn.Linear(16, 4))
    return {"cnn": (cnn, torch.rand(2, 3, 8, 8)), "blocks": (blocks, torch.rand(4, 16))}


@pytest.mark.parametrize("name", ["cnn", "blocks"])
@pytest.mark.parametrize("backward", [False, True])
def test_real_models_compensated_not_above_raw_not_below_zero_and_adding_up(
    name: str, backward: bool
) -> None:
    model, x = small_models()[name]
    session = hybridprof.profile(model, x, iters=3, backward=backward)
    assert isinstance(session, ProfileSession) and session.calibration is not None
    table = build_layer_table(session)
    assert table.compensated and table.raw_iteration_us is not None
    assert 0 <= table.iteration_us <= table.raw_iteration_us
    _no_figure_below_zero(table)
    # a layer under the root gains its calls' dispatch, moved in from its caller (no more)
    call_us = session.calibration.call_us
    assert call_us > 0
    for row in table.rows:
        if row.kind in ("layer", "outside"):
            assert row.raw is not None and row.self_cpu is not None and row.total_cpu is not None
            moved = (row.calls_per_iteration or 0.0) * call_us if row.path else 0.0
            assert row.self_cpu.median <= (row.raw.self_cpu_us or 0.0) + moved + 1e-9
            assert row.total_cpu.median <= (row.raw.total_cpu_us or 0.0) + moved + 1e-9
            if backward and row.kind == "layer":
                assert (row.backward_self_cpu_us or 0.0) <= (row.raw.backward_self_cpu_us or 0.0)
    # every view's rows add up to the (compensated) headline
    assert math.isclose(sum(r.own_us for r in table.rows), table.iteration_us, rel_tol=1e-9)
    root = next(r for r in table.rows if r.path == "")
    outside = table.outside()
    assert outside is not None
    assert math.isclose(root.share_us + outside.own_us, table.iteration_us, rel_tol=1e-9)
    frame = session_frame(session)
    assert frame["raw_self_cpu_us"].sum() >= frame["self_cpu_us"].sum() - 1e-9
    own = frame["self_cpu_us"] + frame["backward_self_cpu_us"].fillna(0)
    assert math.isclose(own.sum(), table.iteration_us, rel_tol=1e-6)
    csv = pd.read_csv(io.StringIO(render_csv(session)))
    assert {"raw_self_cpu_us", "raw_total_cpu_us", "clamped"} <= set(csv.columns)
    assert math.isclose(csv["self_cpu_us"].sum() + csv["backward_self_cpu_us"].fillna(0).sum(),
                        table.iteration_us, rel_tol=1e-3)  # fmt: skip
    exported = json.loads(render_json(session))
    rows = exported["layers"] if isinstance(exported, dict) else exported
    assert all("raw_self_cpu_us" in r for r in rows)
    if backward:
        assert "raw_backward_self_cpu_us" in frame.columns


def test_a_timed_bare_step_is_said_beside_and_scales_nothing() -> None:
    """A bare step once scaled the costs to (profiled - bare): a few bare steps timed low by
    chance then made a layer doing 10x its base's work read faster. It is only said now."""
    session = replace(nested_session(), calibration=COSTS)
    plain = build_layer_table(session)  # raw 1000 us, the calibrated costs 33 us
    assert plain.iteration_us == 967.0
    for bare in (1.0, 901.0, 990.0):
        timed = replace(session, calibration=replace(COSTS, bare_step_us=bare))
        table = build_layer_table(timed)
        assert table.iteration_us == 967.0 and table.raw_iteration_us == 1000.0
        assert table.rows == plain.rows
        assert f"the step unprofiled took {bare:.3f}us" in compensation_text(table)
    assert "unprofiled" not in compensation_text(plain)


def test_a_driven_run_times_its_step_bare_and_a_with_block_does_not() -> None:
    model, x = small_models()["blocks"]
    session = hybridprof.profile(model, x, iters=3)
    assert isinstance(session, ProfileSession) and session.calibration is not None
    assert session.calibration.bare_step_us is not None and session.calibration.bare_step_us > 0
    assert "forward" not in vars(model[0])  # the patches are back on and off again: all gone
    table = build_layer_table(session)
    assert "the step unprofiled took" in compensation_text(table)
    again = ProfileSession.from_json(session.to_json())
    assert again.calibration == session.calibration
    with torch.no_grad(), hybridprof.Profile(model) as prof:
        for _ in range(3):
            model(x)
    block = prof.session()
    assert block.calibration is not None and block.calibration.bare_step_us is None
    assert "unprofiled" not in compensation_text(build_layer_table(block))
