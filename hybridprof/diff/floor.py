"""The min-delta floor: a layer whose time changed by less than it is never a regression by itself
(no torch).

A layer's measured time holds more than its own work: the profiler records each op it runs (a
fixed cost per op, landing in the layer's self time) and every figure is read off a clock and kept
to 0.1 us. A change of a few of those costs is what one more recorded op, a cache line or a
preempted microsecond makes, not what code does, and it is a large share of a small layer:
the layers of a few us each that a noisy CI machine flagged "slower" by 37-56% had moved 1-3 us.
So a change must reach both the threshold (a share) and this floor (an amount) to count:

    floor = max(RESOLUTION_STEPS x the timer's resolution, OPS x the profiler's cost per op)

The per-op cost is measured by `hybridprof diff --run` in the same process, just before its
iterations (`runtime.strategies.op_cost`: the time of a loop of small ops with the profiler
recording them, less the time without); a slower or busier machine then gets a higher floor.
Saved sessions do not record it, so `diff a.json b.json` uses REFERENCE_OP_COST_US, the cost
measured that way on a shared 2-core x86 machine (0.25-0.30 us per op, torch 2.13). The layer's
whole iteration is judged against the same floor. `--min-delta` sets the floor outright.
"""

from __future__ import annotations

from dataclasses import dataclass

TIMER_RESOLUTION_US = 0.1  # per-iteration times are kept to 0.1 us (datamodel.SERIES_DECIMALS)
RESOLUTION_STEPS = 10
OPS = 20  # the profiler's cost of recording this many ops
REFERENCE_OP_COST_US = 0.25


@dataclass(frozen=True, slots=True)
class Floor:
    """The min-delta floor in us and how it was chosen (said in every report)."""

    us: float
    basis: str


def default_floor(op_cost_us: float | None) -> Floor:
    """The floor from the profiler's measured per-op cost (None: not measured, saved sessions)."""
    measured = op_cost_us is not None and op_cost_us > 0
    cost = op_cost_us if measured and op_cost_us is not None else REFERENCE_OP_COST_US
    by_ops = OPS * cost
    by_clock = RESOLUTION_STEPS * TIMER_RESOLUTION_US
    where = (
        "measured in this run"
        if measured
        else "not recorded in saved sessions: the cost measured on a reference machine"
    )
    if by_ops >= by_clock:
        basis = f"{OPS} x the profiler's cost per recorded op, {cost:.2f}us ({where})"
    else:
        basis = f"{RESOLUTION_STEPS} x the timer's {TIMER_RESOLUTION_US:g}us resolution"
    return Floor(round(max(by_ops, by_clock), 2), basis)


def given_floor(us: float) -> Floor:
    return Floor(us, "given with --min-delta")


__all__ = ["OPS", "REFERENCE_OP_COST_US", "Floor", "default_floor", "given_floor"]
