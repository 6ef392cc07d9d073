"""FLOPs and bytes per layer, counted in one extra pass outside the measured iterations.

How an op finds its layer (the choice this module makes): forward pre/post hooks on every module
of the model keep the stack of modules whose `forward` is running. Each op that the dispatch mode
sees in the forward counts for
- self: the innermost *profiled* (selected) layer on that stack, as self time does; outside every
  profiled layer, the innermost module on the stack, so a parent's own inline work (attention's
  matmuls in nn.MultiheadAttention) is counted for that parent, never lost;
- total: every module on the stack.
A backward op counts where the forward op that made its autograd node did: each hook notes
autograd's next sequence number next to the stack, and a backward op looks the sequence number of
the node running it up in that timeline. AccumulateGrad (no sequence number) counts for the module
that owns the parameter. Ops outside the model (the loss) count for no layer, only for the totals.
A TorchScript module takes no Python hooks, so its `forward` is wrapped for the pass instead (the
runtime's patcher, undone after): its ops count for it, not for its parent.

FLOPs come from the formulas of `torch.utils.flop_counter` (the registry FlopCounterMode uses, and
its rule of decomposing an op first) with the corrections of `formulas.py` (grouped convolutions'
backward, attention on CPU), so the layers add up to the total of a FlopCounterMode given those
formulas. Bytes are an estimate from each op's tensors (`op_bytes.py`).
"""

from __future__ import annotations

import bisect
import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import torch
from torch import nn
from torch._C import DispatchKey
from torch.utils._python_dispatch import TorchDispatchMode

from hybridprof.datamodel import LayerWork, MachinePeak, OpCount, ProfileSession, WorkProfile
from hybridprof.files.loader import ModelInputs, keeping_cwd
from hybridprof.runtime.basics.model_state import model_state_kept
from hybridprof.runtime.basics.patching import ForwardPatcher
from hybridprof.runtime.basics.workload import training_step
from hybridprof.runtime.flops.formulas import flop_registry
from hybridprof.runtime.flops.module_paths import (
    ModulePaths,
    parameter_owners,
    with_ancestors,
)
from hybridprof.runtime.flops.op_bytes import METADATA_OPS, bytes_of, moves_nothing
from hybridprof.runtime.flops.peak import PeakRequest, machine_peak, model_dtype

METHOD = (
    "dispatch-mode counter with torch.utils.flop_counter's formulas (grouped convolutions' "
    "backward and attention on CPU added); ops attributed to layers by "
    "a module stack kept with forward hooks (self: innermost profiled layer, like self time), "
    "backward ops by their autograd node's sequence number"
)
FORWARD, BACKWARD = 0, 1
# AccumulateGrad nodes have no sequence number: autograd reports UINT64_MAX for them.
NO_SEQUENCE_NR = 2**64 - 1


@dataclass(frozen=True, slots=True)
class _Where:
    """Where an op counts: its self layer (None: outside the model) and every module on the
    stack."""

    self_path: str | None
    stack: tuple[str, ...]


OUTSIDE = _Where(None, ())


@dataclass(frozen=True, slots=True)
class _OpKind:
    """What the counter needs to know of an op overload (cached per overload)."""

    moves_nothing: bool  # a view, an alias or a bare allocation
    has_formula: bool
    decomposes: bool  # has a CompositeImplicitAutograd kernel: `func.decompose` would run it


@dataclass
class _Tally:
    """Running sums for one pass: [flops, bytes] per path, self and total, and the whole pass."""

    self_work: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    total_work: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0]))
    whole: list[int] = field(default_factory=lambda: [0, 0])

    def add(self, where: _Where, flops: int, moved: int) -> None:
        self.whole[0] += flops
        self.whole[1] += moved
        if where.self_path is None:
            return
        mine = self.self_work[where.self_path]
        mine[0] += flops
        mine[1] += moved
        for path in where.stack:
            total = self.total_work[path]
            total[0] += flops
            total[1] += moved


