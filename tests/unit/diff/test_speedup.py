"""The speed-up of compiled over eager per layer, with its interval from the pairs of iterations."""

from __future__ import annotations

from dataclasses import replace

from hybridprof.datamodel import IterationSeries, ModuleRecord, ProfileSession, Series, Stat
from hybridprof.diff.speedup import speedup_of
from tests.unit.diff.test_sessions import ITERS, run


def drifting(session: ProfileSession, scale: float) -> ProfileSession:
    """Every layer's and iteration's time x a drift that doubles over the run (a machine getting
    busier), times `scale`: the same drift as a paired partner run would see."""
    drift = [1.0 + i / ITERS for i in range(ITERS)]
    records: list[ModuleRecord] = []
    for record in session.records:
        assert record.per_iteration is not None
        own = record.per_iteration.self_cpu_us.values
        values = [v * d * scale for v, d in zip(own, drift, strict=True)]
        records.append(
            replace(
                record,
                self_cpu_us=Stat.of(values),
                total_cpu_us=Stat.of(values),
                per_iteration=IterationSeries(self_cpu_us=Series.of(values)),
            )
        )
    series = [r.per_iteration.self_cpu_us.values for r in records if r.per_iteration is not None]
    iterations = tuple(map(sum, zip(*series, strict=True)))
    return replace(session, records=tuple(records), iteration_cpu_us=iterations)


def test_a_paired_speed_up_has_a_tight_interval_from_its_pairs_despite_the_drift() -> None:
    eager = drifting(run(1), 1.0)
    compiled = drifting(run(1), 0.5)  # each pair exactly 2x, while each side drifts 2x
    result = speedup_of(eager, compiled, paired=True)
    rows = {row.path: row for row in result.rows() if row.path}
    for row in rows.values():
        assert row.interval is not None
        low, high = row.interval
        assert 1.99 < low <= high < 2.01  # the pairs' ratios, not the drifting medians
    whole = result.iteration_interval()
    assert whole is not None and 1.99 < whole[0] <= whole[1] < 2.01


def test_unpaired_sessions_have_no_speed_up_interval() -> None:
    result = speedup_of(drifting(run(1), 1.0), drifting(run(2), 0.5))
    assert all(row.interval is None for row in result.rows())
    assert result.iteration_interval() is None
