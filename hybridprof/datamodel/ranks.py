"""What a torch.distributed run adds: one rank's facts, communication rows, and a merged
session's per-rank summaries, layers across ranks and stragglers."""

from __future__ import annotations

from dataclasses import dataclass

from hybridprof.datamodel.measures import Stat

# More ranks than any torch.distributed run has had; a file claiming more is corrupt or hostile
# (a report would lay out a column per rank).
MAX_WORLD_SIZE = 1_000_000


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

    def __post_init__(self) -> None:
        if not 1 <= self.world_size <= MAX_WORLD_SIZE:
            raise ValueError(
                f"world size {self.world_size} is not 1 to {MAX_WORLD_SIZE:,} (torchrun's ranks)"
            )
        if not 0 <= self.rank < self.world_size:
            raise ValueError(f"rank {self.rank} is outside the world size {self.world_size}")


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
class UnitComm:
    """One FSDP2 unit's or tensor-parallel layer's communication of one kind, per iteration (a
    column of its row).

    path: the unit (a module `fully_shard` sharded; "" the root); kind: "all_gather" (forward,
    prefetches for the unit included), "regather" (backward's all-gather of parameters freed
    after the forward), "copy_out" (the gathered buffer into the unit's parameters) or
    "reduce_scatter" (its gradients). time_us: the wall time of FSDP2's ranges of that kind for
    the unit, on this rank's thread (waiting for other ranks included). nbytes: the bytes they
    moved per iteration, from the unit's FSDP parameter group (an all-gather's output, a
    reduce-scatter's input, padding included): calls times the bytes of one; 0 for a copy-out.

    A tensor-parallel layer's kinds: "tp_forward" and "tp_backward", the collectives its forward
    (DTensor's hooks included) and its backward nodes issued, and the waits for them wherever
    they ran. time_us: those ops' CPU time on this rank's thread (waiting included); nbytes: the
    bytes the collectives sent (their input's); group: the mesh dimension and process group.

    iteration_us: the time in each measured iteration (a rank's session: the merge compares the
    ranks iteration by iteration). exposed_us: FSDP2 kinds, the part of the time the rank's
    thread spent in the collectives' own calls and waits (not in the copies and buffer work
    around them, which are compute): time no compute overlapped. wait_us and waited_for: a
    merged session's, per rank (index = rank) the median over iterations of its time beyond
    the shortest rank's, and the rank whose time was the shortest most often (the late one:
    it arrived last and waited least).
    """

    path: str
    kind: str
    calls: float  # per iteration (median)
    time_us: Stat
    nbytes: int = 0
    group: str = ""  # tensor parallel: "mesh dim tp, group default_pg"
    iteration_us: tuple[float, ...] = ()
    exposed_us: Stat | None = None
    wait_us: tuple[float, ...] = ()
    waited_for: int | None = None


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

    def __post_init__(self) -> None:
        """A merged session holds every rank, once, in order: renderers lay out a column per
        rank and index the per-rank figures by rank."""
        held = [r.info.rank for r in self.ranks]
        if self.world_size != len(held) or held != list(range(len(held))):
            raise ValueError(
                f"world size {self.world_size} does not match the ranks held "
                f"({_ranks_text(held)}); a merged session holds ranks 0 to world size - 1"
            )
        for layer in self.layers:
            if len(layer.rank_us) != self.world_size or not 0 <= layer.slowest_rank < len(held):
                raise ValueError(
                    f"layer {layer.path[:60]!r} holds {len(layer.rank_us)} per-rank times (slowest "
                    f"rank {layer.slowest_rank}) for a world size of {self.world_size}"
                )
        for straggler in self.stragglers:
            if not 0 <= straggler.rank < len(held):
                raise ValueError(f"straggler rank {straggler.rank} is not one of the ranks held")


def _ranks_text(ranks: list[int]) -> str:
    shown = ", ".join(map(str, ranks[:5]))
    return (shown + ", ...") if len(ranks) > 5 else (shown or "none")
