"""A layer history in the terminal: where the series is from, the environment's steps, then a
line per layer (a sparkline of its self time over the window, its latest time, its change
points), the layers with change points first."""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Sequence

import numpy as np

from hybridprof.history.change_points import Step
from hybridprof.history.overview import Change, HistoryOverview, LayerHistory
from hybridprof.history.series import Window
from hybridprof.history.store import Series
from hybridprof.reporting.format import format_time_us, visible

BARS = "▁▂▃▄▅▆▇█"
SPARK_WIDTH = 40  # characters: a wider window is binned (each character a bucket's median)
NAME_WIDTH = 44
OTHER_SERIES = 5  # other series named in the header
QUIET_LAYERS = 15  # layers without change points shown, by share (--all: every one)
# A sparkline spans at least this share of the layer's median: steady noise stays flat instead
# of being stretched over all eight bars.
MIN_SPAN = 0.10


def sparkline(values: Sequence[float], width: int = SPARK_WIDTH) -> str:
    """One character per commit (per bucket of commits past `width`), the bar's height the
    value's place between the lowest and highest; a space where nothing was measured."""
    return sparklines(np.asarray(values, dtype=float)[None, :], width)[0]


def sparklines(matrix: np.ndarray, width: int = SPARK_WIDTH) -> list[str]:
    """`sparkline` of each row of a layers x commits matrix, worked out together."""
    data = _binned(np.asarray(matrix, dtype=float), width)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row with nothing measured
        low, high = np.nanmin(data, axis=1), np.nanmax(data, axis=1)
        middle = np.nanmedian(data, axis=1)
    span = np.maximum(high - low, MIN_SPAN * np.abs(middle))
    base = np.where(high - low < span, np.minimum(low, middle - span / 2), low)
    with np.errstate(invalid="ignore", divide="ignore"):
        level = np.where(span[:, None] > 0, (data - base[:, None]) / span[:, None], 0.0)
    index = np.clip(np.nan_to_num(level * len(BARS)).astype(int), 0, len(BARS) - 1)
    chars = np.array(list(BARS))[index]
    chars[~np.isfinite(data)] = " "
    return ["".join(row) for row in chars]


def _binned(data: np.ndarray, width: int) -> np.ndarray:
    """The columns in `width` buckets, each its values' median, when there are more."""
    if data.shape[1] <= width:
        return data
    edges = np.linspace(0, data.shape[1], width + 1).round().astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a bucket with nothing measured
        columns = [np.nanmedian(data[:, a:b], axis=1) for a, b in itertools.pairwise(edges)]
    return np.stack(columns, axis=1)


def pct_text(step: Step) -> str:
    """`+15.2% [+12.0%, +18.5%]`: the ratio and its 95% interval, as percent changes."""
    return f"{step.pct:+.1f}% [{100 * (step.low - 1):+.1f}%, {100 * (step.high - 1):+.1f}%]"


def where_text(change: Change, window: Window) -> str:
    """`at commit 38/60 3f2a1b0c9d (after 9d8c7b6a5f)`: the first commit of the new level and
    the last of the old one."""
    number = window.earlier + change.step.index + 1
    return f"at commit {number} {change.after_rev[:10]} (after {change.before_rev[:10]})"


def change_text(change: Change, window: Window) -> str:
    text = f"{pct_text(change.step)} {where_text(change, window)}"
    if change.before_us is not None and change.after_us is not None:
        text += f": {format_time_us(change.before_us)} -> {format_time_us(change.after_us)}"
    return text


def header_lines(view: HistoryOverview) -> list[str]:
    window = view.window
    series = window.series
    commits = window.commits
    shown = len(commits)
    total = window.earlier + shown
    branch = f", branch {series.branch}" if series.branch else ""
    timing = "self time per iteration"
    lines = [
        f"history {view.db}: {series.model} on {series.machine.describe()}{branch}",
        f"commits {window.earlier + 1}-{total} of {total}"
        + (f" ({commits[0].short} .. {commits[-1].short})" if commits else "")
        + f", {timing}; change points of at least {view.min_change_pct:g}%",
    ]
    if view.other_series:
        lines.append(
            f"other series in this file ({len(view.other_series)}; --machine KEY, --model, "
            "--branch pick one):"
        )
        lines += [f"  {series_text(s)}" for s in view.other_series[:OTHER_SERIES]]
        if len(view.other_series) > OTHER_SERIES:
            lines.append(f"  ... and {len(view.other_series) - OTHER_SERIES} more")
    if not view.drift_known and window.paths:
        lines.append(
            f"note: {len(window.paths)} layer(s): too few to tell a change of the machine from "
            "one of the code, so no step is labelled environment"
        )
    return lines


