"""Merge the sessions of a torch.distributed run's ranks into one session (no torch needed).

The merged session is an ordinary `ProfileSession` whose records hold, for every layer, the spread
across ranks: each `Stat` is the median, min and max over the ranks' own medians, so every report
shows it as it is. Its `ranks` field adds what only a merged view has: each rank's step time and
share of the step in communication, each layer's per-rank figures with the slowest rank, and the
stragglers. Each record's per-iteration series (and the iteration times) are iteration i's median
across ranks: the ranks step together, so `hybridprof diff` can judge two merged sessions from
them as it judges single runs. Communication rows are merged per bucket (or collective) with the
part spent waiting for other ranks split off: in a collective, the last rank to arrive waits
least, so per iteration the fastest rank's time is taken as the transfer itself and every other
rank's excess as waiting. FSDP2 units' collectives are split the same way, per unit and kind,
and each names the rank the others waited for.

Used by rank 0 at the end of `hybridprof run` under torchrun and by `hybridprof merge` offline.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from hybridprof.analysis.common_iterations import to_common_iterations
from hybridprof.analysis.memory_merge import merge_memory
from hybridprof.analysis.stats import median_or_zero
from hybridprof.analysis.typical_steps import typical_means
from hybridprof.datamodel import (
    CollectiveStat,
    Finding,
    FindingKind,
    IterationSeries,
    MergedRanks,
    ModuleRecord,
    ProfileSession,
    RankLayer,
    RankSummary,
    Series,
    Stat,
    Straggler,
    UnitComm,
)
from hybridprof.datamodel.measures import SERIES_DECIMALS
from hybridprof.errors import UsageError

# A straggler must be slower than the other ranks' median by this much (fraction of it), by at
# least STRAGGLER_MIN_US (sub-50 us differences are scheduling noise on a busy machine), and by at
# least this share of the step (a layer that costs the step under 1% is not worth a finding).
STRAGGLER_RATIO = 0.2
STRAGGLER_MIN_US = 50.0
STRAGGLER_STEP_SHARE = 0.01


def merge_sessions(sessions: Sequence[ProfileSession]) -> ProfileSession:
    """One merged session from every rank's session (any order); refuses mismatched runs. Ranks
    that ran different numbers of iterations are merged over those every rank ran, with a
    warning."""
    cut, cut_warning = to_common_iterations(check_mergeable(sessions))
    # Each rank as its own table states it (means over its typical steps), so that a merged
    # layer is the median rank's figure of those tables.
    ordered = [typical_means(s) for s in cut]
    ranks = RankRecords.of(ordered)
    paths = _paths(ordered)
    layers = tuple(_rank_layer(ranks, path) for path in paths)
    # A layer that calls a collective itself waits there for the slowest rank: its time shows who
    # waited, not who was slow, so it is never called a straggler.
    waits = {c.layer for s in ordered for c in s.collectives if c.layer is not None}
    stragglers = tuple(s for path in paths if path not in waits and (s := _straggler(ranks, path)))
    collectives, waiting = _merged_collectives(ordered)
    _add_unit_waiting(waiting, [s.fsdp for s in ordered])
    summaries = tuple(_summary(s, w) for s, w in zip(ordered, waiting, strict=True))
    first = ordered[0]
    plan = replace(
        first.plan, findings=first.plan.findings + tuple(map(_straggler_finding, stragglers))
    )
    return replace(
        first,
        plan=plan,
        records=tuple(_merged_record(ranks, path) for path in paths),
        iterations=min(s.iterations for s in ordered),
        iteration_cpu_us=_median_per_iteration([s.iteration_cpu_us for s in ordered]),
        interrupted=any(s.interrupted for s in ordered),
        warnings=(*([cut_warning] if cut_warning else []), *_rank_warnings(ordered)),
        duration_s=max(s.duration_s for s in ordered),
        rank=None,
        collectives=collectives,
        ranks=MergedRanks(len(ordered), summaries, layers, stragglers),
        memory=merge_memory(ordered),
        fsdp=merged_unit_comm([s.fsdp for s in ordered]),
        tp=merged_unit_comm([s.tp for s in ordered]),
    )


def merged_unit_comm(ordered: Sequence[tuple[UnitComm, ...]]) -> tuple[UnitComm, ...]:
    """Each FSDP2 unit's (or tensor-parallel layer's) communication across the ranks, from each
    rank's: the median over ranks of each rank's median time (min and max: the lowest and
    highest over every rank's iterations), calls and bytes as the median rank has them; a rank
    without a unit's kind counts 0 for it. A collective every rank timed per iteration gets each
    rank's wait and the rank waited for (`_unit_waits`)."""
    keys = list(dict.fromkeys((c.path, c.kind) for comms in ordered for c in comms))
    found = [{(c.path, c.kind): c for c in comms} for comms in ordered]
    merged = []
    for key in keys:
        per_rank = [by_key.get(key, UnitComm(*key, 0.0, Stat(0.0, 0.0, 0.0))) for by_key in found]
        time = Stat(
            median_or_zero([c.time_us.median for c in per_rank]),
            min(c.time_us.min for c in per_rank),
            max(c.time_us.max for c in per_rank),
        )
        calls = median_or_zero([c.calls for c in per_rank])
        nbytes = round(median_or_zero([c.nbytes for c in per_rank]))
        group = next((c.group for c in per_rank if c.group), "")
        exposed = [c.exposed_us for c in per_rank if c.exposed_us is not None]
        wait_us, waited_for = _unit_waits(per_rank)
        merged.append(
            UnitComm(
                key[0],
                key[1],
                calls,
                time,
                nbytes,
                group,
                iteration_us=_median_per_iteration([c.iteration_us for c in per_rank]),
                exposed_us=_across([e.median for e in exposed]) if exposed else None,
                wait_us=wait_us,
                waited_for=waited_for,
            )
        )
    return tuple(merged)


# An FSDP2 copy-out is the rank's own copying, not a collective: no rank waits in it for another.
_NOT_COLLECTIVES = frozenset({"copy_out"})
# A tensor-parallel layer's collectives keep their time per step for the rank's own means; their
# waits across ranks are not worked out (docs/torchrun.md: wait is FSDP2's).
_NO_WAITS = _NOT_COLLECTIVES | {"tp_forward", "tp_backward"}


def _unit_waits(per_rank: Sequence[UnitComm]) -> tuple[tuple[float, ...], int | None]:
    """A collective's `wait_us` (per rank, the median over iterations of its time beyond the
    shortest rank's in the same iteration) and `waited_for` (the rank with the shortest time in
    the most iterations, the lowest of a tie: the late rank arrives last and waits least); none
    without two ranks or without every rank's per-iteration times."""
    series = [c.iteration_us for c in per_rank]
    waits = _beyond_fastest(series)
    if len(series) < 2 or not waits[0] or per_rank[0].kind in _NO_WAITS:
        return (), None
    shortest = [0] * len(series)
    for i in range(len(waits[0])):
        shortest[min(range(len(series)), key=lambda rank: series[rank][i])] += 1
    medians = tuple(round(median_or_zero(w), SERIES_DECIMALS) for w in waits)
    return medians, shortest.index(max(shortest))


def _add_unit_waiting(waiting: list[list[float]], ordered: Sequence[tuple[UnitComm, ...]]) -> None:
    """Each rank's wait in the FSDP2 units' collectives, per iteration, into its waiting (the
    iterations `waiting` holds: those every rank timed its communication in)."""
    found = [{(c.path, c.kind): c for c in comms} for comms in ordered]
    for key in dict.fromkeys(key for by_key in found for key in by_key):
        per_rank = [by_key.get(key) for by_key in found]
        if key[1] in _NOT_COLLECTIVES or any(c is None for c in per_rank):
            continue
        waits = _beyond_fastest([c.iteration_us for c in per_rank if c is not None])
        for rank, series in enumerate(waits):
            for i, value in enumerate(series[: len(waiting[rank])]):
                waiting[rank][i] += value


def _beyond_fastest(series: Sequence[Sequence[float]]) -> list[list[float]]:
    """Per rank and iteration (those every rank has), its time beyond the fastest rank's in
    the same iteration: the rank that arrives last waits least, so the fastest time is the
    transfer itself and every other rank's excess is waiting."""
    count = min((len(s) for s in series), default=0)
    fastest = [min(s[i] for s in series) for i in range(count)]
    return [[s[i] - fastest[i] for i in range(count)] for s in series]


def _rank_warnings(ordered: list[ProfileSession]) -> list[str]:
    return [f"rank {_rank(s)}: {w}" for s in ordered for w in s.warnings]


def check_mergeable(sessions: Sequence[ProfileSession]) -> list[ProfileSession]:
    """The sessions sorted by rank, after checking they are the ranks of one run, all of them."""
    if not sessions:
        raise UsageError("no session to merge; give every rank's session-rank*.json")
    for session in sessions:
        if session.rank is None:
            kind = "a merged session" if session.ranks else "a single-process session"
            raise UsageError(
                f"{kind} cannot be merged; give the session-rank*.json files of one torchrun run"
            )
    ordered = sorted(sessions, key=_rank)
    _check_world(ordered)
    _check_same_model(ordered)
    return ordered


def _rank(session: ProfileSession) -> int:
    assert session.rank is not None
    return session.rank.info.rank


def _world(session: ProfileSession) -> int:
    assert session.rank is not None
    return session.rank.info.world_size


def _check_world(ordered: list[ProfileSession]) -> None:
    sizes = sorted({_world(s) for s in ordered})
    if len(sizes) > 1:
        raise UsageError(
            f"the sessions come from runs of different world sizes ({', '.join(map(str, sizes))}); "
            "merge the sessions of one torchrun run"
        )
    ranks = [_rank(s) for s in ordered]
    twice = sorted({r for r in ranks if ranks.count(r) > 1})
    if twice:
        raise UsageError(f"rank {twice[0]} is given twice; give each rank's session once")
    world = sizes[0]
    if len(ranks) < world:  # the lowest rank not given (ranks are below the world size)
        missing = next(r for r in range(len(ranks) + 1) if r not in set(ranks))
        raise UsageError(
            f"rank {missing} of {world} is missing; give all {world} session-rank*.json"
        )


def _check_same_model(ordered: list[ProfileSession]) -> None:
    first = ordered[0]
    for other in ordered[1:]:
        difference = _model_difference(first, other)
        if difference:
            raise UsageError(
                f"rank {_rank(other)}'s session profiled another model than rank {_rank(first)}'s: "
                f"{difference}; merge the sessions of one run"
            )


def _model_difference(first: ProfileSession, other: ProfileSession) -> str | None:
    """What tells `other`'s model from `first`'s, the first difference found (None: the same)."""
    a, b = _rank(first), _rank(other)
    if first.plan.root_class != other.plan.root_class:
        return f"class {_short(other.plan.root_class)} against {_short(first.plan.root_class)}"
    hashes = (first.model_hash, other.model_hash)
    if None not in hashes and hashes[0] != hashes[1]:
        where = f" ({_short(other.model_file or '?')})"
        return (
            f"the model file{where} was changed between them (its sha256 starts "
            f"{str(hashes[1])[:12]} on rank {b}, {str(hashes[0])[:12]} on rank {a})"
        )
    mine, theirs = set(first.plan.selected_paths()), set(other.plan.selected_paths())
    if mine != theirs:
        only_first = sorted(mine - theirs)
        if only_first:
            return f"rank {b} did not select {_short(only_first[0] or '(root)')} (rank {a} did)"
        only_other = sorted(theirs - mine)
        return f"rank {b} selected {_short(only_other[0] or '(root)')} (rank {a} did not)"
    return None


def _short(text: str) -> str:
    """A name or path as said in a one-line error: at most 80 characters."""
    return text if len(text) <= 80 else text[:77] + "..."


def _paths(ordered: list[ProfileSession]) -> list[str]:
    """Every profiled path, in rank 0's order, then any only other ranks saw."""
    seen: dict[str, None] = {}
    for session in ordered:
        seen.update((r.path, None) for r in session.records)
    return list(seen)


def layer_us(record: ModuleRecord | None, device: bool) -> float:
    """A layer's median time per iteration, forward plus backward (device time when measured)."""
    if record is None:
        return 0.0
    if device and record.total_device_us is not None:
        back = record.backward_self_device_us
        return record.total_device_us.median + (back.median if back else 0.0)
    back_cpu = record.backward_total_cpu_us
    return record.total_cpu_us.median + (back_cpu.median if back_cpu else 0.0)


def _layer_noise(record: ModuleRecord | None) -> float:
    """How much the layer's own time moved over its iterations (max - min, forward + backward)."""
    if record is None:
        return 0.0
    noise = record.total_cpu_us.max - record.total_cpu_us.min
    back = record.backward_total_cpu_us
    return noise + (back.max - back.min if back else 0.0)


@dataclass(frozen=True, slots=True)
class RankRecords:
    """The ranks' sessions in rank order, and each rank's records by path: built once, so each
    layer is looked up in a dict (a scan of the records per lookup made the merge of 10,000
    layers quadratic: 604 s for 8 ranks)."""

    sessions: list[ProfileSession]
    by_path: list[dict[str, ModuleRecord]]

    @classmethod
    def of(cls, ordered: list[ProfileSession]) -> RankRecords:
        return cls(ordered, [{r.path: r for r in s.records} for s in ordered])

    def records(self, path: str) -> list[ModuleRecord | None]:
        return [index.get(path) for index in self.by_path]


def _rank_layer(ranks: RankRecords, path: str) -> RankLayer:
    per_rank = tuple(
        layer_us(record, s.use_device)
        for s, record in zip(ranks.sessions, ranks.records(path), strict=True)
    )
    slowest = max(range(len(per_rank)), key=lambda r: per_rank[r])
    return RankLayer(path, per_rank, slowest, max(per_rank) - min(per_rank))


def _straggler(ranks: RankRecords, path: str) -> Straggler | None:
    """The slowest rank on `path`, if it is slower than the others by more than its own noise.

    Consistently slower: its excess over the other ranks' median is larger than its own spread
    over iterations, and large enough to matter (the STRAGGLER_* floors).
    """
    ordered = ranks.sessions
    if len(ordered) < 2:
        return None
    layer = _rank_layer(ranks, path)
    slow = layer.slowest_rank
    others = statistics.median(us for r, us in enumerate(layer.rank_us) if r != slow)
    excess = layer.rank_us[slow] - others
    noise = _layer_noise(ranks.by_path[slow].get(path))
    step = min(median_or_zero(s.rank.step_us) if s.rank else 0.0 for s in ordered)
    floor = max(STRAGGLER_RATIO * others, STRAGGLER_MIN_US, STRAGGLER_STEP_SHARE * step)
    if excess <= max(noise, floor):
        return None
    return Straggler(path, slow, layer.rank_us[slow], others, noise)


def _straggler_finding(s: Straggler) -> Finding:
    return Finding(
        FindingKind.STRAGGLER,
        s.path,
        f"rank {s.rank} is consistently slower on this layer: {s.rank_us / 1000:.2f} ms per "
        f"iteration against a median of {s.others_us / 1000:.2f} ms on the other ranks "
        f"(its own iteration noise: {s.noise_us / 1000:.2f} ms); every other rank waits for it "
        "at the next collective",
    )


def _across(values: Sequence[float]) -> Stat:
    """Median, min and max over the ranks."""
    return Stat.of(list(values))


def _merged_record(ranks: RankRecords, path: str) -> ModuleRecord:
    records = ranks.records(path)
    present = [r for r in records if r is not None]
    base = present[0]

    def across(field: Callable[[ModuleRecord], Stat | None]) -> Stat | None:
        stats = [field(r) for r in present]
        if any(s is None for s in stats):
            return None
        return _across([s.median for s in stats if s is not None])

    self_cpu = across(lambda r: r.self_cpu_us)
    total_cpu = across(lambda r: r.total_cpu_us)
    assert self_cpu is not None and total_cpu is not None
    return replace(
        base,
        self_cpu_us=self_cpu,
        total_cpu_us=total_cpu,
        self_device_us=across(lambda r: r.self_device_us),
        total_device_us=across(lambda r: r.total_device_us),
        backward_self_cpu_us=across(lambda r: r.backward_self_cpu_us),
        backward_total_cpu_us=across(lambda r: r.backward_total_cpu_us),
        backward_self_device_us=across(lambda r: r.backward_self_device_us),
        per_iteration=_merged_series(present),
    )


# (IterationSeries field, how to read it from a rank's series: totals fall back to self times)
_SERIES_READERS: tuple[tuple[str, Callable[[IterationSeries], Series | None]], ...] = (
    ("self_cpu_us", lambda s: s.self_cpu_us),
    ("total_cpu_us", IterationSeries.total_cpu),
    ("self_device_us", lambda s: s.self_device_us),
    ("total_device_us", IterationSeries.total_device),
    ("backward_self_cpu_us", lambda s: s.backward_self_cpu_us),
    ("backward_total_cpu_us", IterationSeries.backward_total_cpu),
)


def _merged_series(present: list[ModuleRecord]) -> IterationSeries | None:
    """Iteration i's median across the ranks, per quantity; None when a rank has no series."""
    ranks = [r.per_iteration for r in present]
    if not ranks or any(s is None for s in ranks):
        return None
    merged: dict[str, Series | None] = {}
    for name, read in _SERIES_READERS:
        found = [read(s) for s in ranks if s is not None]
        values = None if any(f is None for f in found) else [f.values for f in found if f]
        merged[name] = Series.of(_median_per_iteration(values)) if values else None
    self_cpu = merged.pop("self_cpu_us")
    assert self_cpu is not None
    # A total equal to its self time in every iteration is stored once, as a rank's file does.
    for total, own in (
        ("total_cpu_us", self_cpu),
        ("total_device_us", merged["self_device_us"]),
        ("backward_total_cpu_us", merged["backward_self_cpu_us"]),
    ):
        if merged[total] == own:
            merged[total] = None
    return IterationSeries(self_cpu, **merged)


def _median_per_iteration(ranks: Sequence[Sequence[float]]) -> tuple[float, ...]:
    """Iteration i's median over the ranks, for the iterations every rank has."""
    count = min((len(values) for values in ranks), default=0)
    return tuple(statistics.median(values[i] for values in ranks) for i in range(count))


def _merged_collectives(
    ordered: list[ProfileSession],
) -> tuple[tuple[CollectiveStat, ...], list[list[float]]]:
    """One row per collective across ranks (its name and the layer that called it: two layers
    call the same all-reduce), and each rank's waiting per common iteration."""
    keys = list(dict.fromkeys((c.name, c.layer) for s in ordered for c in s.collectives))
    by_key = [{(c.name, c.layer): c for c in s.collectives} for s in ordered]
    common = min((len(_comm_times(s)) for s in ordered), default=0)
    waiting = [[0.0] * common for _ in ordered]
    rows = []
    for key in keys:
        per_rank = [found.get(key) for found in by_key]
        present = [c for c in per_rank if c is not None]
        waits = _waiting(per_rank) if len(present) == len(ordered) else None
        if waits is not None:
            for rank, series in enumerate(waits):
                for i, value in enumerate(series[:common]):
                    waiting[rank][i] += value
        rows.append(
            replace(
                present[0],
                time_us=_across([c.time_us.median for c in present]),
                iteration_us=(),
                waiting_us=_across([median_or_zero(w) for w in waits]) if waits else None,
            )
        )
    return tuple(rows), waiting


def _waiting(per_rank: Sequence[CollectiveStat | None]) -> list[list[float]] | None:
    """Per rank and iteration, the time beyond the fastest rank's in the same iteration."""
    waits = _beyond_fastest([c.iteration_us for c in per_rank if c is not None])
    return waits if waits and waits[0] else None


def _comm_times(session: ProfileSession) -> tuple[float, ...]:
    return session.rank.comm_us if session.rank else ()


def _summary(session: ProfileSession, waiting: list[float]) -> RankSummary:
    run = session.rank
    assert run is not None
    step = Stat.of(run.step_us)
    comm = Stat.of(run.comm_us)
    return RankSummary(
        info=run.info,
        step_us=step,
        comm_us=comm,
        waiting_us=median_or_zero(waiting),
        comm_share=comm.median / step.median if step.median > 0 else 0.0,
        iterations=session.iterations,
        interrupted=session.interrupted,
    )


__all__ = ["check_mergeable", "layer_us", "merge_sessions"]
