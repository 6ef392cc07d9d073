"""The comparison of two runs as data: each figure's change, each layer's, and the `DiffResult`
that `hybridprof diff` saves as JSON and `hybridprof report` re-renders."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from hybridprof.analysis.stats import CONFIDENCE
from hybridprof.datamodel.jsonio import dump, load
from hybridprof.diff.shift import RunShift

DIFF_KIND = "hybridprof-diff"
# 2: run-wide shifts, knock-on layers; 3: paired runs, the min-delta floor, "inconclusive" and
# the gate's answer; 4: what of each layer's own work changed (files of versions 1 to 3 load)
DIFF_SCHEMA_VERSION = 4
DEFAULT_THRESHOLD_PCT = 5.0
METHOD = (
    "95% confidence interval of the difference of medians, from each run's distribution-free "
    "order-statistic interval of its median at sqrt(0.95) coverage (binomial ranks), layers judged "
    "beyond the run-wide shift (the median new/base ratio over layers); slower/faster only when "
    "the interval excludes 0 and the change is at least the threshold"
)
_PER_RUN_CONFIDENCE = math.sqrt(CONFIDENCE)

# inconclusive: the interval is wider than the threshold and reaches a regression beyond both
# the threshold and the min-delta floor, so neither "slower" nor "within noise" can be said
DiffVerdict = Literal["slower", "faster", "within noise", "inconclusive", "unknown"]
GateAnswer = Literal["pass", "regression", "inconclusive"]
MatchRule = Literal["path", "class and shape", "class and position", "added", "removed"]

# (quantity, ModuleRecord field, series getter name on IterationSeries, is a self figure)
TIME_FIGURES: tuple[tuple[str, str, str, bool], ...] = (
    ("self_cpu_us", "self_cpu_us", "self_cpu_us", True),
    ("total_cpu_us", "total_cpu_us", "total_cpu", False),
    ("backward_self_cpu_us", "backward_self_cpu_us", "backward_self_cpu_us", True),
    ("backward_total_cpu_us", "backward_total_cpu_us", "backward_total_cpu", False),
    ("self_device_us", "self_device_us", "self_device_us", True),
    ("total_device_us", "total_device_us", "total_device", False),
)
MEMORY_FIGURES = ("self_cpu_mem", "cpu_mem", "self_device_mem", "device_mem")


@dataclass(frozen=True, slots=True)
class PairedRatio:
    """A figure of two paired runs: the median over pairs of new / base, and its interval."""

    ratio: float
    low: float  # the order-statistic confidence interval of that median
    high: float
    pairs: int  # the pairs it was worked out from (both values positive)
    confidence: float = CONFIDENCE  # of this one interval (see `family_confidence`)

    def pct(self) -> float:
        return 100.0 * (self.ratio - 1.0)


@dataclass(frozen=True, slots=True)
class Change:
    """One figure in both runs: medians, delta (new - base), ratio and the delta's interval."""

    quantity: str
    base: float | None
    new: float | None
    delta: float
    ratio: float | None  # new / base; None when base is 0 or absent
    low: float | None = None  # the delta's confidence interval, when both runs have enough data
    high: float | None = None
    verdict: DiffVerdict = "unknown"
    # The run-wide shift the verdict was judged beyond: low/high are then the interval of
    # new - shift * base. None: judged as measured.
    shift: float | None = None
    # Judged on paired iterations (diff --run): the per-pair ratio's median and interval; low and
    # high are then that interval times the base median, in us.
    paired: PairedRatio | None = None

    def delta_pct(self) -> float | None:
        return None if self.ratio is None else 100.0 * (self.ratio - 1.0)

    def beyond_shift_pct(self) -> float | None:
        """The change beyond the run-wide shift, in percent (None when not judged against one)."""
        if self.ratio is None or self.shift is None or self.shift <= 0:
            return None
        return 100.0 * (self.ratio / self.shift - 1.0)


@dataclass(frozen=True, slots=True)
class OpChange:
    """One op of a layer in both runs (median self CPU time per iteration)."""

    name: str
    backward: bool
    base_calls: int
    new_calls: int
    base_us: float
    new_us: float
    status: Literal["changed", "same", "appeared", "vanished"]