def series_text(series: Series) -> str:
    """`net.py:Net on <machine> (machine 3f2a1b0c), branch main: 12 commits, 14 sessions`."""
    branch = f", branch {series.branch}" if series.branch else ""
    return (
        f"{series.model} on {series.machine.describe()} (machine {series.machine.key()[:8]})"
        f"{branch}: {series.commits} commits, {series.sessions} sessions"
    )


def environment_lines(view: HistoryOverview) -> list[str]:
    lines = []
    if view.environment:
        lines.append(
            "environment: every layer moved together (the machine, torch, threads, or a change "
            "to the whole model); not blamed on a layer:"
        )
        lines += [f"  {change_text(c, view.window)}" for c in view.environment]
    if view.busy:
        lines.append(f"busy runs, left out of the layers' change points: {busy_text(view)}")
    return lines


def busy_text(view: HistoryOverview) -> str:
    """`commit 7 2197bcaf3c (every layer x1.77)`: one run that every layer felt."""
    window = view.window
    return ", ".join(
        f"commit {window.earlier + i + 1} {window.commits[i].short} (every layer "
        f"x{view.drift[i]:.2f})"
        for i in view.busy
    )


def layer_line(layer: LayerHistory, view: HistoryOverview, name_width: int, spark: str) -> str:
    name = _cut(layer_title(layer), name_width)
    latest = format_time_us(layer.latest_us) if layer.latest_us is not None else "-"
    share = f"{layer.share_pct:.1f}%" if layer.share_pct is not None else "-"
    line = f"  {name:<{name_width}}  {spark}  {latest:>10}  {share:>6}"
    own = layer.code_changes
    if own:
        line += "  " + "; ".join(change_text(c, view.window) for c in reversed(own))
    return line


def _sparks(view: HistoryOverview, layers: Sequence[LayerHistory]) -> list[str]:
    if not layers:
        return []
    return sparklines(view.window.self_us[[layer.row for layer in layers]])


def layer_title(layer: LayerHistory) -> str:
    """`blocks.0.fc (Linear)`, control characters and line breaks shown escaped."""
    return visible(f"{layer.path or '(root)'} ({layer.class_name})")


def _cut(text: str, width: int) -> str:
    """The text within `width` characters, its middle given up (both ends name a layer)."""
    if len(text) <= width:
        return text
    keep = width - 1
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]


def render_history_text(view: HistoryOverview, all_layers: bool = False) -> list[str]:
    """The lines `history show` prints (names from models and files shown escaped: a line
    break in a module name cannot start a line of its own)."""
    return [visible(line) for line in _lines(view, all_layers)]


def _lines(view: HistoryOverview, all_layers: bool) -> list[str]:
    lines = header_lines(view)
    if not view.window.commits:
        return [*lines, "no commits in this window"]
    lines += environment_lines(view)
    changed = list(view.changed())
    quiet = [layer for layer in view.layers if not layer.code_changes]
    shown_quiet = quiet if all_layers else quiet[:QUIET_LAYERS]
    width = min(NAME_WIDTH, max((len(layer_title(x)) for x in view.layers), default=8))
    spark = "self time over the commits"
    columns = f"  {'layer':<{width}}  {spark:<{SPARK_WIDTH}}  {'latest':>10}  {'share':>6}"
    lines.append(f"layers with change points: {len(changed)} of {len(view.layers)}")
    sparks = dict(zip(changed + shown_quiet, _sparks(view, changed + shown_quiet), strict=True))
    if changed:
        lines.append(columns + "  change points, newest first")
        lines += [layer_line(layer, view, width, sparks[layer]) for layer in changed]
    if shown_quiet:
        more = "" if len(shown_quiet) == len(quiet) else " (--all for every layer)"
        lines.append(
            f"layers without change points: {len(shown_quiet)} of {len(quiet)} by share{more}"
        )
        lines.append(columns)
        lines += [layer_line(layer, view, width, sparks[layer]) for layer in shown_quiet]
    return lines


__all__ = [
    "busy_text",
    "change_text",
    "header_lines",
    "pct_text",
    "render_history_text",
    "series_text",
    "sparkline",
    "sparklines",
    "where_text",
]
