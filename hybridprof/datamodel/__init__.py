"""The data that flows between planner, runtime and reporters.

Every class is a frozen, slotted dataclass that round-trips through JSON (`to_json` / `from_json`).
Units are fixed so no reader has to guess: times in microseconds (float), memory in bytes (int).
Module paths are PyTorch's dotted form (`features.0`); the root module is `""`.
"""

from __future__ import annotations

from hybridprof.datamodel.compiled import (
    CompiledLayer,
    CompiledWhere,
    CompileSection,
    ExcludedIteration,
    GraphBreak,
)
from hybridprof.datamodel.measures import (
    IterationSeries,
    ModuleRecord,
    OpStat,
    Series,
    Stat,
)
from hybridprof.datamodel.memory import (
    DeviceMemory,
    LayerMemory,
    MemoryBytes,
    MemoryProfile,
    MemoryTimeline,
    PeakShare,
    RankPeak,
    StepPeak,
    TimelineLane,
)
from hybridprof.datamodel.plan import (
    ChildCall,
    ChildDef,
    CompatChoice,
    Finding,
    FindingKind,
    InlineOp,
    ModuleClassInfo,
    ModuleTarget,
    ProfilePlan,
    SourceSpan,
)
from hybridprof.datamodel.ranks import (
    CollectiveStat,
    MergedRanks,
    RankInfo,
    RankLayer,
    RankRun,
    RankSummary,
    Straggler,
    UnitComm,
)
from hybridprof.datamodel.schema import DEFAULT_STRATEGY, SCHEMA_VERSION
from hybridprof.datamodel.session import (
    Calibration,
    CalibrationSource,
    CpuWaits,
    Environment,
    ProfileSession,
    Stability,
    StopReason,
    Verdict,
)
from hybridprof.datamodel.training import (
    OPTIMIZER_PARTS,
    OptimizerPart,
    OptimizerRecord,
    ScheduleInfo,
)
from hybridprof.datamodel.work import LayerWork, MachinePeak, OpCount, WorkProfile

__all__ = [
    "DEFAULT_STRATEGY",
    "OPTIMIZER_PARTS",
    "SCHEMA_VERSION",
    "Calibration",
    "CalibrationSource",
    "ChildCall",
    "ChildDef",
    "CollectiveStat",
    "CompatChoice",
    "CompileSection",
    "CompiledLayer",
    "CompiledWhere",
    "CpuWaits",
    "DeviceMemory",
    "Environment",
    "ExcludedIteration",
    "Finding",
    "FindingKind",
    "GraphBreak",
    "InlineOp",
    "IterationSeries",
    "LayerMemory",
    "LayerWork",
    "MachinePeak",
    "MemoryBytes",
    "MemoryProfile",
    "MemoryTimeline",
    "MergedRanks",
    "ModuleClassInfo",
    "ModuleRecord",
    "ModuleTarget",
    "OpCount",
    "OpStat",
    "OptimizerPart",
    "OptimizerRecord",
    "PeakShare",
    "ProfilePlan",
    "ProfileSession",
    "RankInfo",
    "RankLayer",
    "RankPeak",
    "RankRun",
    "RankSummary",
    "ScheduleInfo",
    "Series",
    "SourceSpan",
    "Stability",
    "Stat",
    "StepPeak",
    "StopReason",
    "Straggler",
    "TimelineLane",
    "UnitComm",
    "Verdict",
    "WorkProfile",
]
