"""FSDP2 units' communication over the measured iterations: one `UnitComm` per unit and kind.

Each iteration's measure holds, per (unit path, kind), the calls and wall time of FSDP2's ranges
(`events/fsdp_names.py`); an iteration without a kind for a unit counts 0 for it. Bytes are the
median calls per iteration times the bytes one call moves (`distributed/fsdp_units.py`), so they
are exact whenever the calls are the same each iteration, as they are in a training loop.
"""

from __future__ import annotations

from collections.abc import Sequence

from hybridprof.analysis.stats import median_int
from hybridprof.datamodel import Stat, UnitComm
from hybridprof.runtime.measures.iteration import CommMeasure

# FSDP2's kinds of communication, in the order a step runs them
KINDS = ("all_gather", "copy_out", "regather", "reduce_scatter")
# (unit path, all-gather bytes per call, reduce-scatter bytes per call)
UnitSizes = tuple[tuple[str, int, int], ...]


def unit_comm(
    iterations: Sequence[dict[tuple[str, str], CommMeasure]], sizes: UnitSizes
) -> tuple[UnitComm, ...]:
    """Per unit (in order of first appearance) and kind (in step order), over `iterations`."""
    keys = list(dict.fromkeys(key for comm in iterations for key in comm))
    order: dict[str, int] = {}
    for path, _ in keys:
        order.setdefault(path, len(order))
    keys.sort(key=lambda key: (order[key[0]], KINDS.index(key[1])))
    per_call = {path: (gather, scatter) for path, gather, scatter in sizes}
    return tuple(_one(key, iterations, per_call) for key in keys)


def _one(
    key: tuple[str, str],
    iterations: Sequence[dict[tuple[str, str], CommMeasure]],
    per_call: dict[str, tuple[int, int]],
) -> UnitComm:
    found = [comm.get(key) for comm in iterations]
    times = [m.time_us if m is not None else 0.0 for m in found]
    calls = median_int([m.calls if m is not None else 0 for m in found])
    path, kind = key
    gather, scatter = per_call.get(path, (0, 0))
    one = {"all_gather": gather, "regather": gather, "reduce_scatter": scatter}.get(kind, 0)
    return UnitComm(path, kind, float(calls), Stat.of(times), calls * one)


__all__ = ["KINDS", "UnitSizes", "unit_comm"]
