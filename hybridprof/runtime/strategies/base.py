"""The plug point between the patched forwards and the ways of measuring them. Torch-free.

The runtime patches each selected module's `forward` with a wrapper that calls
`strategy.call(path, original_forward, args, kwargs)`. A strategy decides what happens around that
call (a profiler range, a profiler session per call, a timer) and turns what it saw in one iteration
into an `IterationMeasure`. The driver (`runtime/runs/driver.py`, for every way a run is driven)
calls it in this order:

    strategy.begin()                       # once; profiler start-up happens here or in warm-up
    for each warm-up and measured iteration:
        strategy.begin_iteration(warmup=...)
        ... measured iterations: the step runs once unmeasured (patched forwards pass straight
            through), then strategy.start_measuring() ...
        ... model runs, patched forwards call strategy.call(...) ...
        measure = strategy.end_iteration(warmup=...)  # warm-up measures are discarded
      or, for the one iteration of a `Profile` with-block:
        result = strategy.stop_iteration()  # results worked out when read (see IterationResult)
    strategy.end()                         # always, in `finally`
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from hybridprof.planner.compat import Compat
from hybridprof.runtime.measures.iteration import IterationMeasure

if TYPE_CHECKING:  # numpy: the CLI reads the registry before it imports torch or numpy
    from hybridprof.runtime.measures.memory_figures import IterationMemory


class EventAttribution(Protocol):
    """Attributes one iteration's raw events (`events.attribution.attribute`'s signature), for
    what the plain attribution cannot see by itself (compiled code)."""

    def attribute(
        self, events: list[Any], names: Mapping[str, str], *, backward: bool, keep_raw: bool
    ) -> Any: ...


class StepMemory(Protocol):
    """What the memory hooks noted in one measured step, worked out from the step's events when
    its measure is (the stopped profiler still holds them for the allocation addresses)."""

    def replay(
        self, events: Sequence[Any], profiler: Any, names: Mapping[str, str]
    ) -> IterationMemory: ...


class MemoryHooks(Protocol):
    """Per-layer memory (`runtime/memory/`, a feature above the strategies): the hooks the session
    strategy runs around each measured step (`begin`/`end`) and each layer call (`enter`/`exit`),
    installed once per run."""

    def install(self) -> None: ...

    def uninstall(self) -> None: ...

    def begin(self) -> None: ...

    def end(self) -> StepMemory | None: ...

    def enter(self, path: str) -> None: ...

    def exit(self) -> None: ...

    def forget_breakdown(self) -> None: ...


@dataclass(frozen=True, slots=True)
class StrategyConfig:
    """What every strategy is told before it starts."""

    paths: tuple[str, ...]  # canonical paths that are patched (parents before children)
    compat: Compat
    profile_memory: bool = False
    use_device: bool = False  # measure CUDA time/memory too
    backward: bool = False  # attribute backward ops to the layer whose forward made them
    keep_raw_events: bool = False  # keep per-call event lists for Profile.raw()
    trace_path: str | None = None  # write a Chrome/Perfetto trace of the measured iterations
    # A with-block around the user's own code: whether a backward pass or an optimizer ran is
    # decided from the events seen (a forward-only block keeps the cheap forward path).
    training: bool = False
    # With profile_memory: the hooks that give per-layer memory (the session strategy uses them).
    memory: MemoryHooks | None = None
    # A model with compiled code: attributes each iteration's events (compiled/compiled_run.py).
    compiled: EventAttribution | None = None
    # Record ops' input shapes: a tensor-parallel model's collectives' bytes come from them.
    record_shapes: bool = False


class IterationResult(Protocol):
    """A stopped iteration, worked out as far as its reader asks (`Profile` reads it lazily)."""

    @property
    def layers_suffice(self) -> bool:
        """True when `layer_measure` alone holds every per-layer number and is cheaper than
        `measure`; False when there is nothing cheaper than the full measure."""
        ...

    def layer_measure(self) -> IterationMeasure:
        """Per-layer calls and self/total CPU time (no ops unless the full pass already ran)."""
        ...

    def measure(self) -> IterationMeasure:
        """Everything: ops, memory, device and backward time as configured."""
        ...

    def raw_events(self) -> dict[str, list[Any]]:
        """Per path, one event list per call (torchprof's `raw()` shape); empty unless kept."""
        ...


@dataclass(frozen=True, slots=True)
class MeasuredIteration:
    """The `IterationResult` of a strategy that measures as it goes: everything is already there."""

    full: IterationMeasure
    # Builds the raw event lists when `raw_events()` is first asked (never inside the with-block).
    raw: Callable[[], dict[str, list[Any]]] = dict

    @property
    def layers_suffice(self) -> bool:
        return False

    def layer_measure(self) -> IterationMeasure:
        return self.full

    def measure(self) -> IterationMeasure:
        return self.full

    def raw_events(self) -> dict[str, list[Any]]:
        return self.raw()


class Strategy(Protocol):
    """One way of measuring patched forwards. See the module docstring for the call order; what
    each one can do (backward, lazy results, device time) is in the registry, `StrategySpec`."""

    def begin(self) -> None: ...

    def begin_iteration(self, warmup: bool = False) -> None:
        """warmup=True: a warm-up iteration, whose measure will be discarded; a strategy need not
        measure it at all (only run the step)."""
        ...

    def start_measuring(self) -> None:
        """Whatever ran since `begin_iteration` (the runner's unmeasured warm step) is not part of
        the iteration's measure."""
        ...

    def call(
        self,
        path: str,
        forward: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
    ) -> Any: ...

    def end_iteration(self, warmup: bool = False) -> IterationMeasure:
        """The iteration's measure. warmup=True: the caller discards it (a warm-up, whose length
        `--warmup auto` only knows as it goes), so a strategy may skip working it out, and leaves
        it out of the trace."""
        ...

    def stop_iteration(self) -> IterationResult | None:
        """Stop the iteration and hand back its results unread (None: no iteration was open)."""
        ...

    def end(self) -> None: ...

    def raw_events(self) -> dict[str, list[Any]]:
        """Per path, one event list per call (torchprof's `raw()` shape); empty unless kept."""
        ...
