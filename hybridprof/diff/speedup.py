"""The speed-up of compiled over eager, per layer: what compiling changed (no torch).

A comparison of two sessions of one model, eager and compiled, measured as a paired run in one
process (`runtime/runs/speedup_run.py`). It is a `DiffResult` like any other (eager is the base,
compiled the new run: layers matched by path, every time judged pair by pair), plus per layer
the speed-up of its total and the modules its compiled kernels fused.

A paired run's i-th eager and compiled iterations ran back to back, so each pair gives a ratio
(eager over compiled) that the machine's drift barely moves; the speed-up's interval is the
order-statistic interval of the median of those ratios (`analysis.stats.median_ci`), the same
method as every other interval in the reports. Unpaired sessions have no such pairs: no interval.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from hybridprof.analysis.stats import median_ci, median_or_zero
from hybridprof.datamodel import ProfileSession
from hybridprof.diff.result import DiffResult
from hybridprof.diff.sessions import diff_sessions


@dataclass(frozen=True, slots=True)
class SpeedupRow:
    """One layer: its total per iteration eager and compiled (us), and compiled's speed-up."""

    path: str
    depth: int
    eager_us: float | None
    compiled_us: float | None
    fused: tuple[str, ...] = ()  # the modules below it whose work its kernels also did
    interval: tuple[float, float] | None = None  # the speed-up's 95% interval, from the pairs

    @property
    def speedup(self) -> float | None:
        if self.eager_us is None or not self.compiled_us:
            return None
        return self.eager_us / self.compiled_us


@dataclass(frozen=True, slots=True)
class SpeedupResult:
    """The eager and compiled sessions, their diff, and the per-layer speed-ups."""

    eager: ProfileSession
    compiled: ProfileSession
    diff: DiffResult
    paired: bool = False  # measured as a paired run: iteration i of each side back to back

    def rows(self) -> tuple[SpeedupRow, ...]:
        """Every layer in tree order; a container that never runs (a ModuleList) sums its
        children, as the layer table does."""
        eager, compiled = _totals(self.eager), _totals(self.compiled)
        pairs = _series(self.eager), _series(self.compiled)
        section = self.compiled.compiled
        return tuple(
            SpeedupRow(
                path=target.path,
                depth=target.depth,
                eager_us=eager.get(target.path),
                compiled_us=compiled.get(target.path),
                fused=section.fused_of(target.path) if section is not None else (),
                interval=self._interval(pairs[0].get(target.path), pairs[1].get(target.path)),
            )
            for target in self.compiled.plan.targets
            if target.path in eager or target.path in compiled
        )

    def iteration_us(self) -> tuple[float, float]:
        eager, compiled = self.eager.iteration_cpu_us, self.compiled.iteration_cpu_us
        return median_or_zero(eager), median_or_zero(compiled)

    def iteration_interval(self) -> tuple[float, float] | None:
        """The whole iteration's speed-up interval, from the pairs of iterations."""
        return self._interval(self.eager.iteration_cpu_us, self.compiled.iteration_cpu_us)

    def _interval(
        self, eager: tuple[float, ...] | None, compiled: tuple[float, ...] | None
    ) -> tuple[float, float] | None:
        if not self.paired or not eager or not compiled:
            return None
        ratios = [e / c for e, c in zip(eager, compiled, strict=False) if c > 0]
        found = median_ci(ratios)
        return (found.low, found.high) if found is not None else None

    def speedup(self) -> float | None:
        eager, compiled = self.iteration_us()
        return eager / compiled if compiled else None


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
    return SpeedupResult(eager, compiled, replace(diff, notes=diff.notes + notes), paired=paired)


def _relative(parent: str, path: str) -> str:
    return path[len(parent) + 1 :] if parent and path.startswith(parent + ".") else path


__all__ = ["SpeedupResult", "SpeedupRow", "speedup_of"]
