"""What the memory figures need from inside the measured step, beside the profiler's events.

The profiler records every allocation and free with its time and size (`profile_memory`). What its
events cannot say is which storages a layer saved for backward, which ones are parameters,
gradients or optimizer state, and (on the CPU, whose allocator keeps no running total) what was
alive before the step. `MemoryCapture` notes those, around each measured step:

- one saved-tensor hooks pair for the step (`torch.autograd.graph.saved_tensors_hooks`' own
  push/pop, chained to a pair the caller had pushed): each saved storage's address and size with
  the innermost profiled layer call running (the module stack, fed by the strategy's `call`).
  The pack hook returns `tensor.detach()`, never the tensor itself: that would keep the graph
  alive in a reference cycle through C++. With saved-tensor hooks torch no longer checks that
  a saved tensor was not modified in place before backward, so the unpack hook checks it (the
  detached tensor shares the original's version counter) and raises torch's own error: a model
  that fails without hybridprof fails under it too. A layer that runs under the model's own
  hooks (checkpointing, offloading) is noted: what it saves is theirs to see, not ours.
- post-accumulate-grad hooks on the parameters, registered once per run: which storages became
  `.grad` in the step.
- at the step's start: the storages of the parameters, buffers, gradients, the optimizers' state
  (optimizers the caller names) and the inputs, with weakrefs on the mortal ones (gradients,
  inputs): the CPU allocator does not report the free of a block allocated before the profiler
  started, so such a death is taken from the weakref. On CUDA, the allocator's own counts.
- at the step's end: the optimizers' state (a first step creates it).

`end()` hands the step's notes over as a `RecordedStep` (its `StepRecords`, records.py), so a
stopped iteration can be worked out later while the capture goes on to the next one: the session
strategy is handed the capture as its `MemoryHooks` and calls `replay` once it reads the events.
"""

from __future__ import annotations

import itertools
import time
import weakref
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from hybridprof.runtime.basics.tensors import iter_tensors
from hybridprof.runtime.measures.memory_figures import CATEGORY, IterationMemory
from hybridprof.runtime.memory.records import Known, Pack, StepRecords, block_size
from hybridprof.runtime.memory.replay import replay

_autograd: Any = torch._C._autograd
_graph_task = getattr(torch._C, "_current_graph_task_id", None)  # -1 outside a backward pass


def storage_of(tensor: Any) -> tuple[int, int, str] | None:
    """(address, bytes, device type) of a tensor's storage; None for a tensor without one."""
    try:
        storage = tensor.untyped_storage()
        return storage.data_ptr(), storage.nbytes(), tensor.device.type
    except (RuntimeError, NotImplementedError, TypeError):
        # Sparse tensors and tensor subclasses without a storage of their own refuse
        # `untyped_storage()` (with one of these): no one block of the allocator's to match.
        return None


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One measured step's records, with the capture that made them: a `StepMemory` (see
    `strategies/base.py`), replayed when the strategy reads the step's events."""

    records: StepRecords
    capture: MemoryCapture

    def replay(
        self, events: Sequence[Any], profiler: Any, names: Mapping[str, str]
    ) -> IterationMemory:
        """The step's memory from its events (`replay.py`), while the profiler still holds them."""
        return replay(events, profiler, self.records, names, self.capture)


