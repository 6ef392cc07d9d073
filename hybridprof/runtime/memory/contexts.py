"""Where each allocation happened: the layer call, backward node or optimizer step running on its
thread at its time.

Per thread the profiler's events nest by time (as events/attribution.py walks them). Of those,
a few enclose everything memory is attributed to: the layer ranges (one per layer call), the
autograd nodes (`autograd::engine::evaluate_function: <Node>`) and the optimizers' ranges
(`Optimizer.step#AdamW.step`, `Optimizer.zero_grad#...`). They are walked once per iteration in
Python (a few per layer call), each getting a `Context`:

- a layer range: forward, its chain of (path, call) from the outermost profiled layer in;
- a layer range opened inside an autograd node: a forward recomputed by checkpointing, which is
  backward memory of its own layer (call -1);
- an autograd node: backward, with the chain of the forward op that made it. As for times, that
  op is found by (forward thread, sequence number): the last forward op to carry the number made
  the node, ops in no layer included (a loss's node must not inherit the number of a layer's last
  view op). AccumulateGrad carries none: it takes the node run before it;
- an optimizer range: optimizer.

Every point (an allocation, a saved tensor, a forward op) then finds its innermost enclosing
range by binary search plus a climb to the parent while the range ended before it: numpy passes
over all points at once, a handful of climbs deep.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from hybridprof.runtime.events.attribution import BACKWARD_PREFIX
from hybridprof.runtime.events.kineto import MEMORY_EVENT
from hybridprof.runtime.memory.allocations import EventArrays

Array = np.ndarray[Any, Any]
OPTIMIZER_PREFIXES = ("Optimizer.step#", "Optimizer.zero_grad#")
_OP, _LAYER, _NODE, _OPTIMIZER, _MEMORY = range(5)
Chain = tuple[tuple[str, int], ...]  # (path, call) outermost first; call -1: recomputed


@dataclass(frozen=True, slots=True)
class Context:
    """What ran when an allocation was made: phase ("forward", "backward", "optimizer",
    "outside"), the layer calls enclosing it, and the autograd node or optimizer range."""

    phase: str
    chain: Chain = ()
    node: str = ""

    @property
    def path(self) -> str | None:
        """The innermost profiled layer (None: in no profiled layer)."""
        return self.chain[-1][0] if self.chain else None


OUTSIDE = Context("outside")


class Window(NamedTuple):
    """A span of one thread's time a figure is taken over: a layer's forward call, an autograd
    node (backward) or a recomputed forward. (A NamedTuple: one is made per range per
    iteration, and a tuple is several times cheaper to make than a frozen dataclass.)"""

    start: int
    end: int
    context: int  # its Context's id


@dataclass(slots=True)
class _Thread:
    """One thread's ranges, sorted by start, for locating points among them."""

    start: Array
    end: Array
    parent: Array  # index of the enclosing range in these arrays, -1 at the top
    context: Array


@dataclass(slots=True)
class StepContexts:
    """The contexts of one step (id 0 is OUTSIDE) and the spans figures are taken over."""

    contexts: list[Context] = field(default_factory=lambda: [OUTSIDE])
    forward_calls: list[Window] = field(default_factory=list)
    nodes: list[Window] = field(default_factory=list)
    recomputes: list[Window] = field(default_factory=list)
    optimizer: list[Window] = field(default_factory=list)
    threads: dict[int, _Thread] = field(default_factory=dict)
    _ids: dict[tuple[str, Chain, str], int] = field(
        default_factory=lambda: {("outside", (), ""): 0}
    )

    def intern(self, phase: str, chain: Chain = (), node: str = "") -> int:
        """The id of the context (phase, chain, node), made on first use (keyed by a plain tuple:
        hashed in C, not by the dataclass's Python hash)."""
        key = (phase, chain, node)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = len(self.contexts)
            self.contexts.append(Context(phase, chain, node))
        return found

    def locate(self, thread: Array, time: Array) -> Array:
        """The context id of each point (thread, time): its innermost enclosing range's."""
        out = np.zeros(len(time), dtype=np.int64)
        for tid in np.unique(thread).tolist():
            ranges = self.threads.get(tid)
            if ranges is None:
                continue
            pick = np.flatnonzero(thread == tid)
            at = innermost(ranges, time[pick])
            out[pick] = np.where(at >= 0, ranges.context[np.maximum(at, 0)], 0)
        return out


