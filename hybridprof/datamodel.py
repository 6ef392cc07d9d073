"""The data that flows between planner, runtime and reporters.

Every class is a frozen, slotted dataclass that round-trips through JSON (`to_json` / `from_json`).
Units are fixed so no reader has to guess: times in microseconds (float), memory in bytes (int).
Module paths are PyTorch's dotted form (`features.0`); the root module is `""`.
"""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from hybridprof.errors import SessionFileError
from hybridprof.jsonio import dataclass_from_plain, dump, expect, load, read_float
from hybridprof.views import HtmlView

# 2 added the optional `flops` object of a session (absent without --flops); 1 files still load.
# 3 added each record's per-iteration series (`ModuleRecord.per_iteration`), the session's
# `stability`, `requested_warmup`, `stop_reason`, `max_time_s` and "auto" iteration counts; 1 and 2
# files still load, with those absent (None or their defaults).
# 4 writes sessions compact: no whitespace, no field equal to its default (zeros, empty, None), a
# `Stat` as [median, min, max] and a record's ops as columns (`OpStat.json_columns`); a 10,000-layer
# session shrank from 25 MB to 6. The reader takes both forms, so 1-3 files still load.
SCHEMA_VERSION = 4
# The strategy a plan and a run use unless told otherwise (the registry in runtime/strategies/
# lists them all); defined here, the lowest layer, so planner, runtime and CLI share one name.
DEFAULT_STRATEGY = "session"
PLAN_KIND = "hybridprof-plan"
SESSION_KIND = "hybridprof-session"


# --------------------------------------------------------------------------- static facts (planner)


