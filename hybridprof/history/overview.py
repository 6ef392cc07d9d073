"""What `history show` shows, worked out once: a window, its change points, the layers in order.

Computed at show time, not at add time: change points depend on the whole window (a step is only
a step once commits after it are measured, and a later commit can make an earlier one look like
noise), an append-only file keeps no derived figure that a later add would make stale, and the
detection is cheap at the window's size (benchmarks/bench_history.py, figures in its README). The
terminal, the HTML page and the PDF only lay this out.
"""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from hybridprof.history.change_points import Changes, Step, find_changes
from hybridprof.history.series import Window
from hybridprof.history.store import Series

DEFAULT_MIN_CHANGE_PCT = 5.0  # as `hybridprof diff`'s threshold


@dataclass(frozen=True, slots=True)
class Change:
    """A change point with the commits around it and the levels it moved between."""

    step: Step
    before_rev: str  # the last commit of the old level (where measured)
    after_rev: str  # the first commit of the new level
    # The layer's median self time on each side, the machine's drift taken out, as the change is
    # judged (None: the environment's own step)
    before_us: float | None
    after_us: float | None


@dataclass(frozen=True, slots=True)
class LayerHistory:
    """One layer of the window (`row`: its row in the window's matrices)."""

    row: int
    path: str
    class_name: str
    changes: tuple[Change, ...]  # its own and its share of environment steps, by commit
    latest_us: float | None  # its self time at the last commit where it was measured
    share_pct: float | None  # its share of the iteration there
    noise_pct: float | None = None  # its commit-to-commit noise beyond the drift (one sigma)

    @property
    def code_changes(self) -> tuple[Change, ...]:
        """The change points blamed on the layer (not the environment's)."""
        return tuple(c for c in self.changes if not c.step.environment)


@dataclass(frozen=True, slots=True)
class HistoryOverview:
    db: str
    window: Window
    layers: tuple[LayerHistory, ...]  # layers with change points first, then by share
    environment: tuple[Change, ...]
    drift: tuple[float, ...]  # per commit: the factor every layer moved by
    drift_known: bool
    busy: tuple[int, ...]  # commits left out of the layers' series: a run every layer felt
    min_change_pct: float
    other_series: tuple[Series, ...]
    noise_pct: tuple[float | None, ...] = ()  # per row of the window: as LayerHistory's

    def changed(self) -> tuple[LayerHistory, ...]:
        return tuple(layer for layer in self.layers if layer.code_changes)


def overview(
    db: str,
    window: Window,
    min_change_pct: float = DEFAULT_MIN_CHANGE_PCT,
    patterns: Sequence[str] = (),
    other_series: Sequence[Series] = (),
) -> HistoryOverview:
    """The window's change points and its layers (those matching `patterns` when given)."""
    changes = find_changes(window.self_us, min_change_pct)
    revs = [c.rev for c in window.commits]
    rows = [i for i, path in enumerate(window.paths) if _matches(path, patterns)]
    layers = [_layer(window, changes, i, revs) for i in rows]
    layers.sort(key=_display_order)
    environment = tuple(_change(step, revs, None) for step in changes.environment)
    return HistoryOverview(
        db=db,
        window=window,
        layers=tuple(layers),
        environment=environment,
        drift=changes.drift,
        drift_known=changes.drift_known,
        busy=changes.busy,
        min_change_pct=min_change_pct,
        other_series=tuple(other_series),
        noise_pct=tuple(_pct_or_none(n) for n in changes.noise),
    )


def _matches(path: str, patterns: Sequence[str]) -> bool:
    return not patterns or any(fnmatch.fnmatchcase(path, p) for p in patterns)


def _layer(window: Window, changes: Changes, row: int, revs: list[str]) -> LayerHistory:
    values = window.self_us[row]
    level = values / np.asarray(changes.drift)  # the machine's drift taken out, as judged
    level[list(changes.busy)] = np.nan
    measured = np.flatnonzero(np.isfinite(values))
    last = int(measured[-1]) if len(measured) else None
    share = window.share_pct[row, last] if last is not None else np.nan
    noise = changes.noise[row]
    return LayerHistory(
        row=row,
        path=window.paths[row],
        class_name=window.classes[row],
        changes=tuple(_change(s, revs, level, changes.layers[row]) for s in changes.layers[row]),
        latest_us=float(values[last]) if last is not None else None,
        share_pct=float(share) if np.isfinite(share) else None,
        noise_pct=_pct_or_none(noise),
    )


def _pct_or_none(log_noise: float) -> float | None:
    return 100.0 * math.expm1(log_noise) if math.isfinite(log_noise) else None


def _change(
    step: Step,
    revs: list[str],
    values: np.ndarray | None,
    neighbours: Sequence[Step] = (),
) -> Change:
    """The step with its commit range, and (for a layer) its median level on either side, up to
    the neighbouring change points (`values`: the layer's times, the drift taken out)."""
    before = after = None
    if values is not None:
        starts = [s.index for s in neighbours]
        k = starts.index(step.index)
        start = starts[k - 1] if k > 0 else 0
        end = starts[k + 1] if k + 1 < len(starts) else len(values)
        before = _median(values[start : step.index])
        after = _median(values[step.index : end])
    return Change(step, revs[step.last_before], revs[step.index], before, after)


def _median(values: np.ndarray) -> float | None:
    kept = values[np.isfinite(values)]
    return float(np.median(kept)) if len(kept) else None


def _display_order(layer: LayerHistory) -> tuple[int, float, float, str]:
    """Layers with change points first, the newest change first; then by share, largest first."""
    own = layer.code_changes
    newest = max((c.step.index for c in own), default=-1)
    biggest = max((abs(c.step.pct) for c in own), default=0.0)
    return (0 if own else 1, -newest, -(biggest if own else (layer.share_pct or 0.0)), layer.path)


def recent_regressions(
    view: HistoryOverview, patterns: Sequence[str], recent: int
) -> list[tuple[LayerHistory, Change]]:
    """Layers matching `patterns` that got slower at one of the last `recent` commits and are
    still slower now: the change points from that one on (beyond the drift) multiply to at least
    the minimum change, so a regression fixed since then fails nothing."""
    first_recent = len(view.window.commits) - recent
    found = []
    for layer in view.layers:
        if not _matches(layer.path, patterns):
            continue
        own = layer.code_changes
        for k, change in enumerate(own):
            if change.step.index < first_recent or not change.step.slower:
                continue
            since = float(np.prod([c.step.ratio for c in own[k:]]))
            if 100.0 * (since - 1.0) >= view.min_change_pct:
                found.append((layer, change))
                break
    return found


__all__ = [
    "DEFAULT_MIN_CHANGE_PCT",
    "Change",
    "HistoryOverview",
    "LayerHistory",
    "overview",
    "recent_regressions",
]