def innermost(ranges: _Thread, time: Array) -> Array:
    """Per point, the index of the innermost range holding it (start <= t < end), or -1."""
    at = np.searchsorted(ranges.start, time, side="right") - 1
    while True:
        outside = (at >= 0) & (ranges.end[np.maximum(at, 0)] <= time)
        if not outside.any():
            return at
        at[outside] = ranges.parent[at[outside]]


def step_contexts(arrays: EventArrays, names: Mapping[str, str], mark_ns: int) -> StepContexts:
    """Every range's context in the step (events from `mark_ns` on)."""
    kind, paths = _kinds(arrays.names, names)
    code = arrays.code
    measured = arrays.start >= mark_ns
    ranges = np.flatnonzero(measured & (kind[code] != _OP) & (kind[code] != _MEMORY))
    ranges = ranges[np.lexsort((arrays.start[ranges], arrays.thread[ranges]))]
    found = StepContexts()
    walk = _Walk(arrays, kind, paths, found)
    walk.run(ranges)
    seq_chains = walk.sequence_chains(measured & (kind[code] == _OP) & (arrays.seq >= 0))
    walk.finish(seq_chains)
    return found


def _kinds(unique: list[str], names: Mapping[str, str]) -> tuple[Array, list[str | None]]:
    """Per distinct event name: what kind of range it is, and the layer's path for a layer."""
    kinds, paths = [], []
    for name in unique:
        path = names.get(name)
        paths.append(path)
        if path is not None:
            kinds.append(_LAYER)
        elif name == MEMORY_EVENT:
            kinds.append(_MEMORY)
        elif name.startswith(BACKWARD_PREFIX):
            kinds.append(_NODE)
        elif name.startswith(OPTIMIZER_PREFIXES):
            kinds.append(_OPTIMIZER)
        else:
            kinds.append(_OP)
    return np.array(kinds, dtype=np.int64), paths


@dataclass(slots=True)
class _Range:
    kind: int
    chain: Chain  # forward chain (layers), recompute chain, or the node's key until resolved
    node: int  # index of the enclosing autograd node in `_Walk.node_keys`, -1 outside one
    optimizer: str
    context: int = 0


