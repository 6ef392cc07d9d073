"""The compile section of a session: what `torch.compile` did and how hybridprof measured it.

Optional (`ProfileSession.compiled`, None for eager models and in older files). Times in seconds
here (compile times), as dynamo reports them; layer times stay in the records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# "eager": no compiled code ran in the measured iterations (dynamo ran the frames eagerly: its
# recompile limit hit, an error it was told to suppress, a frame it skips); the rows are eager.
KernelMapState = Literal["mapped", "partial", "opaque", "eager"]


@dataclass(frozen=True, slots=True)
class CompiledWhere:
    """One compiled module: its path, how it was compiled (`torch.compile(module)`,
    `module.compile()`), the backend and inductor's mode."""

    path: str
    kind: str
    backend: str
    mode: str | None = None


@dataclass(frozen=True, slots=True)
class GraphBreak:
    """One graph break dynamo made: why, where in the user's code, in which modules it ran."""

    reason: str
    file: str
    line: int
    code: str = ""
    frame: str = ""  # the function holding the break (e.g. "forward")
    modules: tuple[str, ...] = ()  # the module paths whose class defines that function

    def where(self) -> str:
        name = self.file.rsplit("/", 1)[-1] if self.file else "?"
        return f"{name}:{self.line}"


@dataclass(frozen=True, slots=True)
class ExcludedIteration:
    """A measured iteration in which dynamo compiled again: left out of every median."""

    iteration: int  # 1-based, in the order the measured iterations ran
    reason: str  # the guard that failed, as dynamo says it


@dataclass(frozen=True, slots=True)
class CompiledLayer:
    """What compiling did to one layer: the modules its fused kernels also computed."""

    path: str
    fused: tuple[str, ...] = ()  # paths below `path` whose work ran in its kernels


@dataclass(frozen=True, slots=True)
class CompileSection:
    """What was compiled, what compiling cost, and how well hybridprof could see inside it."""

    backend: str
    mode: str | None = None
    where: tuple[CompiledWhere, ...] = ()
    options: tuple[str, ...] = ()  # "key=value" of the backend's options
    fullgraph: bool = False
    compiled_by: Literal["hybridprof", "user"] = "user"
    grad_mode: Literal["enabled", "disabled"] = "disabled"
    compile_s: float = 0.0  # forward frames, in warm-up (never a layer's time)
    backward_compile_s: float = 0.0
    frames: int = 0
    graphs: int = 0
    graph_breaks: tuple[GraphBreak, ...] = ()
    warmup_recompiles: tuple[str, ...] = ()
    excluded: tuple[ExcludedIteration, ...] = ()
    kernel_map: KernelMapState = "mapped"
    call_sites: int = 0
    matched_events: int = 0  # kernel and extern events put in layers, median iteration
    unmatched_events: int = 0  # left outside every layer
    eager_islands: int = 0  # modules measured eagerly inside compiled code
    cache_hits: int = 0  # graphs inductor's cache answered, their kernel maps read back
    cache_rebuilt: int = 0  # cached graphs without a kernel map: compiled again, map stored
    layers: tuple[CompiledLayer, ...] = ()
    notes: tuple[str, ...] = ()

    def fused_of(self, path: str) -> tuple[str, ...]:
        return next((layer.fused for layer in self.layers if layer.path == path), ())


__all__ = [
    "CompileSection",
    "CompiledLayer",
    "CompiledWhere",
    "ExcludedIteration",
    "GraphBreak",
    "KernelMapState",
]
