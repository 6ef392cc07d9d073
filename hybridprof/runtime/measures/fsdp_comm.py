"""FSDP2 units' and tensor-parallel layers' communication over the measured iterations: one
`UnitComm` per layer and kind.

Each iteration's measure holds, per (unit path, kind), the calls and wall time of FSDP2's ranges
(`events/fsdp_names.py`); an iteration without a kind for a unit counts 0 for it. Bytes are the
median calls per iteration times the bytes one call moves (`distributed/fsdp_units.py`), so they
are exact whenever the calls are the same each iteration, as they are in a training loop.
Each unit's kind keeps its time in every iteration (the merge across ranks compares them) and
the exposed part of it (`events/fsdp_exposed.py`).

A tensor-parallel layer's kinds ("tp_forward", "tp_backward": its collectives and the waits for
them, `events/tp_comm.py`) carry the bytes they sent, per iteration: their median is the figure;
and their time in every iteration, as a unit's.
"""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.analysis.stats import median_int
from hybridprof.datamodel import Series, Stat, UnitComm
from hybridprof.runtime.measures.iteration import CommMeasure

# FSDP2's kinds of communication, in the order a step runs them, then tensor parallel's
KINDS = ("all_gather", "copy_out", "regather", "reduce_scatter")
TP_KINDS = ("tp_forward", "tp_backward")
# (unit path, all-gather bytes per call, reduce-scatter bytes per call)
UnitSizes = tuple[tuple[str, int, int], ...]


def unit_comm(
    iterations: Sequence[dict[tuple[str, str], CommMeasure]], sizes: UnitSizes
) -> tuple[UnitComm, ...]:
    """Per FSDP2 unit (in order of first appearance) and kind (in step order), over
    `iterations`."""
    keys = _keys(iterations, KINDS)
    per_call = {path: (gather, scatter) for path, gather, scatter in sizes}
    return tuple(_one(key, iterations, per_call) for key in keys)


def tp_comm(
    iterations: Sequence[dict[tuple[str, str], CommMeasure]], groups: Sequence[tuple[str, str]]
) -> tuple[UnitComm, ...]:
    """Per tensor-parallel layer (in order of first appearance) and direction, over `iterations`,
    each with its process group (`groups`: path -> its mesh dimension and group)."""
    group_of = dict(groups)
    found = []
    for key in _keys(iterations, TP_KINDS):
        measured = [comm.get(key) for comm in iterations]
        times = [m.time_us if m is not None else 0.0 for m in measured]
        calls = median_int([m.calls if m is not None else 0 for m in measured])
        nbytes = median_int([m.nbytes if m is not None else 0 for m in measured])
        path, kind = key
        # each step's time kept: a rank's table states the layer's self time and these as means
        # over the same typical steps, so its compute (self less these) is of one statistic
        group = group_of.get(path, "")
        every = Series.of(times).values
        found.append(UnitComm(path, kind, float(calls), Stat.of(times), nbytes, group, every))
    return tuple(found)


def _keys(
    iterations: Sequence[dict[tuple[str, str], CommMeasure]], kinds: tuple[str, ...]
) -> list[tuple[str, str]]:
    keys = list(dict.fromkeys(key for comm in iterations for key in comm if key[1] in kinds))
    order: dict[str, int] = {}
    for path, _ in keys:
        order.setdefault(path, len(order))
    keys.sort(key=lambda key: (order[key[0]], kinds.index(key[1])))
    return keys


def _one(
    key: tuple[str, str],
    iterations: Sequence[dict[tuple[str, str], CommMeasure]],
    per_call: dict[str, tuple[int, int]],
) -> UnitComm:
    found = [comm.get(key) for comm in iterations]
    times = [m.time_us if m is not None else 0.0 for m in found]
    exposed = [m.exposed_us if m is not None else 0.0 for m in found]
    calls = median_int([m.calls if m is not None else 0 for m in found])
    path, kind = key
    gather, scatter = per_call.get(path, (0, 0))
    one = {"all_gather": gather, "regather": gather, "reduce_scatter": scatter}.get(kind, 0)
    return UnitComm(
        path,
        kind,
        float(calls),
        Stat.of(times),
        calls * one,
        iteration_us=Series.of(times).values,  # 0.1 us kept, as every per-iteration series
        exposed_us=Stat.of(exposed),
    )


__all__ = ["KINDS", "TP_KINDS", "UnitSizes", "tp_comm", "unit_comm"]
