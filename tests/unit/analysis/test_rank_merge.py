"""Merging rank sessions (hand-made, fixed numbers): spread across ranks, stragglers, waiting,
and the one-line refusals."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from hybridprof.analysis.rank_merge import merge_sessions, merged_unit_comm
from hybridprof.datamodel import (
    CollectiveStat,
    IterationSeries,
    ModuleRecord,
    ProfileSession,
    RankInfo,
    RankRun,
    Series,
    Stat,
    UnitComm,
)
from hybridprof.diff import diff_sessions
from hybridprof.errors import SessionFileError, UsageError
from hybridprof.reporting.page.context import build_context
from hybridprof.reporting.page.templates import render_html
from tests.sessions import small_session


def bucket(times: tuple[float, ...]) -> CollectiveStat:
    return CollectiveStat(
        name="all_reduce bucket 0",
        kind="ddp_bucket",
        calls=1.0,
        time_us=Stat.of(times),
        iteration_us=times,
        nbytes=4096,
        carries=("fc2", "fc1"),
    )


def rank_session(
    rank: int, world: int = 2, slow_fc1: float = 0.0, comm: tuple[float, ...] = (100.0,) * 3
) -> ProfileSession:
    base = small_session()

    def slower(r: ModuleRecord) -> ModuleRecord:
        if r.path != "fc1" or not slow_fc1:
            return r
        total = r.total_cpu_us
        return replace(
            r,
            total_cpu_us=Stat(total.median + slow_fc1, total.min + slow_fc1, total.max + slow_fc1),
        )

    info = RankInfo(rank, world, rank, f"host{rank}", "gloo", "cpu", ddp=True)
    return replace(
        base,
        records=tuple(map(slower, base.records)),
        rank=RankRun(info, step_us=(2000.0, 2100.0, 1900.0), comm_us=comm),
        collectives=(bucket(comm),),
    )


def test_records_hold_the_median_min_and_max_across_ranks() -> None:
    merged = merge_sessions([rank_session(1, slow_fc1=5000.0), rank_session(0)])
    fc1 = merged.record("fc1")
    assert fc1 is not None
    assert (fc1.total_cpu_us.min, fc1.total_cpu_us.max) == (580.0, 5580.0)
    assert fc1.total_cpu_us.median == 3080.0
    assert merged.rank is None and merged.ranks is not None
    layer = next(layer for layer in merged.ranks.layers if layer.path == "fc1")
    assert layer.rank_us == (580.0, 5580.0)
    assert (layer.slowest_rank, layer.spread_us) == (1, 5000.0)


def test_a_rank_slower_beyond_its_noise_is_a_straggler() -> None:
    merged = merge_sessions([rank_session(0), rank_session(1, slow_fc1=5000.0)])
    assert merged.ranks is not None
    assert [(s.path, s.rank) for s in merged.ranks.stragglers] == [("fc1", 1)]
    finding = next(f for f in merged.plan.findings if f.kind == "straggler")
    assert finding.path == "fc1" and finding.message.startswith("rank 1 is consistently slower")


def test_a_difference_within_the_rank_own_noise_is_no_straggler() -> None:
    # fc1's own spread over iterations is 20% of 580 us = 116 us; 100 us more is within it
    merged = merge_sessions([rank_session(0), rank_session(1, slow_fc1=100.0)])
    assert merged.ranks is not None and merged.ranks.stragglers == ()


def test_waiting_is_the_excess_over_the_fastest_rank_per_iteration() -> None:
    fast = rank_session(0, comm=(100.0, 120.0, 110.0))
    slow = rank_session(1, comm=(400.0, 130.0, 510.0))
    merged = merge_sessions([fast, slow])
    assert merged.ranks is not None
    waits = [r.waiting_us for r in merged.ranks.ranks]
    assert waits == [0.0, 300.0]  # rank 1: 300, 10, 400 -> median 300
    row = merged.collectives[0]
    assert row.waiting_us == Stat(150.0, 0.0, 300.0)
    assert row.carries == ("fc2", "fc1") and row.nbytes == 4096
    assert merged.ranks.ranks[1].comm_share == pytest.approx(400.0 / 2000.0)


def test_merged_session_round_trips_and_renders(tmp_path) -> None:
    merged = merge_sessions([rank_session(0), rank_session(1, slow_fc1=5000.0)])
    assert ProfileSession.from_json(merged.to_json()) == merged
    ctx = build_context(merged, "html")
    assert ctx.ranks is not None and [r.rank for r in ctx.ranks.ranks] == [0, 1]
    assert ctx.ranks.layers[0].path == "fc1" and ctx.ranks.layers[0].straggler
    html = render_html(merged)
    assert "Ranks (2)" in html and "gradients of fc2, fc1" in html
    assert "Step time per rank" in html


@pytest.mark.parametrize(
    ("sessions", "message"),
    [
        (
            lambda: [rank_session(0), rank_session(1, world=3)],
            "the sessions come from runs of different world sizes (2, 3); merge the sessions "
            "of one torchrun run",
        ),
        (
            lambda: [rank_session(0)],
            "rank 1 of 2 is missing; give all 2 session-rank*.json",
        ),
        (
            lambda: [rank_session(0), rank_session(0)],
            "rank 0 is given twice; give each rank's session once",
        ),
        (
            lambda: [small_session()],
            "a single-process session cannot be merged; give the session-rank*.json files of "
            "one torchrun run",
        ),
    ],
)
def test_mismatched_sessions_are_refused(sessions, message: str) -> None:
    with pytest.raises(UsageError) as caught:
        merge_sessions(sessions())
    assert str(caught.value) == message


def test_sessions_of_different_models_are_refused() -> None:
    other = rank_session(1)
    other = replace(other, plan=replace(other.plan, root_class="OtherNet"))
    with pytest.raises(UsageError, match="rank 1's session profiled another model"):
        merge_sessions([rank_session(0), other])
    hashed = replace(rank_session(1), model_hash="b" * 64)
    with pytest.raises(UsageError, match="merge the sessions of one run"):
        merge_sessions([replace(rank_session(0), model_hash="a" * 64), hashed])


def test_a_layer_that_waits_in_its_own_collective_is_no_straggler() -> None:
    waiting = replace(
        rank_session(1, slow_fc1=5000.0),
        collectives=(
            CollectiveStat("c10d::allreduce_", "model", 1.0, Stat(5.0, 5.0, 5.0), layer="fc1"),
        ),
    )
    merged = merge_sessions([rank_session(0), waiting])
    assert merged.ranks is not None and merged.ranks.stragglers == ()


def _with_series(session: ProfileSession, scale: float) -> ProfileSession:
    """Every record with 9 iterations of self and total CPU time, `scale` times its median."""

    def series(r: ModuleRecord) -> ModuleRecord:
        own = [r.self_cpu_us.median * scale * (1 + 0.01 * (i % 3)) for i in range(9)]
        total = [v + r.total_cpu_us.median - r.self_cpu_us.median for v in own]
        return replace(
            r,
            calls=9 * r.calls // session.iterations,
            per_iteration=IterationSeries(Series.of(own), Series.of(total)),
        )

    return replace(
        session,
        records=tuple(map(series, session.records)),
        iterations=9,
        requested_iterations=9,
        iteration_cpu_us=tuple(1000.0 * scale for _ in range(9)),
    )


def test_merged_series_are_each_iterations_median_across_ranks_so_merged_runs_can_be_diffed() -> (
    None
):
    ranks = [_with_series(rank_session(r, world=3), s) for r, s in enumerate((1.0, 1.2, 3.0))]
    merged = merge_sessions(ranks)
    fc1 = merged.record("fc1")
    assert fc1 is not None and fc1.per_iteration is not None
    expected = [v for v in ranks[1].records[0].per_iteration.self_cpu_us.values]  # type: ignore[union-attr]
    assert list(fc1.per_iteration.self_cpu_us.values) == expected  # the middle rank's, 1.2x
    assert merged.iteration_cpu_us == (1200.0,) * 9
    assert fc1.per_iteration.total_cpu_us is not None  # differs from self: kept

    slower = [_with_series(rank_session(r, world=3), s * 2) for r, s in enumerate((1.0, 1.2, 3.0))]
    diff = diff_sessions(merged, merge_sessions(slower))
    assert {layer.verdict for layer in diff.layers} == {"slower"}  # judged, not "unknown"


def _series_session(rank: int, iterations: int) -> ProfileSession:
    """Rank `rank` of 2 with `iterations` measured iterations: fc1 takes 100, 200, 300... us in
    iteration 1, 2, 3..., every layer called once per iteration."""

    def series(r: ModuleRecord) -> ModuleRecord:
        own = [100.0 * (i + 1) for i in range(iterations)]
        return replace(
            r,
            calls=iterations,
            self_cpu_us=Stat.of(own),
            total_cpu_us=Stat.of(own),
            per_iteration=IterationSeries(Series.of(own)),
        )

    session = rank_session(rank)
    assert session.rank is not None
    steps = tuple(2000.0 + i for i in range(iterations))
    return replace(
        session,
        records=tuple(map(series, session.records)),
        iterations=iterations,
        iteration_cpu_us=steps,
        rank=replace(session.rank, step_us=steps, comm_us=(100.0,) * iterations),
        collectives=(bucket((100.0,) * iterations),),
    )


def test_ranks_that_ran_different_numbers_of_iterations_merge_over_the_common_ones() -> None:
    # rank 1 was stopped after 2 of 3 iterations: merging must not show 1.5 calls per iteration
    merged = merge_sessions([_series_session(0, 3), _series_session(1, 2)])
    assert merged.iterations == 2
    fc1 = merged.record("fc1")
    assert fc1 is not None
    assert fc1.calls_per_iteration(merged.iterations) == 1.0
    assert fc1.self_cpu_us == Stat(150.0, 150.0, 150.0)  # both ranks' median of 100 and 200 us
    assert fc1.per_iteration is not None
    assert fc1.per_iteration.self_cpu_us.values == (100.0, 200.0)
    assert merged.iteration_cpu_us == (2000.0, 2001.0)
    assert merged.ranks is not None
    assert [r.iterations for r in merged.ranks.ranks] == [2, 2]
    assert merged.warnings[0] == (
        "the ranks ran different numbers of measured iterations (rank 0: 3, rank 1: 2; one was "
        "stopped early); merged over the first 2, which every rank ran"
    )
    assert ProfileSession.from_json(merged.to_json()) == merged


def test_a_rank_without_per_iteration_times_and_another_count_is_refused() -> None:
    longer = _series_session(0, 3)
    old = replace(longer, records=tuple(replace(r, per_iteration=None) for r in longer.records))
    with pytest.raises(UsageError, match="rank 0 ran 3 iterations, another rank fewer"):
        merge_sessions([old, _series_session(1, 2)])


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda s: replace(s, model_hash="b" * 64),
            "rank 1's session profiled another model than rank 0's: the model file (nets.py) was "
            "changed between them (its sha256 starts bbbbbbbbbbbb on rank 1, aaaaaaaaaaaa on "
            "rank 0); merge the sessions of one run",
        ),
        (
            lambda s: replace(s, plan=replace(s.plan, root_class="OtherNet")),
            "rank 1's session profiled another model than rank 0's: class OtherNet against Net; "
            "merge the sessions of one run",
        ),
        (
            lambda s: replace(
                s,
                plan=replace(
                    s.plan,
                    targets=tuple(
                        replace(t, selected=False) if t.path == "fc1" else t for t in s.plan.targets
                    ),
                ),
            ),
            "rank 1's session profiled another model than rank 0's: rank 1 did not select fc1 "
            "(rank 0 did); merge the sessions of one run",
        ),
    ],
)
def test_the_refusal_of_different_models_says_what_differs(change, said: str) -> None:
    first = replace(rank_session(0), model_hash="a" * 64, model_file="nets.py")
    other = change(replace(rank_session(1), model_hash="a" * 64, model_file="nets.py"))
    with pytest.raises(UsageError) as caught:
        merge_sessions([first, other])
    assert str(caught.value) == said


def test_a_merged_session_must_hold_as_many_ranks_as_its_world_size() -> None:
    merged = merge_sessions([rank_session(0), rank_session(1)])
    data = json.loads(merged.to_json())
    data["ranks"]["world_size"] = 10**18  # the renderers would lay out 10**18 columns
    with pytest.raises(SessionFileError, match=r"ranks: world size 1000000000000000000 does not "):
        ProfileSession.from_json(json.dumps(data))
    rank = json.loads(rank_session(1).to_json())
    rank["rank"]["info"]["world_size"] = 10**18
    with pytest.raises(SessionFileError, match=r"rank\.info: world size 1000000000000000000 is "):
        ProfileSession.from_json(json.dumps(rank))
    rank["rank"]["info"].update(world_size=2, rank=10**18)
    with pytest.raises(SessionFileError, match=r"rank 1000000000000000000 is outside the world"):
        ProfileSession.from_json(json.dumps(rank))


def test_merge_prints_the_warning_of_ranks_that_ran_different_numbers_of_iterations(
    tmp_path, capsys
) -> None:
    from hybridprof.cli import main

    files = []
    for rank, iterations in ((0, 3), (1, 2)):
        files.append(tmp_path / f"session-rank{rank}.json")
        files[-1].write_text(_series_session(rank, iterations).to_json())
    assert main(["merge", *map(str, files)]) == 0
    out = capsys.readouterr().out
    assert "warning: the ranks ran different numbers of measured iterations (rank 0: 3, " in out


def test_fsdp_units_merge_to_the_median_rank_with_the_extremes_of_all() -> None:
    def with_units(rank: int, gather_us: float) -> ProfileSession:
        spread = Stat(gather_us, gather_us / 2, gather_us * 2)
        units = (UnitComm("fc1", "all_gather", 1.0, spread, 800),)
        if rank == 0:
            units += (UnitComm("", "reduce_scatter", 1.0, Stat(50.0, 40.0, 60.0), 100),)
        return replace(rank_session(rank, world=3), fsdp=units)

    merged = merge_sessions([with_units(0, 100.0), with_units(1, 300.0), with_units(2, 200.0)])
    gather, scatter = merged.fsdp
    assert (gather.path, gather.kind, gather.nbytes, gather.calls) == ("fc1", "all_gather", 800, 1)
    assert gather.time_us == Stat(200.0, 50.0, 600.0)
    assert scatter.time_us == Stat(0.0, 0.0, 60.0)  # ranks 1 and 2 have none: 0 for them
    assert merged_unit_comm([rank_session(0).fsdp]) == ()


def test_tensor_parallel_layers_merge_with_their_group_and_stay_apart_from_fsdp() -> None:
    def with_tp(rank: int, time_us: float) -> ProfileSession:
        comm = UnitComm("mlp.down", "tp_forward", 1.0, Stat(time_us, time_us, time_us), 1024)
        return replace(rank_session(rank, world=2), tp=(replace(comm, group="mesh dim tp"),))

    merged = merge_sessions([with_tp(0, 100.0), with_tp(1, 300.0)])
    assert merged.fsdp == ()
    (down,) = merged.tp
    assert (down.path, down.kind, down.nbytes, down.group) == (
        "mlp.down",
        "tp_forward",
        1024,
        "mesh dim tp",
    )
    assert down.time_us == Stat(200.0, 100.0, 300.0)


def test_the_same_collective_called_by_two_layers_stays_two_rows() -> None:
    def calls(rank: int) -> ProfileSession:
        rows = tuple(
            CollectiveStat("c10d::allreduce_", "model", 1.0, Stat(t, t, t), layer=layer)
            for layer, t in (("fc1", 5.0 + rank), ("fc2", 50.0 + rank))
        )
        return replace(rank_session(rank), collectives=rows)

    merged = merge_sessions([calls(0), calls(1)])
    model = {c.layer: c.time_us.median for c in merged.collectives if c.kind == "model"}
    assert model == {"fc1": 5.5, "fc2": 50.5}  # one name, each layer's own


def _timed(path: str, kind: str, times: tuple[float, ...], exposed: float = 0.0) -> UnitComm:
    return UnitComm(
        path, kind, 1.0, Stat.of(times), 800, iteration_us=times,
        exposed_us=Stat(exposed, exposed, exposed),
    )  # fmt: skip


def _units(rank: int, world: int, units: tuple[UnitComm, ...]) -> ProfileSession:
    return replace(rank_session(rank, world=world), fsdp=units)


def test_each_rank_waits_its_time_beyond_the_shortest_rank_and_names_the_late_one() -> None:
    # rank 1 is late in iterations 0 and 2 (shortest there), rank 2 in iteration 1
    ranks = [
        (_timed("fc2", "all_gather", (5000.0, 400.0, 5200.0), exposed=900.0),),
        (_timed("fc2", "all_gather", (300.0, 300.0, 200.0), exposed=100.0),),
        (_timed("fc2", "all_gather", (2000.0, 100.0, 2200.0), exposed=300.0),),
    ]
    merged = merge_sessions([_units(r, 3, units) for r, units in enumerate(ranks)])
    (gather,) = merged.fsdp
    # per iteration beyond the shortest: rank 0 (4700, 300, 5000), rank 1 (0, 200, 0), rank 2
    # (1700, 0, 2000); each rank's median over iterations
    assert gather.wait_us == (4700.0, 0.0, 1700.0)
    assert gather.waited_for == 1
    assert gather.exposed_us == Stat(300.0, 100.0, 900.0)  # across the ranks
    assert gather.iteration_us == (2000.0, 300.0, 2200.0)  # iteration i's median rank
    assert gather.time_us.median == 2000.0  # the median rank's median, as before
    assert merged.ranks is not None  # each rank's waiting per iteration holds the units' too
    assert [r.waiting_us for r in merged.ranks.ranks] == [4700.0, 0.0, 1700.0]


def test_no_wait_in_a_copy_out_nor_without_per_iteration_times_or_a_second_rank() -> None:
    ranks = [
        (_timed("fc1", "copy_out", (50.0, 60.0)), UnitComm("fc2", "regather", 1.0, Stat(9, 9, 9))),
        (_timed("fc1", "copy_out", (10.0, 20.0)), UnitComm("fc2", "regather", 1.0, Stat(1, 1, 1))),
    ]
    merged = merge_sessions([_units(r, 2, units) for r, units in enumerate(ranks)])
    assert [(c.wait_us, c.waited_for) for c in merged.fsdp] == [((), None), ((), None)]
    (alone,) = merged_unit_comm([(_timed("fc1", "all_gather", (5.0, 6.0)),)])
    assert (alone.wait_us, alone.waited_for) == ((), None)


def test_a_merged_units_row_shows_its_wait_and_the_rank_waited_for() -> None:
    from hybridprof.analysis.layer_table import layer_table
    from hybridprof.reporting.text.fitted_table import TableChoice, fitted_table

    scatter = "reduce_scatter"
    ranks = [
        (_timed("fc2", "all_gather", (900.0, 950.0)), _timed("fc2", scatter, (40.0, 30.0))),
        (_timed("fc2", "all_gather", (20.0, 30.0)), _timed("fc2", scatter, (60.0, 90.0))),
    ]
    merged = merge_sessions([_units(r, 2, units) for r, units in enumerate(ranks)])
    table = layer_table(merged)
    (row,) = [r for r in table.rows if r.comm]
    assert table.has_wait
    assert row.wait_us == 900.0  # rank 0: 880 + 920 gathering (median 900), 0 scattering
    assert row.waited_for == 1  # its largest wait, the gather, was for rank 1
    text = fitted_table(merged, TableChoice(columns=("wait", "waited-for", "exposed"))).text
    assert "Wait" in str(text) and "Waited for" in str(text) and "rank 1" in str(text)
    assert not layer_table(_units(0, 2, ranks[0])).has_wait  # a rank's own session: none
