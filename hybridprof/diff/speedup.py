"""The speed-up of compiled over eager, per layer: what compiling changed (no torch).

A comparison of two sessions of one model, eager and compiled, measured as a paired run in one
process (`runtime/runs/speedup_run.py`). It is a `DiffResult` like any other (eager is the base,
compiled the new run: layers matched by path, every time judged pair by pair), plus per layer
the speed-up of its total and the modules its compiled kernels fused.

A paired run's i-th eager and compiled iterations ran back to back, so each pair gives a ratio
(eager over compiled) that the machine's drift barely moves; the speed-up's interval is the
order-statistic interval of the median of those ratios (`analysis.stats.median_ci`), the same
method as every other interval in the reports. Unpaired sessions have no such pairs: no interval.

A speed-up is judged on its own figures, never through the diff's run-wide shift (the diff takes
a change shared by most layers as the machine's and subtracts it: here that change is what
compiling did). A layer is "faster" or "slower" when its whole interval lies beyond the threshold,
"within noise" when it lies inside it, "inconclusive" otherwise; a layer whose work ran in another
layer's kernels (it has eager time and no compiled time of its own) is "fused into" that layer.
`SpeedupSummary` holds every figure of the comparison's report (its HTML and JSON, and the text
the terminal prints), so they all state the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import Literal

from hybridprof.analysis.stats import Interval, median_ci, median_or_zero
from hybridprof.datamodel import ProfileSession
from hybridprof.datamodel.jsonio import dump, load
from hybridprof.diff.result import DiffResult
from hybridprof.diff.sessions import diff_sessions

SPEEDUP_KIND = "hybridprof-speedup"
SPEEDUP_SCHEMA_VERSION = 1

Verdict = Literal["faster", "slower", "within noise", "inconclusive", "fused", "no figure"]


@dataclass(frozen=True, slots=True)
class SpeedupRow:
    """One layer (or the whole iteration, path "(iteration)"): its total per iteration eager and
    compiled (us), compiled's speed-up (eager over compiled) with its 95% interval from the pairs,
    and the verdict on it."""

    path: str
    depth: int
    eager_us: float | None
    compiled_us: float | None
    fused: tuple[str, ...] = ()  # the modules whose work its kernels also did
    interval: tuple[float, float] | None = None  # the speed-up's 95% interval, from the pairs
    fused_into: str | None = None  # the layer whose kernels did its work (no time of its own)
    verdict: Verdict = "no figure"
    pair_median: float | None = None  # the median of the per-pair ratios (with the interval)

    @property
    def speedup(self) -> float | None:
        """The median of the per-pair ratios where the pairs give an interval (so the figure
        lies in its interval, and drift over the run cancels pair by pair), else the ratio of
        the two medians."""
        if self.eager_us is None or not self.compiled_us:
            return None
        if self.pair_median is not None:
            return self.pair_median
        return self.eager_us / self.compiled_us


@dataclass(frozen=True, slots=True)
class SpeedupSide:
    """One lane of the comparison as it ran: what it is called, the torch threads the model ran
    with (read during the run, not asked for), its measured iterations and their median."""

    label: str
    threads: int
    iterations: int
    outside_us: float | None  # its (outside modules) row


@dataclass(frozen=True, slots=True)
class SpeedupSummary:
    """Every figure of the eager-vs-compiled report: the whole iteration's row (the headline),
    one row per layer in tree order, both lanes, how they were judged. Saved as JSON
    (`--compare-eager`'s compare.json) and rendered as HTML and text from the same object."""

    model: str
    threshold_pct: float
    paired: bool
    pairs: int  # the pairs of iterations each speed-up's interval comes from (0: unpaired)
    eager: SpeedupSide
    compiled: SpeedupSide
    iteration: SpeedupRow
    rows: tuple[SpeedupRow, ...]
    compile_line: str  # the compile's time and graphs, in no layer's time ("" if unknown)
    notes: tuple[str, ...] = ()  # the compiled session's warnings (eager frames, guards...)
    schema_version: int = SPEEDUP_SCHEMA_VERSION

    def to_json(self) -> str:
        return dump(SPEEDUP_KIND, self)

    @classmethod
    def from_json(cls, text: str) -> SpeedupSummary:
        return load(SPEEDUP_KIND, cls, text, SPEEDUP_SCHEMA_VERSION)

    def judged(self, verdict: Verdict) -> tuple[SpeedupRow, ...]:
        return tuple(row for row in self.rows if row.verdict == verdict)


@dataclass(frozen=True, slots=True)
class SpeedupResult:
    """The eager and compiled sessions, their diff, and the per-layer speed-ups."""

    eager: ProfileSession
    compiled: ProfileSession
    diff: DiffResult
    paired: bool = False  # measured as a paired run: iteration i of each side back to back
    threshold_pct: float = 5.0  # a change in time smaller than this is no speed-up

    def rows(self) -> tuple[SpeedupRow, ...]:
        """Every layer in tree order, judged; a container that never runs (a ModuleList) sums
        its children, as the layer table does."""
        eager, compiled = _totals(self.eager), _totals(self.compiled)
        pairs = _series(self.eager), _series(self.compiled)
        section = self.compiled.compiled
        owners = _fused_owners(self.compiled)
        rows = []
        for target in self.compiled.plan.targets:
            if target.path not in eager and target.path not in compiled:
                continue
            row = SpeedupRow(
                path=target.path,
                depth=target.depth,
                eager_us=eager.get(target.path),
                compiled_us=compiled.get(target.path),
                fused=section.fused_of(target.path) if section is not None else (),
            )
            row = self._with_pairs(row, pairs[0].get(target.path), pairs[1].get(target.path))
            fused_into = owners.get(target.path) if not row.compiled_us else None
            rows.append(self._judged(replace(row, fused_into=fused_into)))
        return tuple(rows)

    def iteration_row(self) -> SpeedupRow:
        """The whole iteration as a row: the headline of every view of the comparison."""
        eager, compiled = self.iteration_us()
        row = SpeedupRow(ITERATION_ROW, 0, eager or None, compiled or None)
        row = self._with_pairs(row, self.eager.iteration_cpu_us, self.compiled.iteration_cpu_us)
        return self._judged(row)

    def summary(self) -> SpeedupSummary:
        """Every figure of the report, computed once (the HTML, the JSON and the text agree)."""
        section = self.compiled.compiled
        return SpeedupSummary(
            model=_model_name(self.compiled),
            threshold_pct=self.threshold_pct,
            paired=self.paired,
            pairs=self.diff.pairing.pairs if self.paired and self.diff.pairing else 0,
            eager=_side("eager", self.eager),
            compiled=_side("compiled", self.compiled),
            iteration=self.iteration_row(),
            rows=self.rows(),
            compile_line=_compile_line(self.compiled),
            notes=tuple(section.notes) if section is not None else (),
        )

    def _judged(self, row: SpeedupRow) -> SpeedupRow:
        return replace(row, verdict=judge_speedup(row, self.threshold_pct))

    def iteration_us(self) -> tuple[float, float]:
        eager, compiled = self.eager.iteration_cpu_us, self.compiled.iteration_cpu_us
        return median_or_zero(eager), median_or_zero(compiled)

    def iteration_interval(self) -> tuple[float, float] | None:
        """The whole iteration's speed-up interval, from the pairs of iterations."""
        return self._interval(self.eager.iteration_cpu_us, self.compiled.iteration_cpu_us)

    def _interval(
        self, eager: tuple[float, ...] | None, compiled: tuple[float, ...] | None
    ) -> tuple[float, float] | None:
        found = self._pair_ratios(eager, compiled)
        return (found.low, found.high) if found is not None else None

    def _pair_ratios(
        self, eager: tuple[float, ...] | None, compiled: tuple[float, ...] | None
    ) -> Interval | None:
        if not self.paired or not eager or not compiled:
            return None
        return median_ci([e / c for e, c in zip(eager, compiled, strict=False) if c > 0])

    def _with_pairs(
        self, row: SpeedupRow, eager: tuple[float, ...] | None, compiled: tuple[float, ...] | None
    ) -> SpeedupRow:
        found = self._pair_ratios(eager, compiled)
        if found is None or not row.compiled_us or row.eager_us is None:
            return row
        return replace(row, interval=(found.low, found.high), pair_median=found.median)

    def speedup(self) -> float | None:
        return self.iteration_row().speedup


ITERATION_ROW = "(iteration)"


def judge_speedup(row: SpeedupRow, threshold_pct: float) -> Verdict:
    """Faster or slower when the whole interval lies beyond the threshold (a speed-up above
    1 + t, or below 1 / (1 + t)), within noise when it lies inside, inconclusive otherwise; an
    unpaired comparison (no interval) is judged on the medians' ratio alone."""
    if row.fused_into is not None:
        return "fused"
    speedup = row.speedup
    if speedup is None:
        return "no figure"
    band = 1.0 + threshold_pct / 100.0
    low, high = row.interval if row.interval is not None else (speedup, speedup)
    if low > band:
        return "faster"
    if high < 1.0 / band:
        return "slower"
    if low >= 1.0 / band and high <= band:
        return "within noise"
    return "inconclusive"


def _fused_owners(compiled: ProfileSession) -> dict[str, str]:
    """Each module whose work ran in other layers' kernels -> the most specific of them (the
    deepest layer whose kernels name it: `blocks.0.ln1` rather than the root that also does)."""
    section = compiled.compiled
    owners: dict[str, str] = {}
    for layer in section.layers if section is not None else ():
        for path in layer.fused:
            known = owners.get(path)
            if known is None or _depth(layer.path) > _depth(known):
                owners[path] = layer.path
    return owners


def _depth(path: str) -> int:
    return path.count(".") + 1 if path else 0


def _model_name(session: ProfileSession) -> str:
    file = session.model_file or session.plan.model_file
    root = session.plan.root_class
    return f"{PurePath(file).name} ({root})" if file else root


def _side(label: str, session: ProfileSession) -> SpeedupSide:
    outside = session.outside_cpu_us.median if session.outside_cpu_us else None
    return SpeedupSide(label, session.environment.threads, session.iterations, outside)


def _compile_line(compiled: ProfileSession) -> str:
    section = compiled.compiled
    if section is None:
        return ""
    graphs = f"{section.graphs} graph{'s' if section.graphs != 1 else ''}"
    return (
        f"compile time {section.compile_s:.2f} s in warm-up ({graphs}, "
        f"{len(section.graph_breaks)} graph breaks); in no layer's time"
    )


def _series(session: ProfileSession) -> dict[str, tuple[float, ...]]:
    """Each layer's total in each measured iteration, and each container's (a parent with no
    record) as the sum of its children's, iteration by iteration. A record without per-iteration
    values (an older file) stands as its median alone."""
    totals = {
        r.path: r.per_iteration.total_cpu().values if r.per_iteration else (r.total_cpu_us.median,)
        for r in session.records
    }
    for target in sorted(session.plan.targets, key=lambda t: -t.depth):
        if target.path in totals or target.has_forward:
            continue
        children = [
            values
            for path, values in totals.items()
            if path.rpartition(".")[0] == target.path and path
        ]
        if children:
            totals[target.path] = tuple(map(sum, zip(*children, strict=False)))
    return totals


def _totals(session: ProfileSession) -> dict[str, float]:
    """Each layer's median total, and each container's (a parent with no record) as the sum of
    its children's."""
    totals = {r.path: r.total_cpu_us.median for r in session.records}
    for target in sorted(session.plan.targets, key=lambda t: -t.depth):
        if target.path in totals or target.has_forward:
            continue
        children = [
            us for path, us in totals.items() if path.rpartition(".")[0] == target.path and path
        ]
        if children:
            totals[target.path] = sum(children)
    return totals


def speedup_of(
    eager: ProfileSession,
    compiled: ProfileSession,
    threshold_pct: float = 5.0,
    *,
    paired: bool = False,
) -> SpeedupResult:
    """The speed-up of `compiled` over `eager`, judged through the ordinary diff (eager = base,
    compiled = new); `paired`: measured as a paired run (`--compare-eager`), judged pair by pair."""
    diff = diff_sessions(
        eager, compiled, threshold_pct, base_label="eager", new_label="compiled", paired=paired
    )
    section = compiled.compiled
    notes = tuple(
        f"compiled kernels of {layer.path or '(root)'} fused: "
        + ", ".join(_relative(layer.path, f) for f in layer.fused)
        for layer in (section.layers if section is not None else ())
        if layer.fused
    )
    diff = replace(diff, notes=diff.notes + notes)
    return SpeedupResult(eager, compiled, diff, paired=paired, threshold_pct=threshold_pct)


def _relative(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


__all__ = [
    "ITERATION_ROW",
    "SPEEDUP_KIND",
    "SPEEDUP_SCHEMA_VERSION",
    "SpeedupResult",
    "SpeedupRow",
    "SpeedupSide",
    "SpeedupSummary",
    "judge_speedup",
    "speedup_of",
]
