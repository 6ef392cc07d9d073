"""A rank's figures as means over its typical steps, so that its rows add up to its step.

A single process's table shows each row's median over the iterations: a pause of another
process lands in a different layer each iteration, and a median per row leaves it out. A rank of
a distributed run is different: the time a collective waits for the other ranks is the step's own
cost, and it moves from unit to unit as the ranks arrive in a different order each step (in an
FSDP2 run of two ranks, one unit's backward took 51-113 ms, another's 8-26 ms, over the same
steps). A median per row then drops most of that wait, and the rows' medians summed came to
2-16% under the median step.

So a rank's session (one whose records, optimizer and steps all kept their per-iteration values)
states each figure as its mean over the same typical steps: those within 5% of the median step's
time (a step slowed by a late rank or another process, a warm-up that ran long, are left out);
where no step is that near, the median step itself (the two middle ones for an even count).
Means over one set of steps add up: per step the rows and the outside row are the step, so their
means are the kept steps' mean, within 5% of the median step by construction. The fewer steps
are typical, the fewer each row's figure is a mean of (one or two where the steps varied widely:
read the min and max beside it, which stay those of every step). Intervals are of medians, so
these figures have none. A tensor-parallel layer's collectives are means over the same steps:
they are inside its self time, and its compute is the one less the other. The FSDP2 columns
(`UnitComm`) stay medians over every step: they are no part of the rows' sum, and a median keeps
one rank's lateness in a step from reordering the units (means over the typical steps put an
FSDP2 block with 8x the parameters of the others first in all-gather time in 18 of 20
rank-runs, medians in 20 of 20).
Merged sessions (medians across ranks) and sessions of one process keep their medians.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import replace

from hybridprof.datamodel import (
    ModuleRecord,
    OptimizerRecord,
    ProfileSession,
    Series,
    Stat,
    UnitComm,
)

TYPICAL_BAND = 0.05  # the steps kept are within 5% of the median step's time


def kept_steps(session: ProfileSession) -> tuple[int, ...] | None:
    """The indices of the typical steps a rank's figures are means over (in step order); None
    where the session keeps its medians (no rank, no outside time measured, a series missing)."""
    if not _has_every_series(session):
        return None
    return steps_near_median(session.iteration_cpu_us)


def steps_near_median(step_us: Sequence[float], band: float = TYPICAL_BAND) -> tuple[int, ...]:
    """The indices of the steps within `band` (a share) of the median step's time; where no step
    is, the middle step (two for an even count): their mean is then the median. The kept steps'
    mean is within `band` of the median step whichever they are."""
    if not step_us:
        return ()
    median = statistics.median(step_us)
    near = tuple(i for i, t in enumerate(step_us) if abs(t - median) <= band * median)
    if near:
        return near
    by_time = sorted(range(len(step_us)), key=lambda i: (step_us[i], i))
    half = len(by_time) // 2
    middle = by_time[half : half + 1] if len(by_time) % 2 else by_time[half - 1 : half + 1]
    return tuple(sorted(middle))


def typical_means(session: ProfileSession) -> ProfileSession:
    """`session` with every per-iteration figure its mean over `kept_steps` (the session
    itself where it keeps its medians). A function of the per-iteration values alone, so
    applying it twice gives the same session."""
    kept = kept_steps(session)
    if kept is None:
        return session
    records = tuple(_record_means(r, kept) for r in session.records)
    optimizer = _optimizer_means(session.optimizer, kept)
    return replace(
        session,
        records=records,
        optimizer=optimizer,
        outside_cpu_us=_outside_means(session, kept),
        tp=tuple(_comm_means(c, kept, session.iterations) for c in session.tp),
    )


def _has_every_series(session: ProfileSession) -> bool:
    count = session.iterations
    if session.rank is None or session.outside_cpu_us is None or count < 2:
        return False
    if len(session.iteration_cpu_us) != count:
        return False
    for record in session.records:
        series = record.per_iteration
        if series is None or series.lengths() != {count}:
            return False
    optimizer = session.optimizer
    if optimizer is not None:
        every = [optimizer.per_iteration, *(p.per_iteration for p in optimizer.parts)]
        if any(s is None or len(s.values) != count for s in every):
            return False
    return True


def _stat_mean(stat: Stat, values: Sequence[float], kept: Sequence[int]) -> Stat:
    """`stat` with its middle figure the mean over the kept steps (min and max of all)."""
    return Stat(sum(values[i] for i in kept) / len(kept), stat.min, stat.max)


def _optional_mean(stat: Stat | None, series: Series | None, kept: Sequence[int]) -> Stat | None:
    if stat is None or series is None:
        return stat
    return _stat_mean(stat, series.values, kept)


def _record_means(record: ModuleRecord, kept: Sequence[int]) -> ModuleRecord:
    series = record.per_iteration
    assert series is not None  # kept_steps checked every record
    return replace(
        record,
        self_cpu_us=_stat_mean(record.self_cpu_us, series.self_cpu_us.values, kept),
        total_cpu_us=_stat_mean(record.total_cpu_us, series.total_cpu().values, kept),
        self_device_us=_optional_mean(record.self_device_us, series.self_device_us, kept),
        total_device_us=_optional_mean(record.total_device_us, series.total_device(), kept),
        backward_self_cpu_us=_optional_mean(
            record.backward_self_cpu_us, series.backward_self_cpu_us, kept
        ),
        backward_total_cpu_us=_optional_mean(
            record.backward_total_cpu_us, series.backward_total_cpu(), kept
        ),
    )


def _optimizer_means(
    optimizer: OptimizerRecord | None, kept: Sequence[int]
) -> OptimizerRecord | None:
    if optimizer is None:
        return None
    # kept_steps checked that the optimizer and each part kept a series
    parts = tuple(
        replace(p, cpu_us=_stat_mean(p.cpu_us, _values(p.per_iteration), kept))
        for p in optimizer.parts
    )
    own = _stat_mean(optimizer.self_cpu_us, _values(optimizer.per_iteration), kept)
    return replace(optimizer, self_cpu_us=own, parts=parts)


def _values(series: Series | None) -> tuple[float, ...]:
    assert series is not None
    return series.values


def _comm_means(comm: UnitComm, kept: Sequence[int], count: int) -> UnitComm:
    """A tensor-parallel layer's collectives as a mean over the kept steps, as its self time is
    (as they were in a file that kept no time per step)."""
    if len(comm.iteration_us) != count:
        return comm
    return replace(comm, time_us=_stat_mean(comm.time_us, comm.iteration_us, kept))


def _outside_means(session: ProfileSession, kept: Sequence[int]) -> Stat:
    """The outside row's mean over the kept steps: per step, what the rows leave of it (the
    outside row is measured op by op, and per step the rows and it are the step)."""
    assert session.outside_cpu_us is not None
    left = [max(0.0, session.iteration_cpu_us[i] - _rows_of_step(session, i)) for i in kept]
    return Stat(sum(left) / len(left), session.outside_cpu_us.min, session.outside_cpu_us.max)


def _rows_of_step(session: ProfileSession, step: int) -> float:
    """The records' forward and backward self times and the optimizer's time in one step."""
    total = 0.0
    for record in session.records:
        series = record.per_iteration
        assert series is not None
        total += series.self_cpu_us.values[step]
        if series.backward_self_cpu_us is not None:
            total += series.backward_self_cpu_us.values[step]
    optimizer = session.optimizer
    if optimizer is not None and optimizer.per_iteration is not None:
        total += optimizer.per_iteration.values[step]
    return total


__all__ = ["TYPICAL_BAND", "kept_steps", "steps_near_median", "typical_means"]
