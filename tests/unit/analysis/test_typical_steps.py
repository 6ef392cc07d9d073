"""A rank's table states means over its typical steps (hand-made sessions, fixed numbers): the
rows add up to the median step where the medians did not, while a session of one process keeps
its medians."""

from __future__ import annotations

from dataclasses import replace

import pytest

from hybridprof.analysis.layer_table import build_layer_table, stated_session
from hybridprof.analysis.typical_steps import kept_steps, steps_near_median, typical_means
from hybridprof.datamodel import (
    IterationSeries,
    ModuleRecord,
    ProfileSession,
    RankInfo,
    RankRun,
    Series,
    Stat,
    UnitComm,
)
from hybridprof.reporting.trust import has_intervals, headline_gap_line, statistic_line
from tests.sessions import small_session

# Per step, the wait moves between fc1 and fc2 (the ranks arrived in a different order), act is
# steady; steps 2 and 5 waited nowhere.
FC1 = (10.0, 50.0, 10.0, 10.0, 50.0, 10.0)
FC2 = (50.0, 10.0, 10.0, 50.0, 10.0, 10.0)
ACT = (5.0,) * 6
OUTSIDE = 5.0


def with_series(record: ModuleRecord, values: tuple[float, ...]) -> ModuleRecord:
    return replace(
        record,
        calls=len(values),
        self_cpu_us=Stat.of(values),
        total_cpu_us=Stat.of(values),
        per_iteration=IterationSeries(Series.of(values)),
    )


def rank_session(rank: bool = True) -> ProfileSession:
    base = small_session()
    values = {"fc1": FC1, "act": ACT, "fc2": FC2}
    records = tuple(with_series(r, values[r.path]) for r in base.records)
    steps = tuple(a + b + c + OUTSIDE for a, b, c in zip(FC1, ACT, FC2, strict=True))
    info = RankInfo(0, 2, 0, "host0", "gloo", "cpu")
    return replace(
        base,
        records=records,
        iterations=len(steps),
        iteration_cpu_us=steps,
        outside_cpu_us=Stat.of([OUTSIDE] * len(steps)),
        rank=RankRun(info, step_us=steps) if rank else None,
        calibration=None,
    )


def test_the_rows_of_a_rank_add_up_to_its_median_step_where_their_medians_did_not() -> None:
    session = rank_session()
    assert sorted(session.iteration_cpu_us) == [30.0, 30.0, 70.0, 70.0, 70.0, 70.0]
    medians = sum(r.self_cpu_us.median for r in session.records) + OUTSIDE
    assert medians == 30.0  # each row's median drops the wait: 40 us under the median step

    table = build_layer_table(session)
    rows = {r.path: r for r in table.layers()}
    assert rows["fc1"].self_cpu is not None and rows["fc1"].self_cpu.median == 30.0
    assert rows["fc2"].self_cpu is not None and rows["fc2"].self_cpu.median == 30.0
    assert rows["act"].self_cpu is not None and rows["act"].self_cpu.median == 5.0
    assert table.iteration_us == table.measured_iteration_us == 70.0
    assert table.typical_steps == 4
    assert all(r.self_cpu is None or r.self_cpu.interval is None for r in table.rows)
    assert rows["fc1"].self_cpu.min == 10.0 and rows["fc1"].self_cpu.max == 50.0  # of every step
    assert headline_gap_line(table) == ""
    assert "mean over the 4 steps of 6 within 5% of the median step" in statistic_line(table)


def test_a_session_of_one_process_keeps_its_medians_and_says_so() -> None:
    session = rank_session(rank=False)
    assert kept_steps(session) is None
    assert typical_means(session) is session and stated_session(session) is session
    table = build_layer_table(session)
    assert table.typical_steps is None and table.iteration_us == 30.0
    assert "median over 6 iterations" in statistic_line(table)
    assert "in no row's median" in headline_gap_line(table)


def test_the_means_are_idempotent_and_drop_the_medians_intervals() -> None:
    session = rank_session()
    once = typical_means(session)
    assert typical_means(once) == once
    assert stated_session(session) == once
    assert not has_intervals(session) and has_intervals(rank_session(rank=False))


def test_a_rank_missing_a_series_keeps_its_medians() -> None:
    session = rank_session()
    lacking = replace(session.records[0], per_iteration=None)
    assert kept_steps(replace(session, records=(lacking, *session.records[1:]))) is None
    assert kept_steps(replace(session, outside_cpu_us=None)) is None


@pytest.mark.parametrize(
    ("steps", "kept"),
    [
        ((100.0, 101.0, 99.0, 150.0, 60.0), (0, 1, 2)),  # within 5% of the median (100)
        ((100.0, 200.0, 300.0), (1,)),  # none near but the median step itself
        ((100.0, 200.0, 300.0, 400.0), (1, 2)),  # the two middle ones: their mean is the median
        ((), ()),
    ],
)
def test_the_typical_steps_are_those_near_the_median(
    steps: tuple[float, ...], kept: tuple[int, ...]
) -> None:
    assert steps_near_median(steps) == kept


def test_a_tensor_parallel_layer_s_collectives_are_means_over_the_same_steps() -> None:
    """Its collectives run inside its self time: both are means over the typical steps, so its
    compute is its self time less them (a median beside a mean read below zero, clamped)."""
    session = rank_session()
    # fc2's all-reduce: 40 us of its time in the steps it waited, 1 us in the others
    sent = tuple(40.0 if t == 50.0 else 1.0 for t in FC2)
    comm = UnitComm("fc2", "tp_forward", 1.0, Stat.of(sent), 1024, "mesh dim tp", sent)
    table = build_layer_table(replace(session, tp=(comm,)))
    fc2 = next(r for r in table.layers() if r.path == "fc2")
    mean = fc2.comm_of("tp_forward")
    assert mean is not None and mean.time_us.median == pytest.approx(20.5)  # (40 + 1) x 2 / 4
    assert fc2.self_cpu is not None and fc2.self_cpu.median == 30.0
    assert fc2.compute_us == pytest.approx(9.5)
