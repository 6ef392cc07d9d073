"""Change points per layer, and the steps of the machine under them.

A layer's series is its self time at each commit of the window (the median of the commit's
sessions). Before any layer is judged, what moved every layer together is taken out: each layer's
log-time less its own median is a relative level, and the median of those over the layers at a
commit is the commit's drift: a busier machine, another kernel or a slower runner moves it, one
layer does not (a median over 40 layers ignores the one that changed). The drift's own change points
are "environment" steps, said once and never blamed on a layer; each layer is then judged on its
log-time less the drift, so a +10% step of every layer leaves no step in any of them while a
+15% step of one stands out as clearly as on a steady machine. With fewer than
`MIN_LAYERS_FOR_DRIFT` layers there is no telling the machine from the code: no drift is taken out.
A step that lands at one commit in at least `SHARED_SHARE` of the layers (a change that moved most
layers, but not alike) is labelled environment too. A commit whose drift stands out from its
neighbours' (one run on a busy machine: every layer 1.8x slower, and not each by as much) is left
out of the layers' series, so the layers least slowed there do not read as "faster".

Detection is ruptures' PELT with an L2 cost (`KernelCPD` with a linear kernel, exact and in C) on
the series divided by its noise (the median absolute difference of successive values, robust to the
steps themselves), at a penalty of `PENALTY` noise variances per change point (chosen, with the
library, on the issue's synthetic test: benchmarks/bench_change_points.py, its figures in
benchmarks/README.md). A segment holds at least `MIN_SEGMENT` commits: a step shows once two
commits after it are measured, so one slow run is not a change. Each change point is then tested on
its two sides (the segments to the neighbouring change points) with Student's t-test on log-times,
which gives its ratio and a 95% interval; one whose ratio is under the minimum change (default 5%,
as `diff`'s threshold) or whose p-value exceeds `MAX_P_VALUE` is dropped, the weakest first, and
its neighbours tested again (Apache Otava's merge step, after Fleming et al.).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, cast

import numpy as np
from numpy.typing import NDArray

PENALTY = 25.0  # per change point, in noise variances (BIC's 2 ln n is ~8 at n = 60: too eager)
MIN_SEGMENT = 2
MAX_P_VALUE = 0.001
MIN_LAYERS_FOR_DRIFT = 5
SHARED_SHARE = 0.5  # of a commit's layers stepping at it together: an environment step
CLIP = 4.0  # noises: beyond this a value counts as this far
BUSY_WINDOW = 5  # commits around one that tell a busy run from a step
NOISE_FLOOR = 1e-3  # in log-time (0.1%): quantized times can have no measurable noise
CONFIDENCE = 0.95
Matrix = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class Step:
    """A change point: from the commit at `index` on (an index into the window's commits), the
    level is `ratio` times the level before, the last commit of which is `last_before`."""

    index: int
    last_before: int
    ratio: float  # new level / old level (a layer's: beyond the drift)
    low: float  # the ratio's 95% interval
    high: float
    p_value: float
    before: int  # commits measured on each side (up to the neighbouring change points)
    after: int
    environment: bool = False

    @property
    def pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)

    @property
    def slower(self) -> bool:
        return self.ratio > 1.0


@dataclass(frozen=True, slots=True)
class Changes:
    """The change points of a window: per layer (in the matrix's row order) and the drift's."""

    layers: tuple[tuple[Step, ...], ...]
    environment: tuple[Step, ...]
    drift: tuple[float, ...]  # the common factor per commit (1.0 where none is known)
    drift_known: bool  # enough layers to tell the machine from the code
    noise: tuple[float, ...] = ()  # per layer: its noise beyond the drift, in log-time (NaN: few)
    busy: tuple[int, ...] = ()  # commits left out of the layers' series (`busy_commits`)


def find_changes(values: Matrix, min_change_pct: float = 5.0) -> Changes:
    """Change points of each row of `values` (layers x commits, self times; NaN or <= 0 where a
    layer was not measured), and of their common drift."""
    with np.errstate(divide="ignore", invalid="ignore"):
        logs = np.where(values > 0, np.log(values), np.nan)
    drift, known = _drift(logs)
    min_log = math.log1p(min_change_pct / 100.0)
    environment = _steps(drift, min_log) if known else ((), math.nan)
    busy = busy_commits(drift, min_log) if known else np.zeros(len(drift), dtype=bool)
    residual = logs - drift[None, :]
    residual[:, busy] = np.nan  # a busy run moves layers unequally: it tells nothing of one
    found = [_steps(row, min_log) for row in residual]
    layers = _shared_as_environment([steps for steps, _ in found], np.isfinite(logs))
    return Changes(
        layers=tuple(layers),
        environment=tuple(replace(s, environment=True) for s in environment[0]),
        drift=tuple(float(x) for x in np.exp(drift)),
        drift_known=known,
        noise=tuple(noise for _, noise in found),
        busy=tuple(int(i) for i in np.flatnonzero(busy)),
    )


def busy_commits(drift: NDArray[np.float64], min_log: float) -> NDArray[np.bool_]:
    """Commits whose drift stands out from the commits around it (a median of `BUSY_WINDOW`)
    by more than `CLIP` noises and the minimum change: one run on a busy machine, which every
    layer felt, not a step (a step moves the median of its neighbours too)."""
    half = BUSY_WINDOW // 2
    around = np.array(
        [np.median(drift[max(0, i - half) : i + half + 1]) for i in range(len(drift))]
    )
    if len(drift) < BUSY_WINDOW:
        return np.zeros(len(drift), dtype=bool)
    limit = max(CLIP * noise_of(drift), min_log)
    return np.asarray(np.abs(drift - around) > limit)


def _drift(logs: Matrix) -> tuple[NDArray[np.float64], bool]:
    """Per commit, the median over layers of each layer's log-time less its own median (zeros
    with too few layers, or at a commit where too few were measured)."""
    columns = logs.shape[1]
    measured = np.isfinite(logs)
    if logs.shape[0] < MIN_LAYERS_FOR_DRIFT or columns == 0:
        return np.zeros(columns), False
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row or column with nothing measured
        relative = logs - np.nanmedian(logs, axis=1, keepdims=True)
        drift = np.nanmedian(relative, axis=0)
    enough = measured.sum(axis=0) >= MIN_LAYERS_FOR_DRIFT
    return np.where(enough & np.isfinite(drift), drift, 0.0), True


def _steps(series: NDArray[np.float64], min_log: float) -> tuple[tuple[Step, ...], float]:
    """The change points of one log-time series (NaN: not measured at that commit), and its
    noise (NaN when it has too few values to judge)."""
    where = np.flatnonzero(np.isfinite(series))
    values = series[where]
    if len(values) < 2 * MIN_SEGMENT:
        return (), math.nan
    noise = noise_of(values)
    breaks = detect(standardized(values, noise))
    steps = tuple(
        replace(step, index=int(where[step.index]), last_before=int(where[step.last_before]))
        for step in judged(values, breaks, min_log, noise)
    )
    return steps, noise


def noise_of(values: NDArray[np.float64]) -> float:
    """The series' noise: the median absolute deviation of successive differences, scaled to a
    normal's sigma (a difference has twice the variance of a value); a step moves one difference
    only, so it barely counts."""
    diffs = np.diff(values)
    mad = float(np.median(np.abs(diffs - np.median(diffs))))
    return max(1.4826 * mad / math.sqrt(2.0), NOISE_FLOOR)


def standardized(values: NDArray[np.float64], noise: float) -> NDArray[np.float64]:
    """The series in units of its noise around its median, clipped at `CLIP` noises: one wild
    value (a hiccup) then weighs as a plausible one, and cannot make a stretch of its own, while
    a real step, lasting, still moves every value after it."""
    centred = (values - np.median(values)) / noise
    return np.clip(centred, -CLIP, CLIP)


def detect(standardized: NDArray[np.float64]) -> list[int]:
    """ruptures' exact PELT (L2 cost) change points of a series of unit noise: the index of the
    first value of each new segment."""
    signal = np.ascontiguousarray(standardized, dtype=np.float64).reshape(-1, 1)
    pelt = _ruptures_pelt_l2()
    if pelt is None:
        import ruptures

        algo = ruptures.KernelCPD(kernel="linear", min_size=MIN_SEGMENT)
        ends = algo.fit(signal).predict(pen=PENALTY)
    else:
        ends = _segment_ends(pelt(signal, PENALTY, MIN_SEGMENT), len(signal))
    return [int(end) for end in ends if end < len(standardized)]


def _segment_ends(previous_end: Any, n: int) -> list[int]:
    """The ends of the segments from PELT's path: each end's entry is the previous segment's
    end (what `KernelCPD.predict` walks)."""
    ends, end = [], n
    while end > 0:
        ends.append(end)
        end = int(previous_end[end])
    return ends[::-1]


@functools.cache
def _ruptures_pelt_l2() -> Callable[[NDArray[np.float64], float, int], Any] | None:
    """`KernelCPD(kernel="linear").predict(pen=...)`'s own C routine, loaded from its extension
    module alone: importing any part of ruptures runs its package's `__init__`, which imports
    scipy.stats, scipy.signal and scipy.spatial (1-2 s, most of `history show`'s time). None
    when this ruptures lays out its files otherwise; the caller then uses the public API."""
    spec = importlib.util.find_spec("ruptures")  # finds the package without running it
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "detection" / "_detection"
    name = "ruptures.detection._detection.ekcpd"
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        file = folder / f"ekcpd{suffix}"
        if file.is_file():
            try:
                loader = importlib.machinery.ExtensionFileLoader(name, str(file))
                module = importlib.util.module_from_spec(
                    importlib.util.spec_from_file_location(name, file, loader=loader)  # type: ignore[arg-type]
                )
                loader.exec_module(module)
                return cast(Callable[[NDArray[np.float64], float, int], Any], module.ekcpd_pelt_L2)
            except (ImportError, AttributeError, OSError):
                return None
    return None


def judged(
    values: NDArray[np.float64], breaks: list[int], min_log: float, noise: float | None = None
) -> list[Step]:
    """The change points that hold: each tested on its two sides, the weakest of those under the
    minimum change or over the p-value dropped, until all hold."""
    points = sorted({b for b in breaks if 0 < b < len(values)})  # a stretch on each side
    if noise is None:
        noise = noise_of(values) if len(values) > 1 else NOISE_FLOOR
    while points:
        steps = [_tested(values, points, i, noise) for i in range(len(points))]
        weak = [
            i
            for i, s in enumerate(steps)
            if abs(math.log(s.ratio)) < min_log or not s.p_value <= MAX_P_VALUE
        ]
        if not weak:
            return steps
        points.pop(min(weak, key=lambda i: (abs(math.log(steps[i].ratio)), -steps[i].p_value)))
    return []


def _holds(step: Step, min_log: float) -> bool:
    return abs(math.log(step.ratio)) >= min_log and step.p_value <= MAX_P_VALUE


def _tested(values: NDArray[np.float64], points: list[int], i: int, noise: float) -> Step:
    """Student's t-test of the segments on either side of points[i] (log-times), each clipped at
    `CLIP` noises around its own median: a hiccup inside a stretch neither hides a step nor
    makes one."""
    from scipy import special  # the t distribution as plain ufuncs: scipy.stats' cost 100x more

    start = points[i - 1] if i > 0 else 0
    end = points[i + 1] if i + 1 < len(points) else len(values)
    before = _clipped(values[start : points[i]], noise)
    after = _clipped(values[points[i] : end], noise)
    n1, n2 = len(before), len(after)
    diff = float(after.mean() - before.mean())
    dof = n1 + n2 - 2
    if dof < 1:  # one value on each side: nothing to test it with
        return Step(points[i], points[i] - 1, math.exp(diff), 0.0, math.inf, 1.0, n1, n2)
    pooled = (float(before.var()) * n1 + float(after.var()) * n2) / dof
    spread = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    if spread > 0:
        p_value = float(2.0 * special.stdtr(dof, -abs(diff) / spread))
        half = float(special.stdtrit(dof, 0.5 + CONFIDENCE / 2.0)) * spread
    else:  # no noise at all on either side: any difference is certain
        p_value, half = (0.0 if diff else 1.0), 0.0
    return Step(
        index=points[i],
        last_before=points[i] - 1,
        ratio=math.exp(diff),
        low=math.exp(diff - half),
        high=math.exp(diff + half),
        p_value=p_value,
        before=n1,
        after=n2,
    )


def _clipped(part: NDArray[np.float64], noise: float) -> NDArray[np.float64]:
    middle = float(np.median(part))
    return np.clip(part, middle - CLIP * noise, middle + CLIP * noise)


def _shared_as_environment(
    layers: list[tuple[Step, ...]], measured: NDArray[np.bool_]
) -> list[tuple[Step, ...]]:
    """Steps that most layers take at one commit (within one commit, one direction) are the
    environment's, not each layer's."""
    if len(layers) < MIN_LAYERS_FOR_DRIFT:
        return layers
    rows_at: dict[tuple[int, bool], set[int]] = {}  # (commit, slower) -> layers stepping there
    for row, steps in enumerate(layers):
        for step in steps:
            rows_at.setdefault((step.index, step.slower), set()).add(row)

    def shared(step: Step) -> bool:
        near = set().union(*(rows_at.get((step.index + d, step.slower), set()) for d in (-1, 0, 1)))
        needed = max(MIN_LAYERS_FOR_DRIFT, SHARED_SHARE * int(measured[:, step.index].sum()))
        return len(near) >= needed

    return [tuple(replace(s, environment=shared(s)) for s in steps) for steps in layers]


__all__ = ["Changes", "Step", "busy_commits", "detect", "find_changes", "judged", "noise_of"]
