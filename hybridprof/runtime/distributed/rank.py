"""Profiling one rank of a data-parallel run launched by torchrun, on torch.distributed itself.

Each rank joins the process group torchrun describes (or keeps the one the user's entry made),
runs on its device (`cuda:LOCAL_RANK` or cpu), optionally inside DistributedDataParallel, and is
profiled like a single process; this module adds what only a rank has:

- `CommClock`: a DDP communication hook that wraps torch's own `allreduce_hook` and times each
  gradient bucket from "ready" to "reduced" (bytes, and the layers whose gradients it carried,
  from `GradBucket.parameters()`), plus the wall time of every step;
- `model_collectives`: the `c10d::` collectives the model's own forward calls, read from the ops
  the profiler attributed to each layer;
- `block_rank`: a with-block's rank facts, when it ran in an initialised process group;
- `gather_to_rank0`: every rank's session (as JSON) sent to rank 0 through a gloo group of our own
  with a timeout, so no shared file system is needed and nothing waits forever;
- the step times and progress that `failures.FailureBoard` watches: a rank that fails, hangs past
  `--step-timeout` or is stopped tells the others through torchrun's store (see failures.py).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from hybridprof.datamodel import (
    CollectiveStat,
    ProfileSession,
    RankInfo,
    RankRun,
    Stat,
    UnitComm,
)
from hybridprof.errors import DistributedError, UsageError
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.basics.workload import forward_once, training_step
from hybridprof.runtime.distributed.ddp_hook import timed_allreduce
from hybridprof.runtime.distributed.failures import StepWatch


@dataclass(frozen=True, slots=True)
class Launch:
    """What torchrun tells a worker through its environment."""

    rank: int
    world_size: int
    local_rank: int


def rank_device(launch: Launch, requested: str | None) -> torch.device:
    """cuda:LOCAL_RANK when CUDA is there (or asked for), else cpu; made the current CUDA device."""
    wants_cuda = requested is not None and requested.startswith("cuda")
    if requested == "cpu" or not (wants_cuda or torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise UsageError("--device cuda was given but torch sees no CUDA device; use --device cpu")
    if launch.local_rank >= torch.cuda.device_count():
        raise UsageError(
            f"local rank {launch.local_rank} has no GPU (this host has "
            f"{torch.cuda.device_count()}); start fewer processes per node"
        )
    device = torch.device("cuda", launch.local_rank)
    torch.cuda.set_device(device)
    return device


@dataclass
class Group:
    """The process group this rank is in, and our own gloo group for the final gather."""

    launch: Launch
    backend: str
    made_here: bool  # we initialised it (and so destroy it at the end)
    gather_group: Any

    def close(self) -> None:
        dist.destroy_process_group(self.gather_group)
        if self.made_here:
            dist.destroy_process_group()


def join_group(launch: Launch, device: torch.device, gather_timeout_s: float) -> Group:
    """Join torchrun's process group (nccl on CUDA, gloo on cpu) unless the entry already did."""
    if not dist.is_available():
        raise UsageError("this torch build has no torch.distributed; install one that has it")
    made_here = not dist.is_initialized()
    if made_here:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo")
    if dist.get_world_size() != launch.world_size or dist.get_rank() != launch.rank:
        raise UsageError(
            f"the process group the entry made (rank {dist.get_rank()} of "
            f"{dist.get_world_size()}) is not torchrun's (rank {launch.rank} of "
            f"{launch.world_size}); let hybridprof join it, or init it from the environment"
        )
    gather = dist.new_group(backend="gloo", timeout=timedelta(seconds=gather_timeout_s))
    return Group(launch, str(dist.get_backend()), made_here, gather)


def rank_info(group: Group, device: torch.device, ddp: bool) -> RankInfo:
    return RankInfo(
        rank=group.launch.rank,
        world_size=group.launch.world_size,
        local_rank=group.launch.local_rank,
        host=socket.gethostname(),
        backend=group.backend,
        device=str(device),
        ddp=ddp,
    )


