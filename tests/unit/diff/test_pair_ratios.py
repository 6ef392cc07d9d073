"""Paired runs (`hybridprof.diff.pair_ratios`), the min-delta floor (`hybridprof.diff.floor`) and
the "inconclusive" verdict, on hand-made series whose drift, noise and changes are known."""

from __future__ import annotations

import random

import pytest

from hybridprof.datamodel import IterationSeries, ModuleRecord, ProfileSession, Series, Stat
from hybridprof.diff import DiffResult, default_floor, diff_series, diff_sessions, given_floor
from hybridprof.diff.floor import OPS, REFERENCE_OP_COST_US, RESOLUTION_STEPS
from hybridprof.diff.judge import judge
from hybridprof.diff.pair_ratios import family_confidence, paired_change, paired_ratio
from hybridprof.reporting.text.diff_text import render_diff_text
from tests.sessions import _plan, _session, op, target

PAIRS = 30
LAYERS = (("stem", "Conv2d", 300.0), ("conv", "Conv2d", 800.0), ("act", "ReLU", 40.0))


def drift(seed: int, low: float = 0.6, high: float = 1.8) -> list[float]:
    """How busy the machine was at each pair: both halves of a pair share it."""
    rng = random.Random(seed)
    return [rng.uniform(low, high) for _ in range(PAIRS)]


def series(center: float, machine: list[float], rng: random.Random) -> list[float]:
    return [center * m * (1 + rng.uniform(-0.02, 0.02)) for m in machine]


def paired_runs(
    machine: list[float], scale: dict[str, float] | None = None, seed: int = 1
) -> tuple[ProfileSession, ProfileSession]:
    """Two sessions of one paired run: pair i of every layer saw machine[i] on both sides."""
    rng = random.Random(seed)
    sides = []
    for factors in ({}, scale or {}):
        records = []
        for path, cls, us in LAYERS:
            values = series(us * factors.get(path, 1.0), machine, rng)
            records.append(
                ModuleRecord(
                    path=path,
                    class_name=cls,
                    calls=PAIRS,
                    self_cpu_us=Stat.of(values),
                    total_cpu_us=Stat.of(values),
                    per_iteration=IterationSeries(Series.of(values)),
                    ops=(op("aten::x", 1, us, us),),
                )
            )
        iteration = [
            sum(r.per_iteration.self_cpu_us.values[i] for r in records) for i in range(PAIRS)
        ]  # type: ignore[union-attr]
        sides.append(
            _session(
                _plan("Net", tuple(target(p, c) for p, c, _ in LAYERS)),
                tuple(records),
                iterations=PAIRS,
                requested_iterations=PAIRS,
                iteration_cpu_us=tuple(iteration),
                model_hash="abc",
            )
        )
    return sides[0], sides[1]


def test_the_paired_ratio_is_the_median_of_per_pair_ratios_with_its_interval() -> None:
    base = [100.0 * m for m in drift(3)]
    new = [1.5 * b for b in base]  # every pair exactly 1.5x, however busy the machine was
    ratio = paired_ratio(base, new)
    assert ratio is not None and ratio.pairs == PAIRS
    assert ratio.ratio == pytest.approx(1.5) and ratio.low == pytest.approx(1.5)
    assert paired_ratio(base[:5], new[:5]) is None  # 5 pairs give no 95% interval
    # a pair with a zero (a layer not called in that iteration) is left out, not divided by
    with_zero = paired_ratio([0.0, *base[1:]], new)
    assert with_zero is not None and with_zero.pairs == PAIRS - 1


def test_drift_between_pairs_that_hides_everything_in_separate_runs_cancels_in_pairs() -> None:
    machine = drift(4)
    rng = random.Random(5)
    base, new = series(800.0, machine, rng), series(800.0 * 1.10, machine, rng)
    # judged as two separate runs, the machine's drift swamps a 10% slowdown
    assert diff_series("x", base, new, 5.0).verdict == "inconclusive"
    # pair by pair it is plain
    change = paired_change("x", base, new, 5.0)
    assert change.verdict == "slower" and change.paired is not None
    assert 1.08 < change.paired.low < 1.10 < change.paired.high < 1.12
    assert change.low is not None and change.low > 0


def test_the_same_model_in_pairs_has_nothing_slower_however_busy_the_machine() -> None:
    base, new = paired_runs(drift(6, 0.3, 3.0))
    diff = diff_sessions(base, new, paired=True)
    assert {layer.verdict for layer in diff.layers} == {"within noise"}
    assert diff.total.verdict == "within noise" and diff.shifts == ()
    assert diff.gate is not None and diff.gate.answer == "pass"
    assert diff.pairing is not None and diff.pairing.pairs == PAIRS