class LayerCounter:
    """Module stack (from hooks), the sequence-number timeline, and the tallies of one pass."""

    def __init__(self, model: nn.Module, selected: tuple[str, ...]) -> None:
        self.model = model
        self.selected = frozenset(selected)
        self.registry: dict[Any, Callable[..., int]] = flop_registry()
        self.paths = ModulePaths(model)
        self.owners = parameter_owners(model, self.paths)
        self.stack: list[str] = []
        self.called: set[str] = set()
        self.where = OUTSIDE
        self.timeline_seq: list[int] = []
        self.timeline: list[_Where] = []
        self.tallies = (_Tally(), _Tally())
        self.not_counted: dict[str, Counter[str]] = defaultdict(Counter)
        self._kinds: dict[Any, _OpKind] = {}
        self._node_where: dict[int, _Where] = {}

    # ------------------------------------------------------------------ the module stack

    @contextlib.contextmanager
    def hooked(self) -> Iterator[None]:
        """Pre/post forward hooks on every module; a TorchScript module (one opaque module) gets
        a wrapped forward instead, which does the same."""
        handles = []
        scripted = ForwardPatcher(self.model, self.paths.scripted(), self._scripted_call)
        try:
            for module, path in self.paths.items_in_order():
                handles.append(module.register_forward_pre_hook(self._enter_hook(path)))
                handles.append(
                    module.register_forward_hook(self._leave_hook(path), always_call=True)
                )
            scripted.patch()
            yield
        finally:
            scripted.restore()
            for handle in handles:
                handle.remove()

    def _scripted_call(
        self, path: str, forward: Callable[..., Any], args: Any, kwargs: Mapping[str, Any]
    ) -> Any:
        self._enter_hook(path)(None, args)
        try:
            return forward(*args, **kwargs)
        finally:
            self._leave_hook(path)(None, args, None)

    def _enter_hook(self, path: str) -> Callable[..., None]:
        def enter(module: nn.Module, args: Any) -> None:
            self.called.add(path)
            self.stack.append(path)
            self._moved()

        return enter

    def _leave_hook(self, path: str) -> Callable[..., None]:
        def leave(module: nn.Module, args: Any, output: Any) -> None:
            if self.stack and self.stack[-1] == path:
                self.stack.pop()
            self._moved()

        return leave

    def _moved(self) -> None:
        self.where = self._where_of_stack(tuple(self.stack))
        if torch.is_grad_enabled():  # autograd nodes are made only then
            self.timeline_seq.append(torch._C._autograd._get_sequence_nr())
            self.timeline.append(self.where)

    def _where_of_stack(self, stack: tuple[str, ...]) -> _Where:
        if not stack:
            return OUTSIDE
        own = next((p for p in reversed(stack) if p in self.selected), stack[-1])
        return _Where(own, tuple(dict.fromkeys(stack)))

    # ------------------------------------------------------------------ counting one op

    def count(self, func: Any, args: Any, kwargs: Any, out: Any) -> None:
        kind = self.kind(func)
        node = torch._C._current_autograd_node()
        where = self.where if node is None else self._backward_where(node)
        flops = 0
        if kind.has_formula:
            flops = int(self.registry[func._overloadpacket](*args, **kwargs, out_val=out))
        elif not kind.moves_nothing and where.self_path is not None:
            self.not_counted[where.self_path][str(func._overloadpacket)] += 1
        moved = 0 if kind.moves_nothing else bytes_of(args, kwargs, out)
        self.tallies[FORWARD if node is None else BACKWARD].add(where, flops, moved)

    def kind(self, func: Any) -> _OpKind:
        kind = self._kinds.get(func)
        if kind is None:
            composite = DispatchKey.CompositeImplicitAutograd
            kind = _OpKind(
                moves_nothing=moves_nothing(func),
                has_formula=func._overloadpacket in self.registry,
                decomposes=composite in func.py_kernels
                or torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), composite),
            )
            self._kinds[func] = kind
        return kind

    def _backward_where(self, node: Any) -> _Where:
        seq = node._sequence_nr()
        key = seq if seq != NO_SEQUENCE_NR else -id(node)
        where = self._node_where.get(key)
        if where is None:
            where = self._node_origin(node, seq)
            self._node_where[key] = where
        return where

    def _node_origin(self, node: Any, seq: int) -> _Where:
        if seq == NO_SEQUENCE_NR:  # AccumulateGrad: the parameter's module
            owner = self.owners.get(id(getattr(node, "variable", None)))
            return OUTSIDE if owner is None else self._where_of_stack(with_ancestors(owner))
        index = bisect.bisect_right(self.timeline_seq, seq) - 1
        return self.timeline[index] if index >= 0 else OUTSIDE

    # ------------------------------------------------------------------ results

    def layers(self) -> tuple[LayerWork, ...]:
        forward, backward = self.tallies
        rows = []
        for path in self.paths.in_order():
            fs, ft = forward.self_work.get(path, [0, 0]), forward.total_work.get(path, [0, 0])
            bs, bt = backward.self_work.get(path, [0, 0]), backward.total_work.get(path, [0, 0])
            skipped = self.not_counted.get(path, Counter())
            worked = any((*fs, *ft, *bs, *bt)) or skipped
            if not worked and not (path in self.selected and path in self.called):
                continue  # a profiled layer that ran keeps its row, even with no work (Dropout)
            rows.append(
                LayerWork(
                    path=path,
                    flops=fs[0],
                    bytes=fs[1],
                    total_flops=ft[0],
                    total_bytes=ft[1],
                    backward_flops=bs[0],
                    backward_bytes=bs[1],
                    backward_total_flops=bt[0],
                    backward_total_bytes=bt[1],
                    not_counted=tuple(OpCount(n, c) for n, c in sorted(skipped.items())),
                )
            )
        return tuple(rows)


