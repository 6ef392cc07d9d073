"""A window of one series: its recent commits, and per layer its figures at each of them.

`show` reads the last `DEFAULT_LAST` commits of a series by default (or from a commit on): the
change points a team acts on are recent ones, and what is read grows with the window, not with
the file (10,000 sessions of 1,000 layers: the window's 100 commits are 100,000 rows of the 10
million). A commit measured several times (a rerun, several CI jobs) is one point: per layer the
median of its sessions' figures.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from hybridprof.history.store import HistoryStore, Series, SessionRow

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
    share_pct: Matrix


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
    ids = [s.session_id for s in rows]
    figures = store.window_rows(ids)
    classes = _classes(store, rows, {int(f[1]) for f in figures})
    paths = store.layer_paths(sorted(classes))
    return _assemble(series, rows, column, figures, paths, classes, earlier=start)


def _classes(store: HistoryStore, rows: list[SessionRow], layers: set[int]) -> dict[int, str]:
    """Each layer's class at the latest commit that measured it: the last commit's sessions
    first (they hold most layers), the others only for the layers they miss."""
    latest = [s.session_id for s in rows if rows and s.commit_id == rows[-1].commit_id]
    classes = store.classes(latest)
    if not layers <= set(classes):
        classes = store.classes([s.session_id for s in rows]) | classes
    return {layer: classes[layer] for layer in layers}


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
    classes: dict[int, str],
    earlier: int,
) -> Window:
    """The matrices of the window's figures (rows: session, layer, self time, share)."""
    layer_ids = sorted(paths, key=lambda i: path_order(paths[i]))
    shape = (len(layer_ids), len(column))
    self_us, share = np.full(shape, np.nan), np.full(shape, np.nan)
    if figures:
        flat = np.fromiter(itertools.chain.from_iterable(figures), float, 4 * len(figures))
        sessions_, layers_, times, shares = flat.reshape(-1, 4).T
        shares = np.where(shares < 0, np.nan, shares)  # -1: not measured
        rows = _lookup({layer_id: i for i, layer_id in enumerate(layer_ids)}, layers_)
        cols = _lookup({s.session_id: column[s.commit_id] for s in sessions}, sessions_)
        self_us, share = _medians(rows, cols, times, shape), _medians(rows, cols, shares, shape)
    return Window(
        series=series,
        commits=_points(sessions, column),
        earlier=earlier,
        paths=tuple(paths[i] for i in layer_ids),
        classes=tuple(classes[i] for i in layer_ids),
        self_us=self_us,
        share_pct=share,
    )


def path_order(path: str) -> tuple[tuple[int, int | str], ...]:
    """A module path's sort key: `blocks.2` before `blocks.10` (numbered children in number
    order, as a model defines them), the root first."""
    return tuple(
        (0, int(part)) if part.isdigit() else (1, part) for part in path.split(".") if part
    )


def _lookup(mapping: dict[int, int], keys: NDArray[np.float64]) -> NDArray[np.int_]:
    """`mapping[k]` for each of `keys`, through an array (the keys are small positive ids)."""
    table = np.zeros(max(mapping) + 1, dtype=np.int64)
    table[list(mapping)] = list(mapping.values())
    return table[keys.astype(np.int64)]


def _medians(
    rows: NDArray[np.int_], cols: NDArray[np.int_], values: Matrix, shape: tuple[int, int]
) -> Matrix:
    """The matrix of each (row, column)'s median value (NaN where none)."""
    out = np.full(shape, np.nan)
    flat = out.reshape(-1)
    keys = rows * shape[1] + cols
    counts = np.bincount(keys, minlength=shape[0] * shape[1])
    if counts.max(initial=0) <= 1:  # one session per commit: nothing to pool
        flat[keys] = values
        return out
    order = np.lexsort((values, keys))  # by key, then value (NaN last within a key)
    keys, values = keys[order], values[order]
    unique, first = np.unique(keys, return_index=True)
    finite = np.add.reduceat(np.isfinite(values).astype(np.int64), first)
    has = finite > 0
    low = first + np.maximum(finite - 1, 0) // 2  # the middle one or two of the finite values
    high = first + finite // 2
    middle = np.where(has, (values[low] + values[np.minimum(high, len(values) - 1)]) / 2, np.nan)
    flat[unique] = np.where(finite % 2 == 1, values[low], middle)
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
