"""Change points per layer on synthetic histories whose steps are known: the issue's must-holds
(60 commits x 40 layers at 5% noise, 20 seeds) and the edges (few layers, missing commits, a
step at the window's end, a step under the minimum change)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from hybridprof.history.change_points import MIN_SEGMENT, find_changes, judged, noise_of
from tests.history_synthetic import (
    ENVIRONMENT_STEP,
    LAYER_STEP,
    score,
    synthetic_history,
)

SEEDS = range(20)


def test_a_step_of_one_layer_is_found_at_its_commit_beside_a_step_of_every_layer() -> None:
    # The must-holds, both steps in one history: +10% of every layer at commit 20 and +15% of
    # one layer at commit 37, 5% noise.
    scores = [
        score(find_changes(synthetic_history(seed).values), synthetic_history(seed))
        for seed in SEEDS
    ]
    assert sum(s.found for s in scores) >= 19
    assert max(s.false for s in scores) <= 1
    assert all(s.environment for s in scores)


@pytest.mark.parametrize("seed", SEEDS)
def test_a_step_of_every_layer_is_the_environments_and_no_layers(seed: int) -> None:
    history = synthetic_history(seed, layer_step=None)
    changes = find_changes(history.values)
    (step,) = changes.environment
    assert abs(step.index - ENVIRONMENT_STEP[0]) <= 1
    assert step.low <= 1.10 <= step.high
    blamed = [s for steps in changes.layers for s in steps if not s.environment]
    assert len(blamed) <= 1


def test_a_step_of_one_layer_on_a_steady_machine() -> None:
    found = covered = 0
    for seed in SEEDS:
        history = synthetic_history(seed, environment_step=None)
        changes = find_changes(history.values)
        assert changes.environment == ()
        steps = changes.layers[history.stepped]
        hit = [s for s in steps if abs(s.index - LAYER_STEP[0]) <= 1]
        found += bool(hit)
        others = sum(len(s) for row, s in enumerate(changes.layers) if row != history.stepped)
        assert others + len(steps) - len(hit) <= 1
        if hit:
            assert hit[0].slower
            covered += hit[0].low <= 1.15 <= hit[0].high
    assert found >= 19
    assert covered >= 16  # a 95% interval: about 1 in 20 misses the true ratio


def test_no_step_no_change_point_in_most_histories() -> None:
    false = [
        sum(
            len(s)
            for s in find_changes(
                synthetic_history(seed, layer_step=None, environment_step=None).values
            ).layers
        )
        for seed in SEEDS
    ]
    assert max(false) <= 1 and sum(false) <= 3


def test_with_few_layers_nothing_is_labelled_environment_and_a_step_is_still_found() -> None:
    history = synthetic_history(3, layers=3, environment_step=None)
    changes = find_changes(history.values)
    assert not changes.drift_known and changes.environment == ()
    assert [s.index for s in changes.layers[history.stepped]] == [LAYER_STEP[0]]


def test_a_layer_missing_at_some_commits_is_judged_on_those_it_has() -> None:
    history = synthetic_history(5, noise=0.02, environment_step=None)
    values = history.values.copy()
    values[history.stepped, :10] = np.nan  # added at commit 10
    values[history.stepped, 36] = np.nan  # and not measured at the commit before its step
    (step,) = find_changes(values).layers[history.stepped]
    assert step.index == LAYER_STEP[0] and step.last_before == 35


def test_a_step_shows_once_two_commits_after_it_are_measured_and_one_hiccup_is_none() -> None:
    rng = np.random.default_rng(0)
    level = 100.0 * (1 + 0.02 * rng.standard_normal(40))
    level[38:] *= 1.3
    assert [s.index for s in find_changes(level[None, :]).layers[0]] == [38]
    assert find_changes(level[None, :39]).layers[0] == ()  # one commit after it: not yet
    level[20] *= 1.5  # one slow run in the middle, 25 noises high
    assert [s.index for s in find_changes(level[None, :]).layers[0]] == [38]
    assert MIN_SEGMENT == 2


def test_a_step_under_the_minimum_change_is_no_change_point() -> None:
    values = np.log(np.r_[np.full(30, 100.0), np.full(30, 103.0)])
    values += 1e-4 * np.random.default_rng(1).standard_normal(60)
    assert judged(values, [30], math.log1p(0.05)) == []
    (step,) = judged(values, [30], math.log1p(0.02))
    assert step.index == 30 and step.ratio == pytest.approx(1.03, rel=1e-3)


def test_hiccups_make_no_change_points() -> None:
    # 1% of the values 1.5-3x slower (a run that waited for the machine).
    false = [
        score(find_changes(h.values), h).false
        for h in (synthetic_history(seed, outliers=0.01) for seed in SEEDS)
    ]
    assert max(false) <= 2 and sum(false) <= 6


def test_noise_is_read_through_the_steps() -> None:
    rng = np.random.default_rng(2)
    values = 0.05 * rng.standard_normal(200)
    values[100:] += 1.0  # a step of 20 sigmas moves one difference only
    assert noise_of(values) == pytest.approx(0.05, rel=0.2)


def test_one_busy_run_that_every_layer_felt_unequally_is_left_out() -> None:
    history = synthetic_history(6, layer_step=None, environment_step=None)
    values = history.values.copy()
    felt = np.random.default_rng(7).uniform(1.4, 2.2, values.shape[0])  # each layer its own
    values[:, 50] *= felt
    changes = find_changes(values)
    assert changes.busy == (50,)
    assert sum(len(s) for s in changes.layers) <= 1 and changes.environment == ()
    assert find_changes(history.values).busy == ()


def test_judged_takes_any_breaks_a_detector_gives() -> None:
    values = np.log(np.r_[np.full(5, 100.0), np.full(5, 200.0)])
    (step,) = judged(values, [0, 5, 5, 10, 12], math.log1p(0.05))  # ends, repeats, beyond
    assert step.index == 5 and step.ratio == pytest.approx(2.0)
    assert judged(np.log(np.array([100.0, 200.0])), [1], math.log1p(0.05)) == []  # untestable


@pytest.mark.parametrize("seed", range(5))
def test_the_routine_loaded_alone_finds_what_ruptures_public_api_finds(seed: int) -> None:
    """`detect` calls ruptures' C routine without importing the package (its scipy imports cost
    seconds); the change points must be exactly those of `KernelCPD(...).predict(pen=...)`."""
    import ruptures

    from hybridprof.history.change_points import PENALTY, _ruptures_pelt_l2, detect

    assert _ruptures_pelt_l2() is not None  # loaded alone, not the fallback
    rng = np.random.default_rng(seed)
    series = np.concatenate([rng.normal(level, 1.0, 30) for level in (0.0, 6.0, -4.0, 1.0)])
    algo = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT)
    expected = [e for e in algo.fit(series.reshape(-1, 1)).predict(pen=PENALTY) if e < len(series)]
    assert detect(series) == expected
    assert len(expected) >= 2  # the steps are there to be found


def test_show_does_not_import_the_ruptures_package() -> None:
    """The cost `history show` avoids: the package's own imports (scipy.stats among them)."""
    import subprocess
    import sys

    code = (
        "import sys, numpy as np\n"
        "from hybridprof.history.change_points import detect\n"
        "detect(np.r_[np.zeros(20), np.full(20, 9.0)])\n"
        "print('ruptures' in sys.modules, 'scipy.stats' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
