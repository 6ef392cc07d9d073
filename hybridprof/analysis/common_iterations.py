"""Ranks that ran different numbers of measured iterations, cut to the iterations all of them ran.

A rank stopped early (Ctrl-C, a scheduler's SIGTERM) saves the iterations it finished; merged as
they are with a rank that ran more, a layer's calls would be one rank's total over its own
iterations divided by the merged count (1.5 calls per iteration where every rank made 1), and its
times medians over different iterations. So each longer rank is cut to the first N iterations,
N the fewest any rank ran: its per-iteration series, its times recomputed from them, its calls
scaled to N, its step and communication times. The merge then says so in a warning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hybridprof.datamodel import (
    CollectiveStat,
    IterationSeries,
    ModuleRecord,
    ProfileSession,
    Series,
    Stat,
)
from hybridprof.errors import UsageError


def to_common_iterations(
    ordered: Sequence[ProfileSession],
) -> tuple[list[ProfileSession], str | None]:
    """The sessions (sorted by rank) cut to the iterations every one has, and a warning saying
    so (None when they all ran the same number)."""
    counts = [s.iterations for s in ordered]
    common = min(counts)
    if len(set(counts)) == 1:
        return list(ordered), None
    cut = [s if s.iterations == common else cut_session(s, common) for s in ordered]
    each = ", ".join(f"rank {_rank(s)}: {s.iterations}" for s in ordered)
    warning = (
        f"the ranks ran different numbers of measured iterations ({each}; one was stopped "
        f"early); merged over the first {common}, which every rank ran"
    )
    return cut, warning


def cut_session(session: ProfileSession, count: int) -> ProfileSession:
    """`session` as if it had stopped after `count` measured iterations."""
    run = session.rank
    if run is not None:
        run = replace(run, step_us=run.step_us[:count], comm_us=run.comm_us[:count])
    return replace(
        session,
        records=tuple(_cut_record(r, count, session) for r in session.records),
        iterations=count,
        iteration_cpu_us=session.iteration_cpu_us[:count],
        rank=run,
        collectives=tuple(_cut_collective(c, count) for c in session.collectives),
    )


def _cut_record(record: ModuleRecord, count: int, session: ProfileSession) -> ModuleRecord:
    series = record.per_iteration
    if series is None:
        raise UsageError(
            f"rank {_rank(session)} ran {session.iterations} iterations, another rank fewer, and "
            f"its session holds no per-iteration times to cut (a file of an older hybridprof); "
            "merge ranks that ran the same number of iterations"
        )
    cut = IterationSeries(
        **{name: Series(s.values[:count]) for name, s in series.present().items()}
    )
    return replace(
        record,
        calls=round(record.calls * count / session.iterations),
        self_cpu_us=Stat.of(cut.self_cpu_us.values),
        total_cpu_us=Stat.of(cut.total_cpu().values),
        self_device_us=_restat(record.self_device_us, cut.self_device_us),
        total_device_us=_restat(record.total_device_us, cut.total_device()),
        backward_self_cpu_us=_restat(record.backward_self_cpu_us, cut.backward_self_cpu_us),
        backward_total_cpu_us=_restat(record.backward_total_cpu_us, cut.backward_total_cpu()),
        per_iteration=cut if count > 1 else None,  # as a one-iteration run saves it
    )


def _restat(old: Stat | None, cut: Series | None) -> Stat | None:
    """A time's Stat over the cut iterations (as it was when the series has no such time)."""
    return old if cut is None else Stat.of(cut.values)


def _cut_collective(row: CollectiveStat, count: int) -> CollectiveStat:
    if not row.iteration_us:
        return row
    kept = row.iteration_us[:count]
    return replace(row, iteration_us=kept, time_us=Stat.of(kept))


def _rank(session: ProfileSession) -> int:
    return session.rank.info.rank if session.rank else 0


__all__ = ["cut_session", "to_common_iterations"]
