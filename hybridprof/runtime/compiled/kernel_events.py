"""One iteration's events of compiled code, put where the ordinary attribution finds them.

The attribution (`runtime/events/attribution.py`) gives every op to the innermost layer range
around it. Inside compiled code there are no layer ranges (nothing there is patched), only
dynamo's and inductor's events: `TorchDynamo Cache Lookup` (the guards), `Torch-Compiled Region:
f/c`, `CompiledFunction`, `## Call CompiledFxGraph ... ##` (the generated wrapper), and under
that one event per generated kernel (`graph_<id>_<kernel>`) or extern aten op. `rewrite` adds a
range to those events, so the attribution needs no change:

- each matched kernel or extern call gets a range of its layer (the kernel map's target) with the
  same start and end, placed just before it, so it is that layer's op (named by its kernel);
- each outermost event of the compiled machinery gets a range of a pseudo-layer `OUTSIDE` around
  it: the guards, the region's and the wrapper's own time, and any unmatched child land there, and
  `settle` moves that pseudo-layer's time into the iteration's outside time;
- a graph without a map (compiled before hybridprof's hooks, or by another backend) is one opaque
  layer: the module whose range the region ran in (or the compiled module's path).

A backward kernel runs inside `autograd::engine::evaluate_function: CompiledFunctionBackward`; the
attribution counts a range opened in a backward node as backward time of its layer, which is what
a backward kernel is. `settle` then makes each layer's totals the sum of its subtree's own times
(the kernel ranges do not nest the way modules do) and gives the layers that only run inside
compiled code their calls: the graph calls that ran some kernel of theirs.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from hybridprof.runtime.compiled.kernel_map import (
    OPTIMIZER,
    STEP_CODE,
    KernelMap,
    SiteTargets,
    Target,
)
from hybridprof.runtime.events.attribution import BACKWARD_PREFIX, range_name
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.training_names import OPTIMIZER_STEP_PREFIX
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure, PathMeasure
from hybridprof.runtime.measures.measure_table import OP_FIELDS

OUTSIDE = "\x00(compiled region)"  # a path no module can have: module names hold no NUL
OUTSIDE_RANGE = "hybridprof::compiled-region"
REGION = "Torch-Compiled Region: "
GRAPH_CALL = "## Call CompiledFxGraph"
MACHINERY = (
    "TorchDynamo Cache Lookup",
    "Torch-Compiled Region",
    "CompiledFunction",
    "Pregraph bytecode",
    "AOTDispatcher",
    GRAPH_CALL,
    "TorchDynamo",
)
COMPILE_EVENT = "dynamo"  # a compile inside a profiled block: compile time, never a layer's
NO_LAYER = (OPTIMIZER, STEP_CODE)  # a compiled step's kernels that are no layer's
LOOKAHEAD = 64  # how far ahead of the last match a kernel event may find its call site


@dataclass(slots=True)
class Rewritten:
    """What `rewrite` found in one iteration, besides the events."""

    fused: dict[str, set[str]] = field(default_factory=lambda: defaultdict(set))
    graph_calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    forward_ranges: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    matched: int = 0
    unmatched: int = 0
    opaque: int = 0  # events in graphs without a map
    compile_ns: int = 0  # time of compiles inside the profiled block
    graphs: dict[int, int] = field(default_factory=dict)  # graphs run: id of its sites -> count
    optimizer: int = 0  # kernels of a compiled step's optimizer code: the optimizer's
    step_code: int = 0  # kernels of a compiled step's own code (the loss): outside


@dataclass(slots=True)
class _Node:
    index: int
    event: Event
    children: list[_Node] = field(default_factory=list)


@dataclass(slots=True)
class _Context:
    owner: str | None = None  # the innermost real layer range's path
    region: str | None = None  # the enclosing `Torch-Compiled Region`'s "f/c"
    backward: bool = False
    machinery: bool = False


class Rewriter:
    """`rewrite` for one run: the kernel map, the layer paths that have ranges, the fallback."""

    def __init__(
        self,
        kmap: KernelMap,
        names: Mapping[str, str],
        opaque_owner: str | None,
        optimizer_range: str = OPTIMIZER_STEP_PREFIX + "compiled.step",
        step: bool = False,
    ) -> None:
        self.kmap = kmap
        # the range an optimizer kernel runs in (torch's own name for an optimizer's step, so the
        # attribution makes it the optimizer's): a compiled step's
        self.optimizer_range = optimizer_range
        # A compiled step's region spans its whole frame: the graphs, and the eager code between
        # them (the backward after the break at `backward()`, the resumed frames): that code is
        # no machinery, so the region is not outside as a whole, only its machinery inside is.
        self.step = step
        self.names = names  # range name -> path, of the selected (patched or island) layers
        self.selected = frozenset(names.values())
        self.opaque_owner = opaque_owner  # None: map kernels; else whole regions are this path's
        self._range_of: dict[str, str] = {}

    def rewrite(self, events: Iterable[Event]) -> tuple[list[Event], Rewritten]:
        found = Rewritten()
        cpu: dict[int, list[tuple[int, Event]]] = defaultdict(list)
        out = list(events)
        for index, event in enumerate(out):
            if event.kind == "cpu":
                cpu[event.thread].append((index, event))
        before: dict[int, list[Event]] = defaultdict(list)
        renamed: dict[int, Event] = {}
        for thread_events in cpu.values():
            for root in _forest(thread_events):
                self._walk(root, _Context(), found, before, renamed)
        if not before and not renamed:
            return out, found
        result: list[Event] = []
        for index, event in enumerate(out):
            result.extend(before.get(index, ()))
            result.append(renamed.get(index, event))
        return result, found

    # -- the walk

    def _walk(
        self,
        node: _Node,
        context: _Context,
        found: Rewritten,
        before: dict[int, list[Event]],
        renamed: dict[int, Event],
    ) -> None:
        stack = [(node, context)]
        while stack:
            node, context = stack.pop()
            name = node.event.name
            inner = _Context(context.owner, context.region, context.backward, context.machinery)
            if name in self.names:
                inner.owner = self.names[name]
            if name.startswith(BACKWARD_PREFIX) and "CompiledFunctionBackward" in name:
                inner.backward = True
            if name.startswith(REGION):
                inner.region = name[len(REGION) :]
            if name == COMPILE_EVENT and not context.machinery:
                found.compile_ns += node.event.end_ns - node.event.start_ns
                before[node.index].append(_range(OUTSIDE_RANGE, node.event))
                continue  # a compile: outside every layer, whatever ran inside it
            whole_frame = self.step and name.startswith(REGION)
            if name.startswith(MACHINERY) and not context.machinery and not whole_frame:
                inner.machinery = True
                opaque = self.opaque_owner is not None and name.startswith(REGION)
                owner = self._opaque_path(context.owner) if opaque else None
                before[node.index].append(
                    _range(self._range(owner) if owner is not None else OUTSIDE_RANGE, node.event)
                )
                if opaque:
                    found.opaque += 1
                    if not context.backward and owner is not None:
                        self._count(owner, found)
                    continue
            if name.startswith(GRAPH_CALL) and self.opaque_owner is None:
                self._graph_call(node, inner, found, before, renamed)
                continue
            stack.extend((child, inner) for child in reversed(node.children))

    def _graph_call(
        self,
        node: _Node,
        context: _Context,
        found: Rewritten,
        before: dict[int, list[Event]],
        renamed: dict[int, Event],
    ) -> None:
        children = node.children
        sites = self.kmap.graph_of(
            (c.event.name for c in children),
            context.region,
            context.backward,
            graph_key(node.event.name),
        )
        if not sites:  # a graph compiled without the hook: opaque, its module's
            self._opaque_graph(children, context, found, before)
            return
        found.graphs[id(sites)] = len(sites)
        position = 0
        seen: set[str] = set()
        optimizer: list[_Node] = []  # the optimizer's kernels in a row: one range around them
        for child in children:
            hit = _match(sites, position, child.event.name)
            if hit is None:
                found.unmatched += 1  # stays in the region's pseudo-layer: outside
                continue
            position = hit + 1
            site = sites[hit]
            target = site.target(context.owner, self.kmap.known)
            if target.path == OPTIMIZER:
                found.optimizer += 1
                optimizer.append(child)
            else:
                self._optimizer_range(optimizer, before)
            found.step_code += target.path == STEP_CODE  # stays in the region's: outside
            path = None if target.path in NO_LAYER else self._selected(target.path)
            if path is None and target.path not in NO_LAYER:
                continue  # no selected layer above it: outside
            found.matched += 1
            if not site.extern and child.event.name != site.kernel:
                renamed[child.index] = child.event._replace(name=site.kernel)
            if path is not None:
                self._in_layer(child, path, target, context, found, before)
                if not context.backward:
                    seen.add(path)
        self._optimizer_range(optimizer, before)
        for path in seen:
            found.graph_calls[path] += 1

    def _in_layer(
        self,
        child: _Node,
        path: str,
        target: Target,
        context: _Context,
        found: Rewritten,
        before: dict[int, list[Event]],
    ) -> None:
        """A kernel put in the range of layer `path`, with what it fused and (forward) counted."""
        before[child.index].append(_range(self._range(path), child.event))
        if target.fused:
            found.fused[path].update(target.fused)
        if not context.backward:
            found.forward_ranges[path] += 1

    def _opaque_graph(
        self,
        children: list[_Node],
        context: _Context,
        found: Rewritten,
        before: dict[int, list[Event]],
    ) -> None:
        """A graph with no call sites: all its kernels in one range of the module that owns it."""
        owner = self._opaque_path(context.owner)
        for child in children:
            before[child.index].append(_range(self._range(owner), child.event))
            found.opaque += 1
        if children and not context.backward:
            self._count(owner, found)

    def _optimizer_range(self, kernels: list[_Node], before: dict[int, list[Event]]) -> None:
        """One optimizer range from the first of `kernels` to the end of the last (emptied)."""
        if not kernels:
            return
        first, last = kernels[0].event, kernels[-1].event
        span = Event("cpu", self.optimizer_range, first.start_ns, last.end_ns, first.thread)
        before[kernels[0].index].insert(0, span)
        kernels.clear()

    # -- paths and ranges

    def _count(self, path: str, found: Rewritten) -> None:
        found.forward_ranges[path] += 1
        found.graph_calls[path] += 1

    def _opaque_path(self, owner: str | None) -> str:
        if owner is not None:
            return owner
        path = self._selected(self.opaque_owner or "")
        return OUTSIDE if path is None else path

    def _selected(self, path: str) -> str | None:
        """The path, or its nearest selected ancestor (None: no selected layer above it)."""
        while True:
            if path in self.selected:
                return path
            if not path:
                return None
            path = path.rpartition(".")[0]

    def _range(self, path: str) -> str:
        if path == OUTSIDE:
            return OUTSIDE_RANGE
        name = self._range_of.get(path)
        if name is None:
            name = self._range_of[path] = next(
                (n for n, p in self.names.items() if p == path), range_name(path)
            )
        return name


def _match(sites: list[SiteTargets], position: int, name: str) -> int | None:
    for index in range(position, min(position + LOOKAHEAD, len(sites))):
        if sites[index].matches(name):
            return index
    return None


def _range(name: str, like: Event) -> Event:
    return Event("cpu", name, like.start_ns, like.end_ns, like.thread)


def graph_key(name: str) -> str | None:
    """The FX-graph cache key a graph call's event names (`None` there: the cache was off)."""
    key = name[len(GRAPH_CALL) :].strip(" #")
    return key if key and key != "None" else None


