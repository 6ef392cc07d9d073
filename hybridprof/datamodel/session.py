"""One profiling run: the plan, the environment, the records, the stability verdict: the
`ProfileSession` every renderer reads (saved as JSON, compact)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from hybridprof.datamodel.compiled import CompileSection
from hybridprof.datamodel.jsonbounds import MAX_PATH_PARTS
from hybridprof.datamodel.jsonio import dump, load
from hybridprof.datamodel.measures import ModuleRecord, OpStat, Stat
from hybridprof.datamodel.memory import MemoryProfile
from hybridprof.datamodel.plan import ProfilePlan
from hybridprof.datamodel.ranks import CollectiveStat, MergedRanks, RankRun, UnitComm
from hybridprof.datamodel.schema import SCHEMA_VERSION, SESSION_KIND
from hybridprof.datamodel.session_checks import impossible_value
from hybridprof.datamodel.training import OptimizerRecord, ScheduleInfo
from hybridprof.datamodel.views import Views
from hybridprof.datamodel.work import WorkProfile
from hybridprof.errors import SessionFileError


@dataclass(frozen=True, slots=True)
class Environment:
    hybridprof_version: str
    torch_version: str
    python_version: str
    os: str
    cpu: str
    threads: int
    device: str  # "cpu" or e.g. "cuda:0 (NVIDIA H200)"


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
    change when the verdict is "noisy" (empty when "stable"); threads_exceed_free_cores: see
    below (False in files before schema 6).
    """

    verdict: Verdict
    iteration_cv: float
    load: float
    threads: int
    advice: str
    # torch ran more threads than the cores other work left free: they waited for each other, and
    # every time figure of the run is inflated by those waits (the tables mark them so).
    threads_exceed_free_cores: bool = False


@dataclass(frozen=True, slots=True)
class CpuWaits:
    """Time the measured iterations waited for a CPU while runnable: the scheduler ran other
    processes meanwhile (since schema 6; None where the OS does not say, and in older files).

    source: where the waits were read ("schedstat": Linux's per-thread run-queue wait);
    threshold_pct: an iteration that waited more than this % of its step time was excluded and
    measured again; excluded: how many were; excluded_wait_us: what they lost in all; kept_wait_us:
    each kept iteration's wait, in order; kept_over: kept iterations over the threshold all the
    same (the run's limit of extra iterations was reached).
    """

    source: str
    threshold_pct: float
    excluded: int = 0
    excluded_wait_us: float = 0.0
    kept_wait_us: tuple[float, ...] = ()
    kept_over: int = 0


CalibrationSource = Literal["measured", "cached"]


@dataclass(frozen=True, slots=True)
class Calibration:
    """The profiler's cost per recorded event and per layer call, in us on the profiled thread.

    event_us: what one recorded op event adds (a nested op is an event of its own);
    range_inner_us: what one layer call's range adds inside the layer's own range (its self time);
    range_outer_us: what it adds around the range, in the caller's self time (the wrapper that
    opens and closes it); source: "measured" in this run or "cached" from an earlier one;
    measured_at: when (UTC, ISO 8601); load: the 1-minute load average then (None where unknown);
    bare_step_us: the run's own step timed bare (no patches, no profiler: the median of a few
    steps after the measured iterations), where hybridprof drove the run; stated beside the
    compensated headline, not used to scale the costs (too noisy at a few steps); None where no
    bare step was timed (a `with Profile` block, a paired, compiled, memory or device run).
    call_us (since schema 13): what calling a module costs bare, in its caller's frame
    (`nn.Module.__call__`'s dispatch before `forward` runs, so before the layer's range opens):
    the table moves it from the caller's self time into the layer's, as the layer's own cost to
    the model; 0 in older files (nothing moved).
    """

    event_us: float
    range_inner_us: float
    range_outer_us: float
    source: CalibrationSource
    measured_at: str
    load: float | None = None
    bare_step_us: float | None = None
    call_us: float = 0.0

    @property
    def range_us(self) -> float:
        """A layer call's whole range cost, inside and around it."""
        return self.range_inner_us + self.range_outer_us