def test_a_heavier_layer_in_pairs_is_slower_and_first() -> None:
    base, new = paired_runs(drift(7, 0.3, 3.0), scale={"conv": 3.0})
    diff = diff_sessions(base, new, paired=True)
    assert (diff.layers[0].path, diff.layers[0].verdict) == ("conv", "slower")
    assert diff.gate is not None and diff.gate.answer == "regression"
    change = diff.layers[0].change("self_cpu_us")
    assert change is not None and change.paired is not None
    assert change.paired.ratio == pytest.approx(3.0, rel=0.02)
    assert "1 layer(s) slower: conv (+" in render_diff_text(diff)


def test_a_change_under_the_floor_is_never_slower() -> None:
    base = [4.0] * PAIRS
    new = [6.0] * PAIRS  # +50%, certainly: but 2 us
    assert paired_change("x", base, new, 5.0, min_delta_us=5.0).verdict == "within noise"
    assert paired_change("x", base, new, 5.0, min_delta_us=1.0).verdict == "slower"
    assert diff_series("x", base, new, 5.0, min_delta_us=5.0).verdict == "within noise"
    assert diff_series("x", base, new, 5.0, min_delta_us=1.0).verdict == "slower"
    # a small layer with a wide interval cannot reach the floor either: decided, not inconclusive
    assert judge(1.0, -2.0, 3.0, 4.0, 5.0, min_delta_us=5.0) == "within noise"


def test_an_interval_wider_than_the_threshold_that_reaches_a_regression_is_inconclusive() -> None:
    assert judge(2.0, -10.0, 14.0, 100.0, 5.0) == "inconclusive"
    # as wide, but no regression beyond the threshold is possible: decided
    assert judge(-8.0, -20.0, 3.0, 100.0, 5.0) == "within noise"
    # narrower than the threshold, the median under it: decided
    assert judge(4.0, 2.5, 6.0, 100.0, 5.0) == "within noise"


def test_the_default_floor_scales_with_the_measured_op_cost() -> None:
    measured = default_floor(0.5)
    assert measured.us == pytest.approx(OPS * 0.5) and "measured in this run" in measured.basis
    saved = default_floor(None)
    assert saved.us == pytest.approx(OPS * REFERENCE_OP_COST_US) and "reference" in saved.basis
    tiny = default_floor(0.001)  # a per-op cost below the clock's: the resolution sets it
    assert tiny.us == pytest.approx(RESOLUTION_STEPS * 0.1) and "resolution" in tiny.basis
    assert given_floor(12.0).us == 12.0


def test_floor_and_pairing_are_said_and_round_trip_through_json() -> None:
    base, new = paired_runs(drift(8), scale={"conv": 1.3})
    diff = diff_sessions(base, new, paired=True, floor=given_floor(7.5))
    text = render_diff_text(diff)
    assert "min delta: a change under 7.500us" in text and "given with --min-delta" in text
    assert "30 pairs of iterations in ABBA order" in text
    again = DiffResult.from_json(diff.to_json())
    assert again == diff and again.min_delta_us == 7.5 and again.pairing == diff.pairing


def test_each_interval_widens_with_the_figures_that_can_fail_the_gate() -> None:
    base = [100.0] * PAIRS
    new = [90.0] * 7 + [110.0] * (PAIRS - 7)  # 7 pairs faster, 23 slower: 95% alone says slower
    assert paired_change("x", base, new, 5.0).verdict == "slower"
    family = family_confidence(20)
    assert family == pytest.approx(1 - 0.05 / 20)
    wide = paired_change("x", base, new, 5.0, confidence=family)
    assert wide.verdict == "inconclusive" and wide.paired is not None
    assert wide.paired.low == pytest.approx(0.9) and wide.paired.confidence == round(family, 6)
    # diff_sessions takes m from the sessions: 3 layers' self times and the whole iteration
    base_run, new_run = paired_runs(drift(13))
    diff = diff_sessions(base_run, new_run, paired=True)
    change = diff.layers[0].change("self_cpu_us")
    assert change is not None and change.paired is not None
    assert change.paired.confidence == round(family_confidence(len(LAYERS) + 1), 6)
    assert "98.8% CI" in render_diff_text(diff, all_layers=True)