def _forest(events: list[tuple[int, Event]]) -> list[_Node]:
    """One thread's events as trees by time containment (sorted by start, stable)."""
    ordered = sorted(events, key=lambda item: item[1].start_ns)
    roots: list[_Node] = []
    stack: list[_Node] = []
    for index, event in ordered:
        while stack and stack[-1].event.end_ns <= event.start_ns:
            stack.pop()
        while stack and event.end_ns > stack[-1].event.end_ns:  # overlaps: a sibling
            stack.pop()
        node = _Node(index, event)
        (stack[-1].children if stack else roots).append(node)
        stack.append(node)
    return roots


def settle(measure: IterationMeasure, found: Rewritten, selected: Iterable[str]) -> None:
    """The rewritten iteration's measure made right: the pseudo-layer's time outside every layer,
    calls of layers seen only inside compiled code, totals as the sums of their subtrees."""
    region = measure.paths.pop(OUTSIDE, None)
    if region is not None:
        outside = (measure.outside_cpu_us or 0.0) + region.self_cpu_us
        measure.outside_cpu_us = outside + region.backward_self_cpu_us
        for key, op in region.ops.items():  # its ops are the outside row's, with the time
            _merge_op(measure.outside_ops, key, op)
    paths = measure.paths
    for path, ranges in found.forward_ranges.items():
        record = paths.get(path)
        if record is not None:
            own_calls = record.calls - ranges
            record.calls = own_calls if own_calls > 0 else found.graph_calls.get(path, 1)
    chosen = frozenset(selected)
    for path in list(paths):
        for ancestor in _ancestors(path):
            if ancestor in chosen and ancestor not in paths:
                paths[ancestor] = PathMeasure(ancestor, calls=paths[path].calls)
    _subtree_totals(paths)


def _merge_op(ops: dict[str, OpMeasure], key: str, op: OpMeasure) -> None:
    found = ops.get(key)
    if found is None:
        ops[key] = op
        return
    for name in OP_FIELDS:
        setattr(found, name, getattr(found, name) + getattr(op, name))


def _ancestors(path: str) -> list[str]:
    parts = path.split(".") if path else []
    return [".".join(parts[:i]) for i in range(len(parts))]


def _subtree_totals(paths: dict[str, PathMeasure]) -> None:
    for record in paths.values():
        record.total_cpu_us = record.self_cpu_us
        record.backward_total_cpu_us = record.backward_self_cpu_us
        record.total_device_us = record.self_device_us
    for path, record in paths.items():
        for ancestor in _ancestors(path):
            up = paths.get(ancestor)
            if up is not None:
                up.total_cpu_us += record.self_cpu_us
                up.backward_total_cpu_us += record.backward_self_cpu_us
                up.total_device_us += record.self_device_us


__all__ = ["OUTSIDE", "OUTSIDE_RANGE", "Rewriter", "Rewritten", "settle"]