class MemoryCapture:
    """The hooks and records of one profiled run's memory (install once, then begin/end each
    measured step; `enter`/`exit` around each layer call)."""

    def __init__(
        self,
        model: nn.Module,
        *,
        optimizers: Sequence[Any] = (),
        inputs: Any = None,
    ) -> None:
        self.model = model
        self.optimizers = list(optimizers)
        self.inputs = inputs
        self.stack: list[str] = []
        self.best_above: int | None = None  # the broken-down iteration's peak (see replay.py)
        self.replayed = 0  # measured iterations worked out so far
        self.starts: dict[str, int] = {}  # device type -> bytes live at the start, as last found
        self._static: dict[str, dict[int, Known]] = {}  # parameters and buffers, once per run
        self._handles: list[Any] = []
        self._emptied: list[torch.Tensor] = []  # parameters that had no post-accumulate hooks
        self._installed = False
        self._cuda: int | None = None
        self._pushed = False
        self._recording = False
        self._pack_fn = self._pack
        self._unpack_fn = self._unpack
        self._outer: tuple[Any, Any] | None = None
        self._weak: list[Any] = []
        self._packs: list[Pack] = []
        self._grads: list[tuple[int, int, int, str]] = []
        self._hidden: set[str] = set()
        self._deaths: dict[int, int] = {}
        self._known: dict[str, dict[int, Known]] = {}
        self._device_start: dict[str, int] = {}
        self._unseen = 0
        self._hooks_note = ""
        self._mark_ns = 0

    # -- once per run

    def forget_breakdown(self) -> None:
        """The iteration broken down was left out of the run (another process took its core, or
        compiled code compiled again): the next one replayed is broken down instead."""
        self.best_above = None

    def install(self) -> None:
        """Register the gradient hooks and note the parameters' and buffers' storages."""
        if self._installed:
            return
        self._installed = True
        static: dict[str, dict[int, Known]] = {}
        _add(static, self.model.parameters(), CATEGORY["parameters"])
        _add(static, self.model.buffers(), CATEGORY["buffers"])
        self._static = static
        self._cuda = self._cuda_index()  # the model stays where it is for the run
        for parameter in self.model.parameters():
            if parameter.requires_grad and parameter.is_leaf:
                if getattr(parameter, "_post_accumulate_grad_hooks", None) is None:
                    self._emptied.append(parameter)
                register: Any = parameter.register_post_accumulate_grad_hook
                self._handles.append(register(self._grad))

    def uninstall(self) -> None:
        """Take every hook off again, leaving the parameters as they were."""
        self.end()
        for handle in self._handles:
            handle.remove()
        for parameter in self._emptied:
            if not parameter._post_accumulate_grad_hooks:
                # as it was: no hook dict at all
                parameter._post_accumulate_grad_hooks = None  # type: ignore[assignment]
        self._handles, self._emptied, self._installed = [], [], False

    # -- each measured step

    def begin(self) -> None:
        """The step starts now: note what is alive, and record from here on (again, when the
        runner's unmeasured warm step ran since the last `begin`)."""
        self.install()
        if not self._pushed:
            self._push()
        self._reset()
        self._known = self._known_now()
        self._watch_mortal()
        if torch.cuda.is_available() and torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
            index = torch.cuda.current_device()
            self._device_start = {"cuda": torch.cuda.memory_allocated(index)}
        self._mark_ns = time.time_ns()
        self._recording = True

    def end(self) -> RecordedStep | None:
        """The step is over: stop recording and hand over its records (None if none began)."""
        if self._pushed:
            self._pushed = False
            _autograd._pop_saved_tensors_default_hooks()
        if not self._recording:
            return None
        self._recording = False
        end_ns = time.time_ns()
        self._weak = []  # no death after the step is the step's
        records = StepRecords(
            mark_ns=self._mark_ns,
            end_ns=end_ns,
            packs=tuple(self._packs),
            grads=tuple(self._grads),
            known=self._known,
            deaths=dict(self._deaths),
            optimizer_after=self._optimizer_state(),
            hidden=frozenset(self._hidden),
            device_start=self._device_start,
            unseen_packs=self._unseen,
            hooks_note=self._hooks_note,
            optimizers=len(self.optimizers),
        )
        return RecordedStep(records, self)

    def enter(self, path: str) -> None:
        """A profiled layer call begins (`exit` when it ends, however it ends)."""
        self.stack.append(path)
        if self._recording and self._pushed and torch.is_grad_enabled():
            top = _autograd._top_saved_tensors_default_hooks(False)
            if top is None or top[0] is not self._pack_fn:
                self._hidden.add(path)

    def exit(self) -> None:
        self.stack.pop()

    # -- the devices

    def device_type(self) -> str:
        """Where the model is: "cuda" when any parameter or buffer is on a CUDA device."""
        self.install()
        return "cuda" if self._cuda is not None else "cpu"

    def device_name(self, device: str) -> str:
        """A device type as the session names it ("cpu", "cuda:0")."""
        if device != "cuda":
            return device
        self.install()
        index = self._cuda
        if index is None and torch.cuda.is_available():
            index = torch.cuda.current_device()
        return f"cuda:{index}" if index is not None else "cuda"

    def _cuda_index(self) -> int | None:
        for tensor in itertools.chain(self.model.parameters(), self.model.buffers()):
            if tensor.device.type == "cuda":
                return tensor.device.index if tensor.device.index is not None else 0
        return None

    # -- the hooks

    def _pack(self, tensor: torch.Tensor) -> Any:
        if self._recording:
            self._note_saved(tensor)
        outer = self._outer
        if outer is not None:
            return outer[0](tensor)  # the caller's pair saves it: theirs to check
        # never `tensor` itself: a reference cycle would keep the graph alive
        return tensor.detach(), tensor._version

    def _unpack(self, packed: Any) -> Any:
        outer = self._outer
        if outer is not None:
            return outer[1](packed)
        saved, version = packed
        if saved._version != version:
            raise RuntimeError(
                "one of the variables needed for gradient computation has been modified by an "
                f"inplace operation: [{saved.type()} {list(saved.shape)}] is at version "
                f"{saved._version}; expected version {version} instead"
            )
        return saved

    def _note_saved(self, tensor: torch.Tensor) -> None:
        found = storage_of(tensor)
        if found is None or not found[1]:
            self._unseen += found is None
            return
        ptr, nbytes, device = found
        in_backward = _graph_task is not None and _graph_task() != -1
        parameter = ptr in self._static.get(device, {})
        path = self.stack[-1] if self.stack else None
        self._packs.append(Pack(ptr, nbytes, path, time.time_ns(), parameter, in_backward, device))

    def _grad(self, parameter: torch.Tensor) -> None:
        if not self._recording or parameter.grad is None:
            return
        found = storage_of(parameter.grad)
        if found is not None:
            self._grads.append((found[0], found[1], time.time_ns(), found[2]))

    def _push(self) -> None:
        """Our pack/unpack pair on top of the caller's (theirs still runs, after ours)."""
        top = _autograd._top_saved_tensors_default_hooks(False)
        self._outer = top if top is not None and top[0] is not None else None
        try:
            _autograd._push_saved_tensors_default_hooks(self._pack_fn, self._unpack_fn)
        except RuntimeError as exc:  # saved-tensor hooks disabled here (torch's own switch)
            self._hooks_note = f"saved-for-backward bytes not measured: {str(exc)[:200]}"
            return
        self._pushed = True

    # -- the storages alive at the start

    def _known_now(self) -> dict[str, dict[int, Known]]:
        known = {device: dict(storages) for device, storages in self._static.items()}
        _add(known, (p.grad for p in self.model.parameters()), CATEGORY["gradients"])
        _add(known, optimizer_tensors(self.optimizers), CATEGORY["optimizer_state"])
        _add(known, iter_tensors(self.inputs), CATEGORY["inputs"])
        return known

    def _watch_mortal(self) -> None:
        """Weakrefs on the CPU gradients and inputs: see their death if the allocator does not."""
        deaths = self._deaths
        for tensor in [*(p.grad for p in self.model.parameters()), *iter_tensors(self.inputs)]:
            if isinstance(tensor, torch.Tensor) and tensor.device.type == "cpu":
                storage = tensor.untyped_storage()
                ptr = storage.data_ptr()

                def died(_: Any, ptr: int = ptr) -> None:
                    deaths.setdefault(ptr, time.time_ns())

                self._weak.append(weakref.ref(storage, died))

    def _optimizer_state(self) -> dict[str, dict[int, int]]:
        found: dict[str, dict[int, Known]] = {}
        _add(found, optimizer_tensors(self.optimizers), CATEGORY["optimizer_state"])
        return {device: {p: k.nbytes for p, k in s.items()} for device, s in found.items()}

    def _reset(self) -> None:
        self.stack.clear()
        self._packs, self._grads, self._hidden, self._deaths = [], [], set(), {}
        self._known, self._device_start = {}, {}
        self._unseen, self._hooks_note = 0, ""


def optimizer_tensors(optimizers: Iterable[Any]) -> Iterable[Any]:
    """Every tensor in the state of the given optimizers (moments, step counters)."""
    for optimizer in optimizers:
        for state in getattr(optimizer, "state", {}).values():
            if isinstance(state, dict):
                yield from state.values()


def _add(known: dict[str, dict[int, Known]], tensors: Iterable[Any], category: int) -> None:
    """Note each tensor's storage under `category`, unless already known (the first role wins:
    parameters before buffers before gradients before optimizer state before inputs)."""
    for tensor in tensors:
        if not isinstance(tensor, torch.Tensor):
            continue
        found = storage_of(tensor)
        if found is None or not found[1]:
            continue
        ptr, nbytes, device = found
        storages = known.setdefault(device, {})
        if ptr not in storages:
            storages[ptr] = Known(block_size(nbytes, device), category)


__all__ = ["MemoryCapture", "RecordedStep", "storage_of"]
