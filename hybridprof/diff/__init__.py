"""Compare two saved sessions: which layer got slower or faster, beyond noise (no torch).

Layers are matched by path first; a path found in only one run is then matched by class and shape
(input, output shapes and parameter count), the nearest position in the run's layer order winning
when several fit; then by class and position alone. What is still unmatched is added or removed.

Each time figure gets a verdict from both runs' per-iteration values, not from the medians alone:
the 95% confidence interval of the difference of medians is built from each run's distribution-free
order-statistic interval of its median (`hybridprof.analysis.stats`) at sqrt(0.95) ~ 97.5% coverage;
the two runs are independent, so both hold their true medians with probability >= 95%, and then the
true difference lies in [new.low - base.high, new.high - base.low]. The figure is "slower" when that
interval lies above 0 and the median grew by at least the threshold (default 5%); "faster" the
mirror image; else "within noise". Without per-iteration values (old files, too few iterations) the
verdict is "unknown", never a regression.

Layers are judged beyond the run-wide shift (`hybridprof.diff.shift`): with 5 or more matched
layers, the base figures are scaled by the median new/base ratio over layers, and a layer must move
beyond the layers' own scatter around it as well as the threshold, so a machine that got busier
between the runs does not make every layer "faster" or "slower". The whole iteration is judged as
measured, unless a run was noisy and the shift reaches the threshold: then the machine and the code
cannot be told apart, it is judged beyond the shift too, and a warning says so. A slower or faster
layer whose own work did not change, next to one whose did, is marked knock-on and is not a
regression of its own.

A change smaller than the min-delta floor (`hybridprof.diff.floor`) is never slower or faster; an
interval wider than the threshold that still reaches a regression is "inconclusive". Two sessions
of one paired run (`hybridprof diff --run`: both models in one process, iterations interleaved)
are judged pair by pair instead (`hybridprof.diff.pair_ratios`). The gate (`hybridprof.diff.gate`)
answers regression, pass or inconclusive."""

from __future__ import annotations

from hybridprof.diff.fairness import comparability, identity
from hybridprof.diff.floor import Floor, default_floor, given_floor
from hybridprof.diff.judge import diff_series, judge
from hybridprof.diff.match import match_records
from hybridprof.diff.result import (
    DEFAULT_THRESHOLD_PCT,
    DIFF_KIND,
    DIFF_SCHEMA_VERSION,
    METHOD,
    Change,
    DiffResult,
    DiffVerdict,
    Gate,
    GateAnswer,
    LayerDiff,
    MatchRule,
    OpChange,
    PairedRatio,
    Pairing,
    RunIdentity,
)
from hybridprof.diff.sessions import diff_sessions, run_shifts
from hybridprof.diff.shift import RunShift

__all__ = [
    "DEFAULT_THRESHOLD_PCT",
    "DIFF_KIND",
    "DIFF_SCHEMA_VERSION",
    "METHOD",
    "Change",
    "DiffResult",
    "DiffVerdict",
    "Floor",
    "Gate",
    "GateAnswer",
    "LayerDiff",
    "MatchRule",
    "OpChange",
    "PairedRatio",
    "Pairing",
    "RunIdentity",
    "RunShift",
    "comparability",
    "default_floor",
    "diff_series",
    "diff_sessions",
    "given_floor",
    "identity",
    "judge",
    "match_records",
    "run_shifts",
]
