"""The DistributedDataParallel communication hook that times each gradient bucket's all-reduce.

No `from __future__ import annotations` here, on purpose: DDP's `register_comm_hook` compares a
hook's annotations with the objects `dist.GradBucket` and `torch.futures.Future[torch.Tensor]`,
and refuses the strings that import would leave in their place.
"""

from collections.abc import Callable
from typing import Protocol

import torch
import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

# torch's stubs do not list dist.GradBucket (it comes from torch._C), hence the ignores below.


class BucketTimer(Protocol):
    def started(self, bucket: dist.GradBucket) -> Callable[[], None]:  # type: ignore[name-defined]
        """Note a bucket ready to reduce; return what to call once its result is back."""
        ...


def timed_allreduce(
    timer: BucketTimer,
    bucket: dist.GradBucket,  # type: ignore[name-defined]
) -> torch.futures.Future[torch.Tensor]:
    """torch's default `allreduce_hook` on the default group, timed from ready to reduced.

    The completion callback runs on the backend's thread when the reduced bucket is back.
    """
    finished = timer.started(bucket)
    world = dist.group.WORLD
    assert world is not None  # the hook only runs inside an initialised process group

    def done(future: torch.futures.Future[torch.Tensor]) -> torch.Tensor:
        finished()
        return future.value()

    return allreduce_hook(world, bucket).then(done)