@dataclass
class CommClock:
    """Times every step, and every DDP gradient bucket's all-reduce within it.

    It is the state of the comm hook `ddp_hook.timed_allreduce` (torch's default `allreduce_hook`,
    timed); a bucket's completion is noted on the backend's thread, hence the lock.
    """

    layer_of: dict[int, str]  # id(parameter) -> the layer path that owns it
    step: int = -1
    running: tuple[int, float] | None = None  # (step, monotonic start) while a step runs
    progress: int = 0  # steps begun plus buckets sent: what a hung rank stops adding to
    step_times: dict[int, tuple[int, int]] = field(default_factory=dict)
    buckets: dict[int, list[tuple[int, int, int, int]]] = field(default_factory=dict)
    carries: dict[int, tuple[str, ...]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def started(self, bucket: Any) -> Callable[[], None]:  # a dist.GradBucket
        """Note a bucket ready to reduce (`ddp_hook.timed_allreduce` calls this); return what to
        call once its reduced gradients are back."""
        start, step, index = time.perf_counter_ns(), self.step, bucket.index()
        self.progress += 1
        buffer = bucket.buffer()
        nbytes = buffer.numel() * buffer.element_size()
        self.carries[index] = self._layers(bucket.parameters())

        def finished() -> None:
            with self.lock:
                entry = (index, nbytes, start, time.perf_counter_ns())
                self.buckets.setdefault(step, []).append(entry)

        return finished

    def _layers(self, parameters: list[torch.Tensor]) -> tuple[str, ...]:
        paths = (self.layer_of.get(id(p)) for p in parameters)
        return tuple(dict.fromkeys(p for p in paths if p is not None))

    def step_fn(
        self, through: nn.Module, backward: bool
    ) -> Callable[[nn.Module, ModelInputs], Any]:
        """The runner's step: forward (and backward) through `through` (the DDP wrapper), timed."""
        base = training_step if backward else forward_once

        def step(model: nn.Module, inputs: ModelInputs) -> Any:
            self.step += 1
            self.progress += 1
            self.running = (self.step, time.monotonic())
            begin = time.perf_counter_ns()
            try:
                result = base(through, inputs)
            finally:
                self.running = None
            self.step_times[self.step] = (begin, time.perf_counter_ns())
            return result

        return step

    def step_watch(self, timeout_s: float) -> StepWatch:
        """What the failure board's watcher checks: the step running, the progress so far."""
        return StepWatch(lambda: self.running, lambda: self.progress, timeout_s)

    def rank_run(self, info: RankInfo, warmup: int, iterations: int) -> RankRun:
        measured = range(warmup, warmup + iterations)
        steps = [self.step_times[s] for s in measured if s in self.step_times]
        return RankRun(
            info=info,
            step_us=tuple((end - begin) / 1000 for begin, end in steps),
            comm_us=tuple(_union_us(self.buckets.get(s, [])) for s in measured),
        )

    def bucket_rows(self, warmup: int, iterations: int) -> tuple[CollectiveStat, ...]:
        measured = range(warmup, warmup + iterations)
        indices = sorted({b[0] for s in measured for b in self.buckets.get(s, [])})
        return tuple(self._bucket_row(i, measured) for i in indices)

    def _bucket_row(self, index: int, measured: range) -> CollectiveStat:
        per_step = [[b for b in self.buckets.get(s, []) if b[0] == index] for s in measured]
        times = tuple(sum(end - begin for _, _, begin, end in got) / 1000 for got in per_step)
        calls = sum(len(got) for got in per_step) / max(len(per_step), 1)
        nbytes = next((b[1] for got in per_step for b in got), 0)
        return CollectiveStat(
            name=f"all_reduce bucket {index}",
            kind="ddp_bucket",
            calls=calls,
            time_us=Stat.of(times),
            iteration_us=times,
            nbytes=nbytes,
            carries=self.carries.get(index, ()),
        )


def _union_us(buckets: list[tuple[int, int, int, int]]) -> float:
    """Time with at least one bucket in flight (buckets overlap each other and the backward)."""
    total, reach = 0, None
    for _, _, begin, end in sorted(buckets, key=lambda b: b[2]):
        if reach is None or begin > reach:
            total += end - begin
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total / 1000


def block_rank(model: nn.Module, use_cuda: bool, session: ProfileSession) -> RankRun | None:
    """A with-block's rank facts when it ran inside an initialised process group (under
    torchrun): where it ran, each measured step's profiled time as the step's time, and its
    FSDP2 units' collectives per step as its communication, so `hybridprof merge` takes the
    ranks' sessions; None outside a process group."""
    if not dist.is_available() or not dist.is_initialized():
        return None
    local = os.environ.get("LOCAL_RANK", "")
    device = f"cuda:{torch.cuda.current_device()}" if use_cuda else "cpu"
    info = RankInfo(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(local) if local.isdigit() else 0,
        host=socket.gethostname(),
        backend=str(dist.get_backend()),
        device=device,
        ddp=is_ddp(model),
    )
    return RankRun(info, step_us=session.iteration_cpu_us, comm_us=fsdp_comm_us(session))


def fsdp_comm_us(session: ProfileSession) -> tuple[float, ...]:
    """Per measured iteration, the time in the FSDP2 units' collectives (their ranges run one
    after another on the rank's thread, so their times add up); () without units."""
    collectives = [c.iteration_us for c in session.fsdp if c.kind != "copy_out"]
    count = min((len(times) for times in collectives), default=0)
    return tuple(sum(times[i] for times in collectives) for i in range(count))


def owners(model: nn.Module) -> dict[int, str]:
    """id(parameter) -> path of the module that holds it directly (the layer it belongs to)."""
    found: dict[int, str] = {}
    for path, module in model.named_modules():
        for parameter in module.parameters(recurse=False):
            found.setdefault(id(parameter), path)
    return found


def is_ddp(model: nn.Module) -> bool:
    from torch.nn.parallel import DistributedDataParallel

    return isinstance(model, DistributedDataParallel)


def wrap_ddp(model: nn.Module, device: torch.device, clock: CommClock) -> nn.Module:
    """DistributedDataParallel around `model` on this rank's device, with the timing hook."""
    from torch.nn.parallel import DistributedDataParallel

    ids = [device.index] if device.type == "cuda" else None
    wrapped = DistributedDataParallel(model, device_ids=ids)
    wrapped.register_comm_hook(clock, timed_allreduce)
    return wrapped


def time_buckets(wrapped: Any, clock: CommClock) -> bool:
    """Time the buckets of the entry's own DistributedDataParallel, unless it has a comm hook
    already (DDP takes only one): then its buckets get no rows, the layers are still profiled."""
    try:
        wrapped.register_comm_hook(clock, timed_allreduce)
    except RuntimeError:
        return False
    return True


def model_collectives(session: ProfileSession) -> tuple[CollectiveStat, ...]:
    """The `c10d::` collectives each layer's forward called, from its op breakdown; a
    tensor-parallel layer's are its collectives and their waits, forward and backward, as the
    session's `tp` has them (its `c10d::` ops are inside those)."""
    tp_layers = {comm.path for comm in session.tp}
    rows = [_tp_row(comm) for comm in session.tp]
    for record in session.records:
        if record.path in tp_layers:
            continue
        for op in record.ops:
            if op.name.startswith("c10d::") and not op.backward:
                per_iteration = op.total_cpu_us
                rows.append(
                    CollectiveStat(
                        name=op.name,
                        kind="model",
                        calls=float(op.calls),
                        time_us=Stat(per_iteration, per_iteration, per_iteration),
                        layer=record.path,
                    )
                )
    return tuple(rows)


def _tp_row(comm: UnitComm) -> CollectiveStat:
    direction = "backward" if comm.kind == "tp_backward" else "forward"
    return CollectiveStat(
        name=f"tensor parallel {direction}" + (f" ({comm.group})" if comm.group else ""),
        kind="model",
        calls=comm.calls,
        time_us=comm.time_us,
        nbytes=round(comm.nbytes / comm.calls) if comm.calls else 0,
        layer=comm.path,
    )


def gather_to_rank0(group: Group, payload: str, timeout_s: float) -> list[str] | None:
    """Every rank's payload on rank 0 (in rank order), None on the others."""
    world = group.launch.world_size
    received: list[Any] | None = [None] * world if group.launch.rank == 0 else None
    try:
        dist.gather_object(payload, received, dst=0, group=group.gather_group)
    except RuntimeError as exc:
        raise DistributedError(
            f"rank {group.launch.rank} could not exchange sessions with the other ranks within "
            f"{timeout_s:g} s ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
            "each rank's own session-rank*.json is saved: merge them with hybridprof merge"
        ) from exc
    return [str(p) for p in received] if received is not None else None


__all__ = [
    "CommClock",
    "Group",
    "Launch",
    "block_rank",
    "fsdp_comm_us",
    "gather_to_rank0",
    "is_ddp",
    "join_group",
    "model_collectives",
    "owners",
    "rank_device",
    "rank_info",
    "time_buckets",
    "wrap_ddp",
]
