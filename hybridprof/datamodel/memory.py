"""What `--profile-memory` measures beside torchprof's net figures: memory per layer (peaks, own
allocations and frees, bytes saved for backward, forward and backward) and the step's peak (when,
where, and what was live then, by category and by the layer that allocated it), per device.

Bytes are ints, times float microseconds from the start of the measured step. Every figure is
measured from the profiler's allocation events (`profile_memory`) replayed against the layer
ranges; saved-for-backward bytes from a `saved_tensors_hooks` pair (each storage once). No figure
is negative except a layer's net change (`self_net`, `net`), which is named so wherever shown.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

from hybridprof.datamodel.jsonbounds import MAX_NUMBER
from hybridprof.datamodel.jsonio import expect
from hybridprof.datamodel.measures import Series, Stat

# The memory section's own version (MemoryProfile.version): a reader refuses a newer one by name.
MEMORY_VERSION = 1

# Where a byte was allocated, or the step's peak happened: before the measured step ("start"), in
# a layer's forward or backward, in an optimizer's step or zero_grad, or in no profiled layer.
PHASES = ("start", "forward", "backward", "optimizer", "outside")


@dataclass(frozen=True, slots=True)
class LayerMemory:
    """One layer's memory in one step on one device (medians over the measured iterations).

    Forward (`peak`...) and backward (`backward_peak`...) alike:
      peak: the most bytes live during the layer's calls (in backward: its autograd nodes, and
        its forward recomputed by checkpointing) above what was live when the call started; the
        most over its calls, never negative. peak_live: the live bytes at that moment.
      self_alloc / self_freed: bytes its own ops allocated / freed (its profiled children's not);
        alloc / freed: its children's too.
    saved: the distinct storages its forward saved for backward (activations; each storage once;
      parameters and buffers are `saved_params`, never activations). saved_unique: of those, the
      ones no earlier layer had saved: these add up to the step's saved bytes. saved_alloc: the
      saved storages its own forward allocated, whoever saved them (a Linear followed by an
      in-place activation keeps its output alive: the activation saves it, the Linear made it).
    saved_hidden: the layer ran under saved-tensor hooks of the model's own (checkpointing,
      offloading), which hide what it saves: its `saved` reads what those let through.
    """

    path: str
    peak: int = 0
    peak_live: int = 0
    self_alloc: int = 0
    alloc: int = 0
    self_freed: int = 0
    freed: int = 0
    saved: int = 0
    saved_unique: int = 0
    saved_params: int = 0
    saved_alloc: int = 0
    backward_peak: int = 0
    backward_peak_live: int = 0
    backward_self_alloc: int = 0
    backward_alloc: int = 0
    backward_self_freed: int = 0
    backward_freed: int = 0
    saved_hidden: bool = False

    json_columns = True  # a device's layers are saved as one list per field (jsonio)

    @property
    def self_net(self) -> int:
        """Its own allocations less its own frees in the forward (torchprof's figure): signed."""
        return self.self_alloc - self.self_freed

    @property
    def net(self) -> int:
        return self.alloc - self.freed


# The LayerMemory fields that are bytes (all but the path and the flag), in their order.
LAYER_BYTES = tuple(f.name for f in fields(LayerMemory) if f.name not in ("path", "saved_hidden"))


@dataclass(frozen=True, slots=True)
class MemoryBytes:
    """Live bytes by what they are. activations: storages saved for backward (what checkpointing
    a layer frees); temporaries: allocated in the step and none of the others (outputs not saved
    included); other: alive before the step, of no known role."""

    parameters: int = 0
    buffers: int = 0
    gradients: int = 0
    optimizer_state: int = 0
    activations: int = 0
    inputs: int = 0
    temporaries: int = 0
    other: int = 0

    def total(self) -> int:
        return sum(getattr(self, name) for name in CATEGORIES)

    def items(self) -> list[tuple[str, int]]:
        """(category, bytes) of the categories that hold any, largest first."""
        pairs = [(name, getattr(self, name)) for name in CATEGORIES]
        return sorted((p for p in pairs if p[1]), key=lambda p: -p[1])


CATEGORIES = tuple(f.name for f in fields(MemoryBytes))


@dataclass(frozen=True, slots=True)
class PeakShare:
    """The bytes live at the step's peak that one layer allocated, in one phase (path None: in
    no profiled layer, or alive before the step: phase "start")."""

    phase: str
    path: str | None
    categories: MemoryBytes

    @property
    def bytes(self) -> int:
        return self.categories.total()


@dataclass(frozen=True, slots=True)
class StepPeak:
    """The moment the step held the most bytes on a device.

    path: the innermost profiled layer running then (in backward: the layer whose forward made
    the autograd node); None: in no profiled layer. node: the autograd node (backward) or the
    optimizer's range (optimizer) running then. categories and by_layer: what was live then
    (None / empty when the profiler's allocation addresses could not be read).
    """

    live_bytes: int
    above_start_bytes: int
    time_us: float
    phase: str
    path: str | None = None
    node: str = ""
    iteration: int = 0  # the measured iteration it was seen in (0-based)
    reserved_bytes: int | None = None  # CUDA: held by the caching allocator then
    categories: MemoryBytes | None = None
    by_layer: tuple[PeakShare, ...] = ()  # largest first; the rest in one row of path "(rest)"


class ByteSeries(tuple[int, ...]):
    """Whole numbers of bytes, saved as one string of space-separated integers."""

    def encode(self) -> str:
        return " ".join(map(str, self))

    def json_encode(self) -> str:
        return self.encode()

    @classmethod
    def json_decode(cls, data: Any) -> ByteSeries:
        text = expect(str, data, "a byte series")
        if not _BYTES_TEXT.fullmatch(text):
            raise ValueError("a byte series holds something other than whole numbers")
        values = tuple(map(int, text.split()))
        if values and not max(map(abs, values)) <= MAX_NUMBER:
            raise ValueError(f"a byte series holds a number over {MAX_NUMBER:g}")
        return cls(values)


_BYTES_TEXT = re.compile(r"\s*(?:-?[0-9]+(?:\s+|\Z))*")


@dataclass(frozen=True, slots=True)
class TimelineLane:
    """A layer's forward call, its backward (its nodes' span) or an optimizer range, drawn beneath
    the timeline; depth: its nesting among the profiled layers (0 outermost)."""

    path: str
    phase: str
    depth: int
    start_us: float
    end_us: float

    json_columns = True


@dataclass(frozen=True, slots=True)
class MemoryTimeline:
    """Live bytes over one measured step (downsampled: per time bucket its most and its last
    value, so the peak is never lost), and what ran when."""

    time_us: Series
    live_bytes: ByteSeries
    end_us: float  # the step's length
    events: int  # allocation events in the step, before downsampling
    reserved_bytes: ByteSeries | None = None  # CUDA
    lanes: tuple[TimelineLane, ...] = ()


@dataclass(frozen=True, slots=True)
class DeviceMemory:
    """One device's memory in the measured steps ("cpu", "cuda:0").

    start_bytes: live when the step started. On CUDA exact (the caching allocator's count); on
    the CPU, whose allocator keeps no total, the bytes known to hybridprof: parameters, buffers,
    gradients, optimizer state and inputs read from the objects, what the step's warm-up left
    alive, and storages the step freed (start_exact False). Figures above a start (every peak)
    do not depend on it. allocated/freed/saved: per step.
    """

    device: str
    start_bytes: int
    start_exact: bool
    peak: StepPeak
    peak_live_bytes: Stat
    peak_above_start_bytes: Stat
    allocated_bytes: int = 0
    freed_bytes: int = 0
    saved_bytes: int = 0  # each storage once: the layers' saved_unique plus the outside row's
    saved_param_bytes: int = 0
    peak_reserved_bytes: Stat | None = None  # CUDA
    start: MemoryBytes | None = None  # start_bytes by category
    layers: tuple[LayerMemory, ...] = ()
    # allocations in no profiled layer (loss, optimizer, glue); its path is "(outside)"
    outside: LayerMemory | None = None
    timeline: MemoryTimeline | None = None
    notes: tuple[str, ...] = ()

    def layer(self, path: str) -> LayerMemory | None:
        return next((m for m in self.layers if m.path == path), None)


@dataclass(frozen=True, slots=True)
class RankPeak:
    """A merged torchrun session: one rank's step peak."""

    rank: int
    device: str
    peak_live_bytes: int
    phase: str
    path: str | None = None
    peak_reserved_bytes: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryProfile:
    """The memory section of a session (`--profile-memory` with the session strategy). The first
    device is the model's: the layer table's memory columns are its figures."""

    devices: tuple[DeviceMemory, ...]
    method: str  # how it was measured, said in the reports
    version: int  # MEMORY_VERSION when written; no default, so every file says it
    addressed_iteration: int | None = None  # the iteration whose live set is broken down
    notes: tuple[str, ...] = ()
    rank_peaks: tuple[RankPeak, ...] = ()

    def __post_init__(self) -> None:
        if self.version > MEMORY_VERSION:
            raise ValueError(
                f"its memory section is version {self.version}, newer than this hybridprof reads "
                f"({MEMORY_VERSION}); upgrade hybridprof"
            )

    @property
    def primary(self) -> DeviceMemory | None:
        return self.devices[0] if self.devices else None


def by_path(memory: DeviceMemory) -> dict[str, LayerMemory]:
    return {m.path: m for m in memory.layers}


__all__ = [
    "CATEGORIES",
    "LAYER_BYTES",
    "MEMORY_VERSION",
    "PHASES",
    "ByteSeries",
    "DeviceMemory",
    "LayerMemory",
    "MemoryBytes",
    "MemoryProfile",
    "MemoryTimeline",
    "PeakShare",
    "RankPeak",
    "StepPeak",
    "TimelineLane",
    "by_path",
]