class _Walk:
    """The stack walk over one step's ranges (see the module docstring)."""

    def __init__(
        self, arrays: EventArrays, kind: Array, paths: list[str | None], found: StepContexts
    ) -> None:
        self.arrays, self.kind, self.paths, self.found = arrays, kind, paths, found
        self.kept: list[int] = []  # event index of each range kept
        self.info: list[_Range] = []
        self.parent: list[int] = []
        self.node_keys: list[tuple[int, int] | None] = []
        self.node_names: list[str] = []
        self.calls: dict[str, int] = {}
        self._positions: dict[int, _Thread] = {}

    def run(self, order: Array) -> None:
        """The stack walk over the ranges (event indices, sorted by thread then start)."""
        a = self.arrays
        kinds = self.kind[a.code[order]].tolist()
        columns = (a.start, a.end, a.thread, a.code, a.seq, a.fwd_thread)
        starts, ends, threads, codes, seqs, fwds = (c[order].tolist() for c in columns)
        stack: list[int] = []  # positions in self.kept
        kept_ends: list[int] = []
        thread, last_key = None, None
        for j, i in enumerate(order.tolist()):
            if threads[j] != thread:
                thread, last_key, stack = threads[j], None, []
            while stack and starts[j] >= kept_ends[stack[-1]]:
                stack.pop()
            up = self.info[stack[-1]] if stack else None
            info = self._range(kinds[j], codes[j], up, (fwds[j], seqs[j]), last_key)
            if info is None:
                continue  # a node or optimizer range inside a layer: part of that layer
            if info.kind == _NODE:
                last_key = self.node_keys[info.node]
            self.parent.append(stack[-1] if stack else -1)
            stack.append(len(self.kept))
            self.kept.append(i)
            kept_ends.append(ends[j])
            self.info.append(info)

    def _range(
        self,
        kind: int,
        code: int,
        up: _Range | None,
        link: tuple[int, int],
        last_key: tuple[int, int] | None,
    ) -> _Range | None:
        """A range's place (None: not one memory is attributed to); `link`: its forward thread
        and sequence number."""
        chain, node, optimizer = (up.chain, up.node, up.optimizer) if up else ((), -1, "")
        if kind == _LAYER:
            path = self.paths[code]
            assert path is not None
            if node >= 0:  # recomputed in backward: its own chain of recomputed layers
                inner = chain if up is not None and up.kind == _LAYER else ()
                return _Range(_LAYER, (*inner, (path, -1)), node, optimizer)
            call = self.calls.get(path, 0)
            self.calls[path] = call + 1
            return _Range(_LAYER, (*chain, (path, call)), -1, optimizer)
        if chain or node >= 0:
            return None
        name = self.arrays.names[code]
        if kind == _NODE:
            key = link if link[1] >= 0 else last_key
            self.node_keys.append(key)
            self.node_names.append(name[len(BACKWARD_PREFIX) :])
            return _Range(_NODE, (), len(self.node_keys) - 1, optimizer)
        return _Range(_OPTIMIZER, (), -1, name.partition("#")[2] or name)

    def sequence_chains(self, ops: Array) -> dict[tuple[int, int], Chain]:
        """(thread, sequence number) -> the chain of the last forward op to carry it."""
        a = self.arrays
        self._build_threads(final=False)
        picked = np.flatnonzero(ops)
        picked = picked[np.argsort(a.start[picked], kind="stable")]
        chains: dict[tuple[int, int], Chain] = {}
        if not len(picked):
            return chains
        thread, start = a.thread[picked], a.start[picked]
        seqs = a.seq[picked].tolist()
        at = self._locate_ranges(thread, start)
        for tid, seq, where in zip(thread.tolist(), seqs, at.tolist(), strict=True):
            info = self.info[where] if where >= 0 else None
            if info is None:
                chains[(tid, seq)] = ()  # in no layer: the loss's ops
            elif info.kind == _LAYER:
                chains[(tid, seq)] = info.chain
        return chains

    def finish(self, seq_chains: dict[tuple[int, int], Chain]) -> None:
        """Each range's context, now that every node's forward chain is known."""
        found, a = self.found, self.arrays
        kept = np.array(self.kept, dtype=np.int64)
        starts, ends = a.start[kept].tolist(), a.end[kept].tolist()
        for info, start, end in zip(self.info, starts, ends, strict=True):
            node_name = self.node_names[info.node] if info.node >= 0 else ""
            if info.kind == _LAYER and info.node < 0:
                info.context = found.intern("forward", info.chain)
                found.forward_calls.append(Window(start, end, info.context))
            elif info.kind == _LAYER:
                info.context = found.intern("backward", info.chain, node_name)
                found.recomputes.append(Window(start, end, info.context))
            elif info.kind == _NODE:
                key = self.node_keys[info.node]
                chain = seq_chains.get(key, ()) if key is not None else ()
                info.context = found.intern("backward", chain, node_name)
                found.nodes.append(Window(start, end, info.context))
            else:
                info.context = found.intern("optimizer", (), info.optimizer)
                found.optimizer.append(Window(start, end, info.context))
        self._build_threads(final=True)

    def _build_threads(self, final: bool) -> None:
        a, kept = self.arrays, np.array(self.kept, dtype=np.int64)
        parent = np.array(self.parent, dtype=np.int64)
        context = np.array([info.context for info in self.info], dtype=np.int64)
        index = np.arange(len(kept), dtype=np.int64)
        threads: dict[int, _Thread] = {}
        if len(kept):
            tids = a.thread[kept]
            for tid in np.unique(tids).tolist():
                pick = np.flatnonzero(tids == tid)  # already in start order (the walk's)
                local = np.full(len(kept), -1, dtype=np.int64)
                local[pick] = np.arange(len(pick))
                up = parent[pick]
                threads[tid] = _Thread(
                    a.start[kept[pick]],
                    a.end[kept[pick]],
                    np.where(up >= 0, local[np.maximum(up, 0)], -1),
                    context[pick] if final else index[pick],
                )
        if final:
            self.found.threads = threads
        else:
            self._positions = threads

    def _locate_ranges(self, thread: Array, time: Array) -> Array:
        """Per point, the position (in the walk's kept ranges) of its innermost range, or -1."""
        out = np.full(len(time), -1, dtype=np.int64)
        for tid in np.unique(thread).tolist():
            ranges = self._positions.get(tid)
            if ranges is None:
                continue
            pick = np.flatnonzero(thread == tid)
            at = innermost(ranges, time[pick])
            out[pick] = np.where(at >= 0, ranges.context[np.maximum(at, 0)], -1)
        return out


__all__ = ["OUTSIDE", "Chain", "Context", "StepContexts", "Window", "innermost", "step_contexts"]