@dataclass(frozen=True, slots=True)
class LayerDiff:
    """A layer in both runs (or one), how it was matched, its figures and its verdict."""

    base_path: str | None
    new_path: str | None
    class_name: str
    match: MatchRule
    verdict: DiffVerdict | Literal["added", "removed"]
    times: tuple[Change, ...] = ()
    memory: tuple[Change, ...] = ()
    ops: tuple[OpChange, ...] = ()  # only for a changed, added or removed layer
    # Slower or faster with its own work unchanged, while another layer's changed: not its own.
    knock_on: bool = False
    # What of its own work differs between the runs (`diff.shift.own_work_changes`): () the same
    # work; None not compared (an added or removed layer, a file of version 3 or older).
    own_work: tuple[str, ...] | None = None

    @property
    def path(self) -> str:
        return self.new_path if self.new_path is not None else (self.base_path or "")

    def change(self, quantity: str) -> Change | None:
        return next((c for c in self.times + self.memory if c.quantity == quantity), None)

    def self_delta(self) -> float:
        """The forward self CPU time's delta (added: its time, removed: minus it)."""
        found = self.change("self_cpu_us")
        return found.delta if found else 0.0

    def self_delta_beyond_shift(self) -> float:
        """The forward self CPU time's delta beyond the run-wide shift (new - shift x base)."""
        found = self.change("self_cpu_us")
        if found is None or found.shift is None or found.base is None or found.new is None:
            return self.self_delta()
        return found.new - found.shift * found.base


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """What identifies a run in a review: its file, model, machine and how it was measured."""

    label: str
    model_file: str | None
    model_hash: str | None
    started_at: str
    hybridprof_version: str
    torch_version: str
    python_version: str
    cpu: str
    device: str
    threads: int
    strategy: str
    iterations: int
    stability: str  # "stable", "noisy" or "unknown" (old files)

    def short(self) -> str:
        return (
            f"{self.label} ({self.started_at or 'no date'}, torch {self.torch_version}, "
            f"{self.threads} thread(s), {self.device}, {self.iterations} iterations)"
        )


@dataclass(frozen=True, slots=True)
class Pairing:
    """How the two runs of `diff --run` were measured: in one process, iterations interleaved."""

    order: str  # "ABBA": base, new, new, base, base, new, ...
    pairs: int
    stop_reason: str  # as a session's: count, converged, max_time, max_iterations, interrupted


@dataclass(frozen=True, slots=True)
class Gate:
    """The answer of `--fail-on-regression` (exit 0, 1 or 5) and why."""

    answer: GateAnswer
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class DiffResult:
    """The comparison of two sessions, saved as JSON (`hybridprof report` re-renders it)."""

    base: RunIdentity
    new: RunIdentity
    threshold_pct: float
    method: str
    total: Change  # the whole iteration's time
    layers: tuple[LayerDiff, ...]
    warnings: tuple[str, ...] = ()  # what makes the comparison unfair, said before any verdict
    notes: tuple[str, ...] = ()  # facts worth knowing that do not make it unfair
    schema_version: int = DIFF_SCHEMA_VERSION
    confidence: float = field(default=CONFIDENCE)
    shifts: tuple[RunShift, ...] = ()  # per time figure, when enough layers were matched
    # A change smaller than this (us) is never a regression by itself, and how it was chosen.
    min_delta_us: float = 0.0
    min_delta_basis: str = ""
    pairing: Pairing | None = None  # None: two separate runs (saved sessions)
    gate: Gate | None = None  # None in files of version 1 and 2

    def regressions(self) -> tuple[LayerDiff, ...]:
        return tuple(
            layer for layer in self.layers if layer.verdict == "slower" and not layer.knock_on
        )

    def improvements(self) -> tuple[LayerDiff, ...]:
        return tuple(
            layer for layer in self.layers if layer.verdict == "faster" and not layer.knock_on
        )

    def knock_ons(self) -> tuple[LayerDiff, ...]:
        return tuple(layer for layer in self.layers if layer.knock_on)

    def shift(self, quantity: str) -> RunShift | None:
        return next((s for s in self.shifts if s.quantity == quantity), None)

    def undecided(self) -> tuple[LayerDiff, ...]:
        return tuple(layer for layer in self.layers if layer.verdict == "inconclusive")

    def has_regression(self) -> bool:
        return bool(self.regressions()) or self.total.verdict == "slower"

    def gate_answer(self) -> GateAnswer:
        """The gate's answer; files older than version 3 hold none: regression or pass."""
        if self.gate is not None:
            return self.gate.answer
        return "regression" if self.has_regression() else "pass"

    def to_json(self) -> str:
        return dump(DIFF_KIND, self)

    @classmethod
    def from_json(cls, text: str) -> DiffResult:
        return load(DIFF_KIND, cls, text, DIFF_SCHEMA_VERSION)