@dataclass(frozen=True, slots=True)
class SourceSpan:
    """A place in a source file (1-based line, 0-based column, as libcst's PositionProvider)."""

    file: str
    line: int
    column: int = 0
    end_line: int | None = None

    def short(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class ChildDef:
    """Where a child module is created in `__init__`.

    kind: "attr" (self.x = Mod()), "sequential", "modulelist", "moduledict" (an entry of such a
    container), "add_module", "loop" (created inside a for/while/comprehension), "setattr".
    """

    name: str
    kind: str
    span: SourceSpan
    class_name: str | None = (
        None  # resolved qualified name of the constructor, e.g. torch.nn.Linear
    )


@dataclass(frozen=True, slots=True)
class ChildCall:
    """A call of a child inside `forward`.

    via: "attr" (self.x(...)), "loop" (for m in self.layers: m(...)), "getattr" (getattr(self,
    "x")), "index" (self.layers[0](...)).
    """

    name: str
    line: int
    via: str = "attr"
    in_loop: bool = False
    in_branch: bool = False


@dataclass(frozen=True, slots=True)
class InlineOp:
    """A functional or tensor op called directly in `forward` (its time lands in the parent's self
    time).

    name is the resolved name where known (`torch.nn.functional.relu`, `torch.flatten`), an operator
    (`+`, `@`), or a tensor method (`.view`).
    """

    name: str
    line: int
    in_loop: bool = False


@dataclass(frozen=True, slots=True)
class ModuleClassInfo:
    """What libcst found in the source of one nn.Module subclass."""

    qualname: str  # module.Class, e.g. "torchvision.models.alexnet.AlexNet"
    span: SourceSpan | None
    forward_span: SourceSpan | None = None
    children: tuple[ChildDef, ...] = ()
    calls: tuple[ChildCall, ...] = ()
    inline_ops: tuple[InlineOp, ...] = ()
    builtin: bool = False  # a torch container understood without reading its source
    note: str = ""  # why the source could not be read, when it could not


class FindingKind(str, Enum):
    """What a planner finding is about. Declaration order is the order reports list them in;
    `heading` is the title a report groups them under. Saved as the value (`"never_called"`)."""

    NEVER_CALLED = "never_called"
    INLINE_OPS = "inline_ops"
    ALIAS = "alias"
    LOOP_CALL = "loop_call"
    BRANCH_CALL = "branch_call"
    NO_SOURCE = "no_source"
    STATIC_ONLY = "static_only"
    OPAQUE = "opaque"
    STRAGGLER = "straggler"  # a merged torchrun session: one rank slower on a layer

    def __str__(self) -> str:
        return str(self.value)

    @property
    def heading(self) -> str:
        return _FINDING_HEADINGS[self]


_FINDING_HEADINGS = {
    FindingKind.NEVER_CALLED: "Children never called",
    FindingKind.INLINE_OPS: "Parents whose own inline ops take time",
    FindingKind.ALIAS: "Aliases of shared modules",
    FindingKind.LOOP_CALL: "Children called in a loop",
    FindingKind.BRANCH_CALL: "Children called under a condition",
    FindingKind.NO_SOURCE: "Source not readable",
    FindingKind.STATIC_ONLY: "Static analysis only",
    FindingKind.OPAQUE: "Modules measured as one layer",
    FindingKind.STRAGGLER: "Stragglers (one rank slower on a layer)",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the planner wants the user to know."""

    kind: FindingKind
    path: str
    message: str
    span: SourceSpan | None = None


@dataclass(frozen=True, slots=True)
class ModuleTarget:
    """One module of the tree, selected for profiling or not, with the reason."""

    path: str
    class_name: str  # short class name, e.g. "Conv2d"
    qualname: str  # module.Class
    depth: int
    is_leaf: bool
    selected: bool
    reason: str  # why selected or not: "leaf", "matches features.*", "not a leaf", ...
    aliases: tuple[str, ...] = ()  # other paths reaching the same module object
    expected_calls: int | None = None  # per forward, from the source; None when unknown
    source: SourceSpan | None = None  # where the module is created in its parent's __init__
    param_count: int = 0
    # False for a container that is never called itself (ModuleList, ModuleDict): its time is
    # exactly its children's, so the complete selection leaves it out and reports sum its children.
    has_forward: bool = True


@dataclass(frozen=True, slots=True)
class CompatChoice:
    """One version-compatibility decision, probed once from the installed torch."""

    name: str  # e.g. "profiler_device_arg"
    value: str  # e.g. "use_device"
    reason: str  # e.g. "torch 2.13 accepts use_device; use_cuda is deprecated (removed in 2.14)"


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    """What will be profiled and how. Saved as JSON so a user can review and edit it."""

    root_class: str
    targets: tuple[ModuleTarget, ...]
    compat: tuple[CompatChoice, ...] = ()
    strategy: str = DEFAULT_STRATEGY
    classes: tuple[ModuleClassInfo, ...] = ()
    findings: tuple[Finding, ...] = ()
    selectors: tuple[str, ...] = ()  # the --paths / --depth the user gave, for the record
    model_file: str | None = None
    entry: str | None = None
    torch_version: str = ""
    static_only: bool = False
    created_at: str = ""
    schema_version: int = SCHEMA_VERSION

    def selected_paths(self) -> tuple[str, ...]:
        return tuple(t.path for t in self.targets if t.selected)

    def target(self, path: str) -> ModuleTarget | None:
        return next((t for t in self.targets if t.path == path), None)

    def compat_value(self, name: str, default: str = "") -> str:
        return next((c.value for c in self.compat if c.name == name), default)

    def to_json(self) -> str:
        return dump(PLAN_KIND, self)

    @classmethod
    def from_json(cls, text: str) -> ProfilePlan:
        return load(PLAN_KIND, cls, text, SCHEMA_VERSION)


# --------------------------------------------------------------------------- measurements (runtime)


@dataclass(frozen=True, slots=True)
class Stat:
    """A per-iteration quantity summarised over the measured iterations."""

    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: typing.Sequence[float]) -> Stat:
        if not values:
            return cls(0.0, 0.0, 0.0)
        ordered = sorted(values)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        return cls(float(median), float(ordered[0]), float(ordered[-1]))

    # the JSON round trip (jsonio): [median, min, max]; files before schema 4 hold a dict
    def json_encode(self) -> list[float]:
        return [self.median, self.min, self.max]

    @classmethod
    def json_decode(cls, data: Any) -> Stat:
        if type(data) is dict:
            return dataclass_from_plain(cls, data)
        if type(data) is not list or len(data) != 3:
            raise ValueError(f"expected a Stat [median, min, max], got {str(data)[:40]}")
        median, low, high = map(read_float, data)
        return cls(median, low, high)


@dataclass(frozen=True, slots=True)
class OpStat:
    """One operator (e.g. aten::addmm) inside one layer, per iteration (medians over iterations)."""

    name: str
    calls: int
    self_cpu_us: float
    total_cpu_us: float
    self_device_us: float = 0.0
    total_device_us: float = 0.0
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_device_mem: int = 0
    device_mem: int = 0
    backward: bool = False  # the op ran in the backward pass of this layer

    json_columns = True  # a record's ops are saved as one list per field (jsonio)


SERIES_DECIMALS = 1  # per-iteration values are kept to 0.1 us
_SERIES_ITEM = re.compile(r"-?[0-9]+(\.[0-9]+)?")
# A whole series of such numbers, read in one match (10,000-layer sessions hold 20,000 series).
_SERIES_TEXT = re.compile(r"\s*(?:-?[0-9]+(?:\.[0-9]+)?(?:\s+|\Z))*")
SERIES_MAX = 1e18  # microseconds; beyond it a file is corrupt (a float of 400 digits is infinite)


@dataclass(frozen=True, slots=True)
class Series:
    """One quantity's value in each measured iteration, in order, in microseconds (0.1 us kept).

    Saved as one string of space-separated numbers ("84.2 85 83.9"): a JSON list would take a line
    per number, and a 10,000-layer session keeps 20,000 or more of these.
    """

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: typing.Iterable[float]) -> Series:
        return cls(tuple(round(float(v), SERIES_DECIMALS) for v in values))

    def encode(self) -> str:
        return " ".join(_short_number(v) for v in self.values)

    @classmethod
    def decode(cls, text: Any) -> Series:
        items = expect(str, text, "a per-iteration series").split()
        if not _SERIES_TEXT.fullmatch(text):
            bad = next((item for item in items if not _SERIES_ITEM.fullmatch(item)), items[0])
            raise ValueError(f"per-iteration series holds {bad[:20]!r}, not a number")
        values = tuple(map(float, items))
        if values and not max(map(abs, values)) <= SERIES_MAX:
            raise ValueError(f"per-iteration series holds a number over {SERIES_MAX:g}")
        return cls(values)

    # the JSON round trip (jsonio): a string, not a dict
    def json_encode(self) -> str:
        return self.encode()

    @classmethod
    def json_decode(cls, data: Any) -> Series:
        return cls.decode(data)


def _short_number(value: float) -> str:
    text = f"{value:.{SERIES_DECIMALS}f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


@dataclass(frozen=True, slots=True)
class IterationSeries:
    """A record's per-iteration values (iteration i of every record is the same measured iteration).

    They give each layer's median a confidence interval (`hybridprof.stats`) and let two runs be
    compared iteration by iteration. A total is None when it equals its self time in every
    iteration (a layer with no profiled layer inside), so leaves store one series, not two; an
    unmeasured quantity (device or backward time) is None too. None series are left out of the file.
    """

    self_cpu_us: Series
    total_cpu_us: Series | None = None
    self_device_us: Series | None = None
    total_device_us: Series | None = None
    backward_self_cpu_us: Series | None = None
    backward_total_cpu_us: Series | None = None

    def total_cpu(self) -> Series:
        return self.total_cpu_us or self.self_cpu_us

    def total_device(self) -> Series | None:
        return self.total_device_us or self.self_device_us

    def backward_total_cpu(self) -> Series | None:
        return self.backward_total_cpu_us or self.backward_self_cpu_us

    def present(self) -> dict[str, Series]:
        return {name: s for name in self.__slots__ if (s := getattr(self, name)) is not None}

    def lengths(self) -> set[int]:
        return {len(s.values) for s in self.present().values()}

    def json_encode(self) -> dict[str, str]:
        return {name: s.encode() for name, s in self.present().items()}


@dataclass(frozen=True, slots=True)
class ModuleRecord:
    """Everything measured for one profiled path.

    Times and memory are per iteration (the sum over that iteration's calls), summarised over
    iterations with `Stat`. `calls` is the total over all measured iterations.
    """

    path: str
    class_name: str
    calls: int
    self_cpu_us: Stat
    total_cpu_us: Stat
    self_device_us: Stat | None = None
    total_device_us: Stat | None = None
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_device_mem: int = 0
    device_mem: int = 0
    backward_self_cpu_us: Stat | None = None
    backward_total_cpu_us: Stat | None = None
    backward_self_device_us: Stat | None = None
    param_count: int = 0
    input_shapes: tuple[str, ...] = ()  # of the first call, e.g. ("1x3x224x224",)
    output_shapes: tuple[str, ...] = ()
    ops: tuple[OpStat, ...] = ()
    aliases: tuple[str, ...] = ()
    is_leaf: bool = True
    per_iteration: IterationSeries | None = None  # None with one iteration, or in schema < 3 files

    def calls_per_iteration(self, iterations: int) -> float:
        """Calls in one iteration (times and OpStat calls are per iteration too)."""
        return self.calls / max(iterations, 1)


@dataclass(frozen=True, slots=True)
class Environment:
    hybridprof_version: str
    torch_version: str
    python_version: str
    os: str
    cpu: str
    threads: int
    device: str  # "cpu" or e.g. "cuda:0 (NVIDIA H200)"


@dataclass(frozen=True, slots=True)
class RankInfo:
    """Where one rank of a torch.distributed run ran (from torchrun's environment)."""

    rank: int
    world_size: int
    local_rank: int
    host: str
    backend: str  # the process group's backend: "gloo", "nccl"
    device: str  # "cpu" or "cuda:N"
    ddp: bool = False  # the model ran inside DistributedDataParallel


@dataclass(frozen=True, slots=True)
class RankRun:
    """What one rank's session adds: where it ran, and its steps' wall and communication times."""

    info: RankInfo
    step_us: tuple[float, ...] = ()  # wall time of each measured step (forward [+ backward])
    # per measured step, the time with a DDP bucket all-reduce in flight
    comm_us: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class CollectiveStat:
    """One communication row: a DDP gradient bucket's all-reduce, or a collective the model calls.

    kind: "ddp_bucket" (timed by a DDP comm hook from the bucket being ready to its reduced result
    arriving, so it includes waiting for slower ranks) or "model" (a `c10d::` op the profiler saw
    inside a layer, its CPU time). Times are per iteration.
    """

    name: str
    kind: str
    calls: float  # per iteration
    time_us: Stat
    iteration_us: tuple[float, ...] = ()  # per measured iteration (the merge splits waiting off)
    nbytes: int = 0  # per call; 0 when unknown
    layer: str | None = None  # the layer whose forward called it (model collectives)
    carries: tuple[str, ...] = ()  # layers whose gradients the bucket carried
    waiting_us: Stat | None = None  # merged sessions: the part spent waiting for other ranks


@dataclass(frozen=True, slots=True)
class RankLayer:
    """One layer across the ranks of a merged session."""

    path: str
    rank_us: tuple[float, ...]  # per rank (index = rank): median time per iteration, fwd + bwd
    slowest_rank: int
    spread_us: float  # slowest minus fastest rank


@dataclass(frozen=True, slots=True)
class RankSummary:
    """One rank of a merged session: its step time and how much of it was communication."""

    info: RankInfo
    step_us: Stat  # the training step (or forward) per iteration
    comm_us: Stat  # per iteration, time with a DDP bucket all-reduce in flight
    waiting_us: float  # median per iteration: of comm_us, the part spent waiting for other ranks
    comm_share: float  # comm_us.median / step_us.median (0..1)
    iterations: int = 0
    interrupted: bool = False


@dataclass(frozen=True, slots=True)
class Straggler:
    """A rank consistently slower than the others on one layer, beyond its own iteration noise."""

    path: str
    rank: int
    rank_us: float  # that rank's median per iteration
    others_us: float  # the median over the other ranks
    noise_us: float  # that rank's own spread over iterations (max - min)


@dataclass(frozen=True, slots=True)
class MergedRanks:
    """What a merged session adds: each rank, each layer across ranks, stragglers."""

    world_size: int
    ranks: tuple[RankSummary, ...]
    layers: tuple[RankLayer, ...]
    stragglers: tuple[Straggler, ...] = ()


@dataclass(frozen=True, slots=True)
class OpCount:
    """An op name and how often it ran in one pass (forward, or forward and backward)."""

    name: str
    calls: int


@dataclass(frozen=True, slots=True)
class LayerWork:
    """FLOPs and bytes moved by one module path in one step, counted in the extra (unmeasured) pass.

    `flops`/`bytes` are self (ops in this layer not inside a profiled layer below it, like self
    time); `total_*` its whole subtree. A module that is not profiled gets a row only for work done
    outside every profiled layer (e.g. a parent's inline attention), so the self figures of all
    rows add up to the model's. `not_counted` names ops with no FLOP formula (their FLOPs, if any,
    are not in `flops`), both passes together.
    """

    path: str
    flops: int = 0
    bytes: int = 0
    total_flops: int = 0
    total_bytes: int = 0
    backward_flops: int = 0
    backward_bytes: int = 0
    backward_total_flops: int = 0
    backward_total_bytes: int = 0
    not_counted: tuple[OpCount, ...] = ()


@dataclass(frozen=True, slots=True)
class MachinePeak:
    """The machine's peak FLOP/s and bytes/s on the run's device, threads and dtype."""

    gflops: float
    gbps: float
    source: str  # "measured", "cached (measured <date>)", "given", or a mix per figure
    how: str  # what was measured, e.g. "1024x1024 float32 matmul, 64 MiB copy, cpu, 1 thread"


@dataclass(frozen=True, slots=True)
class WorkProfile:
    """`run --flops`: per-layer FLOPs and bytes, the whole step's totals, and the machine's peak."""

    layers: tuple[LayerWork, ...]
    peak: MachinePeak
    forward_flops: int  # the whole forward, inside the model or not (FlopCounterMode's total)
    forward_bytes: int
    backward_flops: int = 0
    backward_bytes: int = 0
    method: str = ""  # how ops were attributed to layers, said in the reports
    pass_s: float = 0.0  # wall time of the counting pass

    def layer(self, path: str) -> LayerWork | None:
        return next((w for w in self.layers if w.path == path), None)


Verdict = Literal["stable", "noisy"]
# Why the measured iterations stopped: the count asked for was reached ("count"), `--iters auto`'s
# interval got narrow enough ("converged"), the time limit ran out ("max_time"), auto's iteration
# cap was reached ("max_iterations"), or Ctrl-C ("interrupted").
StopReason = Literal["count", "converged", "max_time", "max_iterations", "interrupted"]


@dataclass(frozen=True, slots=True)
class Stability:
    """Can the run's numbers be trusted? Judged from the iterations' spread and the machine's load.

    iteration_cv: coefficient of variation of the whole-iteration times; load: the 1-minute load
    average divided by the cores; threads: torch's intra-op threads during the run; advice: what to
    change when the verdict is "noisy" (empty when "stable").
    """

    verdict: Verdict
    iteration_cv: float
    load: float
    threads: int
    advice: str


@dataclass(frozen=True, slots=True)
class ProfileSession(HtmlView):
    """One profiling run: the plan, the environment and the per-path records. Reporters see only
    this. In a notebook it shows as the report's interactive tree table (`hybridprof.views`)."""

    plan: ProfilePlan
    environment: Environment
    records: tuple[ModuleRecord, ...]
    strategy: str
    warmup: int = 0
    iterations: int = 1  # measured iterations actually done
    requested_iterations: int | Literal["auto"] = 1
    interrupted: bool = False
    profile_memory: bool = False
    use_device: bool = False  # device (CUDA) timing was measured
    backward: bool = False
    iteration_cpu_us: tuple[float, ...] = ()  # whole profiled time of each measured iteration
    # Per iteration, the profiled time in no profiled module (loss, backward glue, the user's code
    # around the model, or with a narrowed selection the unselected parents' own time): the
    # "(outside modules)" row. None when the session has no per-iteration totals.
    outside_cpu_us: Stat | None = None
    never_called: tuple[str, ...] = ()  # selected paths that were not called at all
    warnings: tuple[str, ...] = ()
    command: tuple[str, ...] = ()
    model_file: str | None = None
    model_hash: str | None = None  # sha256 of the model file
    started_at: str = ""
    duration_s: float = 0.0
    trace_file: str | None = None
    flops: WorkProfile | None = None  # only with --flops; the key is left out of the file otherwise
    stability: Stability | None = None  # None only in files older than schema 3
    requested_warmup: int | Literal["auto"] | None = None  # None: as `warmup` (older files)
    stop_reason: StopReason = "count"
    max_time_s: float | None = None  # the time limit the iterations ran under, if any
    rank: RankRun | None = None  # one rank of a torch.distributed run
    collectives: tuple[CollectiveStat, ...] = ()
    ranks: MergedRanks | None = None  # a merged session: records are medians across ranks
    schema_version: int = SCHEMA_VERSION

    def calls_title(self) -> str:
        """torchprof's column title for one with-block; per iteration once there are several."""
        return "Number of Calls" if self.iterations <= 1 else "Calls per iteration"

    def record(self, path: str) -> ModuleRecord | None:
        return next((r for r in self.records if r.path == path), None)

    def to_dataframe(self) -> Any:
        """One row per profiled path (a pandas DataFrame), as the reports' table shows it."""
        from hybridprof.frames import session_frame  # same layer; pandas only when asked for

        return session_frame(self)

    def to_json(self) -> str:
        return dump(SESSION_KIND, self, omit_none=("flops", "rank", "ranks"), compact=True)

    @classmethod
    def from_json(cls, text: str) -> ProfileSession:
        session = load(SESSION_KIND, cls, text, SCHEMA_VERSION)
        short = [r.path for r in session.records if not _series_fit(r, session.iterations)]
        if short:
            raise SessionFileError(
                f"corrupt {SESSION_KIND} file: the per-iteration series of {short[0]!r} do not "
                f"hold {session.iterations} values (its iterations); write it again with hybridprof"
            )
        return session


def _series_fit(record: ModuleRecord, iterations: int) -> bool:
    series = record.per_iteration
    return series is None or series.lengths() == {iterations}


__all__ = [
    "DEFAULT_STRATEGY",
    "SCHEMA_VERSION",
    "ChildCall",
    "ChildDef",
    "CollectiveStat",
    "CompatChoice",
    "Environment",
    "Finding",
    "FindingKind",
    "InlineOp",
    "IterationSeries",
    "LayerWork",
    "MachinePeak",
    "MergedRanks",
    "ModuleClassInfo",
    "ModuleRecord",
    "ModuleTarget",
    "OpCount",
    "OpStat",
    "ProfilePlan",
    "ProfileSession",
    "RankInfo",
    "RankLayer",
    "RankRun",
    "RankSummary",
    "Series",
    "SourceSpan",
    "Stability",
    "Stat",
    "StopReason",
    "Straggler",
    "Verdict",
    "WorkProfile",
]
