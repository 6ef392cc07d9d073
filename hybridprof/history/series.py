"""A window of one series: its recent commits, and per layer its figures at each of them.

`show` reads the last `DEFAULT_LAST` commits of a series by default (or from a commit on): the
change points a team acts on are recent ones, and what is read grows with the window, not with
the file (10,000 sessions of 1,000 layers: the window's 100 commits are 100,000 rows of the 10
million). A commit measured several times (a rerun, several CI jobs) is one point: per layer the
median of its sessions' figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hybridprof.history.store import FIGURE_COLUMNS, HistoryStore, Series, SessionRow

DEFAULT_LAST = 100
Matrix = NDArray[np.float64]


@dataclass(frozen=True, slots=True)
class CommitPoint:
    """One commit of the window."""

    rev: str
    subject: str
    committed_at: int | None
    sessions: int
    noisy: int  # of its sessions, those judged noisy when measured
    iteration_us: float | None  # the median of its sessions' median iterations

    @property
    def short(self) -> str:
        return self.rev[:10]


@dataclass(frozen=True, slots=True)
class Window:
    """A series' commits from `first` on, and its layers' figures (layers x commits; NaN where a
    layer was not measured at a commit)."""

    series: Series
    commits: tuple[CommitPoint, ...]
    earlier: int  # commits of the series before the window
    paths: tuple[str, ...]
    classes: tuple[str, ...]  # each layer's class at its latest commit
    self_us: Matrix
    self_low: Matrix
    self_high: Matrix
    total_us: Matrix
    share_pct: Matrix
    flops: Matrix
    mem_bytes: Matrix


def read_window(
    store: HistoryStore, series: Series, last: int | None = DEFAULT_LAST, since: str | None = None
) -> Window:
    """The series from the commit `since` names (a recorded revision, or its prefix) on, at most
    `last` commits (None: no limit); the newest commits when both cut."""
    sessions = store.sessions_of(series)
    order = _commit_order(sessions)
    start = _start(order, sessions, since)
    if last is not None:
        start = max(start, len(order) - last)
    kept = set(order[start:])
    rows = [s for s in sessions if s.commit_id in kept]
    column = {commit_id: i for i, commit_id in enumerate(order[start:])}
    figures = store.figures([s.session_id for s in rows])
    paths = store.layer_paths(sorted({int(f[1]) for f in figures}))
    return _assemble(series, rows, column, figures, paths, earlier=start)


def _commit_order(sessions: Sequence[SessionRow]) -> list[int]:
    order: list[int] = []
    seen: set[int] = set()
    for session in sessions:  # in commit order already
        if session.commit_id not in seen:
            seen.add(session.commit_id)
            order.append(session.commit_id)
    return order


def _start(order: list[int], sessions: Sequence[SessionRow], since: str | None) -> int:
    if since is None:
        return 0
    from hybridprof.errors import UsageError

    matches = {s.commit_id for s in sessions if s.rev == since or s.rev.startswith(since)}
    if not matches:
        raise UsageError(
            f"--since {since!r}: no commit of this series is recorded under that revision (give "
            "a commit hash or its prefix, as hybridprof history show lists them)"
        )
    return min(order.index(commit_id) for commit_id in matches)


def _assemble(
    series: Series,
    sessions: list[SessionRow],
    column: dict[int, int],
    figures: list[tuple[Any, ...]],
    paths: dict[int, str],
    earlier: int,
) -> Window:
    layer_ids = sorted(paths, key=lambda i: path_order(paths[i]))
    shape = (len(layer_ids), len(column))
    matrices = {name: np.full(shape, np.nan) for name in FIGURE_COLUMNS[3:]}
    classes = [""] * len(layer_ids)
    if figures:
        columns = list(zip(*figures, strict=True))  # one pass: the rest is numpy's
        rows = _lookup({layer_id: i for i, layer_id in enumerate(layer_ids)}, columns[1])
        cols = _lookup({s.session_id: column[s.commit_id] for s in sessions}, columns[0])
        for k, name in enumerate(FIGURE_COLUMNS[3:], start=3):
            raw = np.array(columns[k], dtype=float)  # None (not measured) becomes NaN
            matrices[name] = _medians(rows, cols, raw, shape)
        order = np.lexsort((cols, rows))  # by row, then column: each row's latest is its last
        ends = np.flatnonzero(np.diff(rows[order], append=-1))
        for index in order[ends]:
            classes[int(rows[index])] = str(columns[2][index])
    return Window(
        series=series,
        commits=_points(sessions, column),
        earlier=earlier,
        paths=tuple(paths[i] for i in layer_ids),
        classes=tuple(classes),
        **matrices,
    )


def path_order(path: str) -> tuple[tuple[int, int | str], ...]:
    """A module path's sort key: `blocks.2` before `blocks.10` (numbered children in number
    order, as a model defines them), the root first."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in path.split(".") if part
    )


def _lookup(mapping: dict[int, int], keys: Sequence[Any]) -> NDArray[np.int_]:
    """`mapping[k]` for each of `keys`, through an array (the keys are small positive ids)."""
    table = np.zeros(max(mapping) + 1, dtype=np.int64)
    table[list(mapping)] = list(mapping.values())
    return table[np.array(keys, dtype=np.int64)]


def _medians(
    rows: NDArray[np.int_], cols: NDArray[np.int_], values: Matrix, shape: tuple[int, int]
) -> Matrix:
    """The matrix of each (row, column)'s median value (NaN where none)."""
    out = np.full(shape, np.nan)
    keys = rows * shape[1] + cols
    order = np.lexsort((values, keys))
    keys, values = keys[order], values[order]
    unique, first, counts = np.unique(keys, return_index=True, return_counts=True)
    flat = out.reshape(-1)
    single = counts == 1
    flat[unique[single]] = values[first[single]]
    for key, start, count in zip(unique[~single], first[~single], counts[~single], strict=True):
        group = values[start : start + count]
        group = group[np.isfinite(group)]
        flat[key] = float(np.median(group)) if len(group) else np.nan
    return out


def _points(sessions: list[SessionRow], column: dict[int, int]) -> tuple[CommitPoint, ...]:
    groups: dict[int, list[SessionRow]] = {}
    for session in sessions:
        groups.setdefault(session.commit_id, []).append(session)
    points = []
    for commit_id in sorted(column, key=column.__getitem__):
        group = groups[commit_id]
        times = [s.iteration_us for s in group if s.iteration_us is not None]
        points.append(
            CommitPoint(
                rev=group[0].rev,
                subject=group[0].subject,
                committed_at=group[0].committed_at,
                sessions=len(group),
                noisy=sum(s.stability == "noisy" for s in group),
                iteration_us=float(np.median(times)) if times else None,
            )
        )
    return tuple(points)


__all__ = ["DEFAULT_LAST", "CommitPoint", "Window", "path_order", "read_window"]