class _CountingMode(TorchDispatchMode):
    """Runs every op and hands it to the counter, decomposing first exactly as FlopCounterMode does
    (an op with a formula counted once, not once more for its decomposition)."""

    def __init__(self, counter: LayerCounter) -> None:
        super().__init__()  # type: ignore[no-untyped-call]  # torch leaves it unannotated
        self.counter = counter

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in METADATA_OPS:
            return func(*args, **kwargs)
        # FlopCounterMode's rule: decompose first (`func not in registry` holds for every overload,
        # its keys are packets); entering the mode and calling `decompose` only where it would
        # decompose (a CompositeImplicitAutograd kernel) gives the same result for less.
        decomposes = self.counter.kind(func).decomposes
        if (
            decomposes
            and func not in self.counter.registry
            and func is not torch.ops.prim.device.default
        ):
            with self:
                result = func.decompose(*args, **kwargs)
                if result is not NotImplemented:
                    return result
        out = func(*args, **kwargs)
        self.counter.count(func, args, kwargs, out)
        return out


# ---------------------------------------------------------------------- the pass


def forward_with_autograd(model: nn.Module, inputs: ModelInputs) -> None:
    """One forward with autograd on (nothing calls backward; the graph is dropped at once).

    Under no_grad, nn.MultiheadAttention and nn.TransformerEncoderLayer in eval mode take fused
    fast paths (`aten._native_multi_head_attention`, ...) that have no FLOP formula, so their whole
    work would read "not counted". With autograd on they run the ops they are made of, the same
    arithmetic, which can be counted, as FlopCounterMode counts a plain `model(x)`.
    """
    with torch.enable_grad():
        model(*inputs.args, **inputs.kwargs)


def count_work(
    model: nn.Module,
    inputs: ModelInputs,
    selected: tuple[str, ...],
    backward: bool,
    peak: MachinePeak,
) -> WorkProfile:
    """One forward (a training step with `backward`) under the counter; the model is left as it
    was."""
    counter = LayerCounter(model, selected)
    step = training_step if backward else forward_with_autograd
    start = time.perf_counter()
    # buffers kept forward-only too: a counting pass in train mode must not move BatchNorm's stats
    with (
        model_state_kept(model, training=backward),
        counter.hooked(),
        _CountingMode(counter),
        keeping_cwd(),
    ):
        step(model, inputs)
    forward, backward_tally = counter.tallies
    return WorkProfile(
        layers=counter.layers(),
        peak=peak,
        forward_flops=forward.whole[0],
        forward_bytes=forward.whole[1],
        backward_flops=backward_tally.whole[0],
        backward_bytes=backward_tally.whole[1],
        method=METHOD,
        pass_s=round(time.perf_counter() - start, 3),
    )


def with_work(
    session: ProfileSession,
    model: nn.Module,
    inputs: ModelInputs,
    backward: bool,
    peaks: tuple[float | None, float | None] = (None, None),
) -> ProfileSession:
    """`session` with its `flops`: a forward (a training step with `backward`) counted, and the
    machine's peak (`peaks`: GFLOP/s and GB/s, each None: measured here).

    The measured figures are already in `session`: this pass runs after them, so it cannot change
    them. If the counting pass fails or is interrupted, the session is kept, with a warning why
    it has no FLOPs.
    """
    if session.interrupted:
        return _without_work(session, "the run was interrupted")
    parameters = list(model.parameters())
    request = PeakRequest(
        device=parameters[0].device if parameters else torch.device("cpu"),
        dtype=model_dtype(parameters),
        threads=torch.get_num_threads(),
        gflops=peaks[0],
        gbps=peaks[1],
    )
    try:
        peak = machine_peak(request)
        work = count_work(model, inputs, session.plan.selected_paths(), backward, peak)
    except KeyboardInterrupt:
        return _without_work(session, "interrupted while counting")
    except Exception as exc:  # the measured session stays worth saving
        lines = [line for line in str(exc).splitlines() if line.strip()]
        return _without_work(session, f"{type(exc).__name__}: {lines[0] if lines else ''}")
    return replace(session, flops=work)


def _without_work(session: ProfileSession, why: str) -> ProfileSession:
    return replace(session, warnings=(*session.warnings, f"FLOPs not counted: {why}"))


__all__ = ["METHOD", "LayerCounter", "count_work", "with_work"]
