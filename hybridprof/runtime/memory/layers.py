"""One device's memory figures per layer in one step, from its allocation events and their
contexts, and the saved tensors the capture noted.

The live curve is the running sum of the step's signed allocation sizes, from 0 at the step's
start; the tops (`peak_live`) add the start's bytes (see measures/memory_figures.py). A layer's
forward peak is, over its calls, the most of the curve inside a call less its value when the call
began; in the backward the same over the autograd nodes its forward made (per forward call, from its
first node's start) and over its forward's recomputations. Window maxima come from one
`np.maximum.reduceat` over the windows sorted by start, so nested windows cost their length and no
more. Allocations and frees are summed per context (`np.bincount`), then spread to the layers of
each context's chain: the innermost one's own figures, every one's totals.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from hybridprof.runtime.measures.memory_figures import FIELD, FIELDS
from hybridprof.runtime.memory.contexts import Context, StepContexts, Window
from hybridprof.runtime.memory.records import Pack

Array = np.ndarray[Any, Any]
_FORWARD = tuple(FIELD[n] for n in ("self_alloc", "alloc", "self_freed", "freed"))
_BACKWARD = tuple(
    FIELD[n]
    for n in ("backward_self_alloc", "backward_alloc", "backward_self_freed", "backward_freed")
)


@dataclass(slots=True)
class LayerRows:
    """Per layer, one row of figures (FIELDS ints); `outside` for no layer. Python lists while
    they are summed into (an item of a numpy array costs several times more to update)."""

    index: dict[str, int] = field(default_factory=dict)
    rows: list[list[int]] = field(default_factory=list)
    outside: list[int] = field(default_factory=lambda: [0] * FIELDS)

    def row(self, path: str | None) -> list[int]:
        if path is None:
            return self.outside
        at = self.index.get(path)
        if at is None:
            at = self.index[path] = len(self.rows)
            self.rows.append([0] * FIELDS)
        return self.rows[at]

    def matrix(self) -> Array:
        return np.array(self.rows, dtype=np.int64).reshape(len(self.rows), FIELDS)


@dataclass(frozen=True, slots=True)
class Curve:
    """The live curve of one step on one device: times (ns) and live bytes above the start."""

    time: Array
    live: Array

    def tops(self, windows: Sequence[Window]) -> tuple[Array, Array, Array]:
        """Per window: the live bytes when it began, the most live bytes within it (never below
        the first), and the index of its first event."""
        starts = np.array([w.start for w in windows], dtype=np.int64)
        ends = np.array([w.end for w in windows], dtype=np.int64)
        first = np.searchsorted(self.time, starts, side="left")
        last = np.searchsorted(self.time, ends, side="left")  # an event at the end is outside
        live = self.live
        begun = np.where(first > 0, live[np.maximum(first - 1, 0)] if len(live) else 0, 0)
        top = begun.copy()
        has = np.flatnonzero(last > first)
        if len(has):
            has = has[np.lexsort((last[has], first[has]))]
            bounds = np.empty(2 * len(has), dtype=np.int64)
            bounds[0::2], bounds[1::2] = first[has], last[has]
            most = np.maximum.reduceat(np.append(live, live[-1]), bounds)[0::2]
            top[has] = np.maximum(begun[has], most)
        return begun, top, first


def layer_rows(
    curve: Curve,
    deltas: Array,
    context_ids: Array,
    contexts: StepContexts,
    packs: Iterable[Pack],
    hidden: Iterable[str],
    start: int,
) -> tuple[LayerRows, int, int]:
    """Every layer's figures in the step (`start`: the bytes live when it began); also the
    step's saved bytes (each storage once) and saved parameter bytes."""
    rows = LayerRows()
    _sums(rows, deltas, context_ids, contexts.contexts)
    _forward_peaks(rows, curve, contexts, start)
    _backward_peaks(rows, curve, contexts, start)
    saved, saved_params = _saved(rows, packs)
    for path in hidden:
        rows.row(path)  # a layer whose saved tensors went elsewhere still gets its row
    return rows, saved, saved_params


def _sums(rows: LayerRows, deltas: Array, ids: Array, contexts: list[Context]) -> None:
    count = len(contexts)
    made = np.rint(np.bincount(ids, np.where(deltas > 0, deltas, 0), count)).astype(np.int64)
    gone = np.rint(np.bincount(ids, np.where(deltas < 0, -deltas, 0), count)).astype(np.int64)
    for cid in np.flatnonzero(made + gone).tolist():
        context, alloc, freed = contexts[cid], int(made[cid]), int(gone[cid])
        own, total, own_freed, total_freed = _BACKWARD if context.phase == "backward" else _FORWARD
        if not context.chain:  # the outside row: forward and backward apart, optimizer too
            row = rows.outside
            row[own] += alloc
            row[total] += alloc
            row[own_freed] += freed
            row[total_freed] += freed
            continue
        for path in dict.fromkeys(p for p, _ in context.chain):
            row = rows.row(path)
            row[total] += alloc
            row[total_freed] += freed
        row = rows.row(context.chain[-1][0])
        row[own] += alloc
        row[own_freed] += freed