@dataclass(frozen=True, slots=True)
class ProfileSession(Views):
    """One profiling run: the plan, the environment and the per-path records. Reporters see only
    this. In a notebook it shows as the report's interactive tree table, and `to_dataframe()` gives
    the layer table as a pandas DataFrame (both plugged in by reporting: `datamodel.views`)."""

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
    # The ops that time is made of, per iteration (medians, heaviest first) as a layer's ops are,
    # backward ones apart (the loss's backward node, AccumulateGrad of weights used outside any
    # layer); since schema 8, empty in older files and where the strategy measured no ops.
    outside_ops: tuple[OpStat, ...] = ()
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
    fsdp: tuple[UnitComm, ...] = ()  # FSDP2 units' communication (a sharded model)
    tp: tuple[UnitComm, ...] = ()  # tensor-parallel layers' communication (DTensor)
    ranks: MergedRanks | None = None  # a merged session: records are medians across ranks
    # A profiled training loop (`with Profile(...)` around it; since schema 5): the optimizer's
    # row, the `prof.step()` calls seen and the schedule the steps ran under.
    optimizer: OptimizerRecord | None = None
    steps: int = 0
    schedule: ScheduleInfo | None = None
    memory: MemoryProfile | None = None  # --profile-memory: per-layer memory and the step's peak
    compiled: CompileSection | None = None  # a torch.compile'd model (None: eager, older files)
    cpu_waits: CpuWaits | None = None  # the iterations' waits for a CPU (since schema 6)
    # The profiler's calibrated cost per event and per layer call (since schema 12): the layer
    # table takes it out of each row. None in older files and for strategies not calibrated: the
    # rows are then the raw figures, and the views say so.
    calibration: Calibration | None = None
    schema_version: int = SCHEMA_VERSION

    def __repr__(self) -> str:
        """One line: which model, how much was measured, how long a step took (the whole data
        class would print tens of kilobytes)."""
        kind = "training step" if self.backward else "forward"
        steps = f"{self.iterations} measured {kind}{'s' if self.iterations != 1 else ''}"
        times = sorted(self.iteration_cpu_us)
        median = f", median {_time(times[len(times) // 2])} each" if times else ""
        model = self.plan.root_class + (f" ({self.model_file})" if self.model_file else "")
        return (
            f"<ProfileSession of {model}: {len(self.records)} layers, {steps}{median}, "
            f"strategy {self.strategy}>"
        )

    def __str__(self) -> str:
        """The tree table (as `hybridprof report` prints it), once reporting is imported."""
        return self._text_view() or repr(self)

    def calls_title(self) -> str:
        """torchprof's column title for one with-block; per iteration once there are several."""
        return "Number of Calls" if self.iterations <= 1 else "Calls per iteration"

    def record(self, path: str) -> ModuleRecord | None:
        return next((r for r in self.records if r.path == path), None)

    def to_json(self) -> str:
        omit = (
            "flops",
            "rank",
            "ranks",
            "optimizer",
            "schedule",
            "memory",
            "compiled",
            "calibration",
        )
        return dump(SESSION_KIND, self, omit_none=omit, compact=True)

    @classmethod
    def from_json(cls, text: str, ops: bool = True) -> ProfileSession:
        """The session in `text`, checked. With `ops=False` the layers' and the outside row's op
        lists are not read (left empty): for a reader that uses only the layers' figures (the
        history), as the op lists are most of a big session's reading time. Such a session
        must not be saved again."""
        session = load(SESSION_KIND, cls, text, SCHEMA_VERSION, None if ops else _without_ops)
        short = [r.path for r in session.records if not _series_fit(r, session.iterations)]
        optimizer = session.optimizer
        if optimizer is not None and not optimizer.series_lengths() <= {session.iterations}:
            short.append("(optimizer)")
        if short:
            raise SessionFileError(
                f"corrupt {SESSION_KIND} file: the per-iteration series of {short[0][:60]!r} do "
                f"not hold {session.iterations} values (its iterations); write it again with "
                "hybridprof"
            )
        deep = next((r for r in session.records if r.path.count(".") >= MAX_PATH_PARTS), None)
        if deep is not None:
            raise SessionFileError(
                f"corrupt {SESSION_KIND} file: the path of records[{session.records.index(deep)}] "
                f"is {deep.path.count('.') + 1:,} modules deep (hybridprof writes none over "
                f"{MAX_PATH_PARTS:,}); write it again with hybridprof"
            )
        problem = impossible_value(session)
        if problem is not None:
            raise SessionFileError(
                f"corrupt {SESSION_KIND} file: {problem[:200]}; write it again with hybridprof"
            )
        return session


def _without_ops(data: dict[str, Any]) -> None:
    """The file's data without its op lists (see `from_json`)."""
    data.pop("outside_ops", None)
    records = data.get("records")
    if type(records) is list:
        for record in records:
            if type(record) is dict:
                record.pop("ops", None)


def _time(us: float) -> str:
    return f"{us:.1f} us" if us < 1000 else f"{us / 1000:.2f} ms"


def _series_fit(record: ModuleRecord, iterations: int) -> bool:
    series = record.per_iteration
    return series is None or series.lengths() == {iterations}
