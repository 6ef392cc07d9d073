"""The change-point libraries on the issue's synthetic test: detection, false change points, speed.

    .venv/bin/python benchmarks/bench_change_points.py --library ruptures [--seeds 20] [--rates 200]

The three libraries cannot share one venv (apache-otava pins numpy 2.2.0 and scipy < 1.17;
signal-processing-algorithms wants numpy < 2 and Python 3.11 only), so each runs in a venv of its
own with the repository on PYTHONPATH (benchmarks/README.md gives the commands). Every library
gets the same pipeline as `hybridprof history show`: the drift taken out, each series in units of
its noise and clipped (hybridprof.history.change_points), then the library's change points, then
the same t-test, 5% minimum change and p <= 0.001 on both sides of each. Only the detector
differs:

- ruptures: KernelCPD (linear kernel: PELT on an L2 cost, in C), penalty 25 noise variances;
- otava: apache-otava's `compute_change_points` (E-divisive in windows of 50, its t-test merge,
  max p-value 0.001: its defaults);
- spa: signal-processing-algorithms' `e_divisive` (permutation test, p-value 0.05 and 100
  permutations: its defaults).

It prints the issue's must-hold on `--seeds` seeds (60 commits x 40 layers at 5% noise, +10% of
every layer at commit 20, +15% of one layer at commit 37), the same rates over `--rates` seeds,
and with 1% of the values hiccups (1.5-3x), and the time per series.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hybridprof.history import change_points  # noqa: E402
from tests.history_synthetic import score, synthetic_history  # noqa: E402

Detector = Callable[[np.ndarray], list[int]]
PACKAGES = {"ruptures": "ruptures", "otava": "apache-otava", "spa": "signal-processing-algorithms"}


def otava_detector() -> Detector:
    from otava.analysis import compute_change_points

    def detect(series: np.ndarray) -> list[int]:
        points, _ = compute_change_points(list(series), window_len=50, max_pvalue=0.001)
        return sorted(int(p.index) for p in points)

    return detect


def spa_detector() -> Detector:
    from signal_processing_algorithms.energy_statistics.energy_statistics import e_divisive

    def detect(series: np.ndarray) -> list[int]:
        return sorted(int(i) for i in e_divisive(series, pvalue=0.05, permutations=100))

    return detect


def detector(library: str) -> Detector:
    if library == "ruptures":
        return change_points.detect
    return otava_detector() if library == "otava" else spa_detector()


class Timed:
    """The detector, timing its calls."""

    def __init__(self, detect: Detector) -> None:
        self.detect, self.seconds, self.calls = detect, 0.0, 0

    def __call__(self, series: np.ndarray) -> list[int]:
        start = time.perf_counter()
        try:
            return self.detect(series)
        finally:
            self.seconds += time.perf_counter() - start
            self.calls += 1


def rates(seeds: range, **synthetic: float) -> tuple[int, int, list[int]]:
    found = environment = 0
    false: list[int] = []
    for seed in seeds:
        history = synthetic_history(seed, **synthetic)  # type: ignore[arg-type]
        got = score(change_points.find_changes(history.values), history)
        found += got.found
        environment += got.environment
        false.append(got.false)
    return found, environment, false


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--library", choices=tuple(PACKAGES), default="ruptures")
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--rates", type=int, default=200)
    args = parser.parse_args()
    detect = detector(args.library)
    detect(np.random.default_rng(0).standard_normal(60))  # imports and first-call costs
    timed = Timed(detect)
    change_points.detect = timed  # the pipeline's detector: the only part that differs
    version = importlib.metadata.version(PACKAGES[args.library])
    print(
        f"{args.library} ({PACKAGES[args.library]} {version}; Python {platform.python_version()}, "
        f"numpy {np.__version__})"
    )
    found, env, false = rates(range(args.seeds))
    print(
        f"  must-hold, {args.seeds} seeds: the +15% step found at 37 +-1: {found}/{args.seeds}; "
        f"environment at 20: {env}/{args.seeds}; false change points: at most {max(false)} per "
        f"seed, {sum(false)} in all"
    )
    start = time.perf_counter()
    for name, extra in (("5% noise", {}), ("5% noise and 1% hiccups", {"outliers": 0.01})):
        found, env, false = rates(range(1000, 1000 + args.rates), **extra)
        n = args.rates
        print(
            f"  {name}, {n} seeds: found {100 * found / n:.1f}%, environment "
            f"{100 * env / n:.1f}%, {sum(false) / n:.2f} false change points per seed"
        )
    whole = (time.perf_counter() - start) / (2 * args.rates)
    per_series = 1e3 * timed.seconds / max(timed.calls, 1)
    print(
        f"  time: {per_series:.2f} ms per series in the detector, {1e3 * whole:.1f} ms per history"
    )


if __name__ == "__main__":
    main()