def _most(
    rows: LayerRows, groups: dict[str, list[tuple[int, int]]], peak: str, top: str, start: int
) -> None:
    """Per path, the window with the most above its start: that rise, and its top."""
    for path, found in groups.items():
        begun, most = max(found, key=lambda g: g[1] - g[0])
        row = rows.row(path)
        row[FIELD[peak]] = most - begun
        row[FIELD[top]] = most + start


def _forward_peaks(rows: LayerRows, curve: Curve, contexts: StepContexts, start: int) -> None:
    calls = contexts.forward_calls
    if not calls:
        return
    begun, top, _ = curve.tops(calls)
    groups: dict[str, list[tuple[int, int]]] = {}
    for window, b, t in zip(calls, begun.tolist(), top.tolist(), strict=True):
        path = contexts.contexts[window.context].path
        if path is not None:
            groups.setdefault(path, []).append((b, t))
    _most(rows, groups, "peak", "peak_live", start)


def _backward_peaks(rows: LayerRows, curve: Curve, contexts: StepContexts, start: int) -> None:
    """Per forward call, its nodes (and those of the calls inside it) as one span of backward:
    from the live bytes when its first node began to the most during any of them; a recomputed
    forward on its own."""
    spans: dict[tuple[str, int], list[int]] = {}  # (path, call) -> [first index, begun, top]
    if contexts.nodes:
        begun, top, first = curve.tops(contexts.nodes)
        for window, b, t, f in zip(
            contexts.nodes, begun.tolist(), top.tolist(), first.tolist(), strict=True
        ):
            for link in dict.fromkeys(contexts.contexts[window.context].chain):
                span = spans.get(link)
                if span is None:
                    spans[link] = [f, b, t]
                else:
                    if f < span[0]:
                        span[0], span[1] = f, b
                    span[2] = max(span[2], t)
    groups: dict[str, list[tuple[int, int]]] = {}
    for (path, _call), (_f, b, t) in spans.items():
        groups.setdefault(path, []).append((b, t))
    if contexts.recomputes:
        begun, top, _ = curve.tops(contexts.recomputes)
        for window, b, t in zip(contexts.recomputes, begun.tolist(), top.tolist(), strict=True):
            recomputed = contexts.contexts[window.context].path
            if recomputed is not None:
                groups.setdefault(recomputed, []).append((b, t))
    _most(rows, groups, "backward_peak", "backward_peak_live", start)


def _saved(rows: LayerRows, packs: Iterable[Pack]) -> tuple[int, int]:
    """Saved-for-backward bytes per layer, each storage counted once per layer (`saved`), once
    in the step at its first saver (`saved_unique`), parameters apart (`saved_params`)."""
    by_layer: dict[str | None, dict[int, int]] = {}
    params: dict[str | None, dict[int, int]] = {}
    first: dict[int, tuple[str | None, int]] = {}
    for pack in packs:
        if pack.parameter:
            params.setdefault(pack.path, {})[pack.ptr] = pack.nbytes
            continue
        by_layer.setdefault(pack.path, {})[pack.ptr] = pack.nbytes
        first.setdefault(pack.ptr, (pack.path, pack.nbytes))
    for path, storages in by_layer.items():
        rows.row(path)[FIELD["saved"]] += sum(storages.values())
    for path, nbytes in first.values():
        rows.row(path)[FIELD["saved_unique"]] += nbytes
    every_param: dict[int, int] = {}
    for path, storages in params.items():
        rows.row(path)[FIELD["saved_params"]] += sum(storages.values())
        every_param.update(storages)
    return sum(n for _, n in first.values()), sum(every_param.values())


@dataclass(frozen=True, slots=True)
class Peak:
    """Where the curve is highest (index -1: nothing rose above the start)."""

    index: int
    above: int
    context: Context


def step_peak(curve: Curve, context_ids: Array, contexts: StepContexts) -> Peak:
    if not len(curve.live):
        return Peak(-1, 0, Context("start"))
    index = int(np.argmax(curve.live))
    above = int(curve.live[index])
    if above <= 0:
        return Peak(-1, 0, Context("start"))
    return Peak(index, above, contexts.contexts[int(context_ids[index])])


__all__ = ["Curve", "LayerRows", "Peak", "layer_rows", "step_peak"]
