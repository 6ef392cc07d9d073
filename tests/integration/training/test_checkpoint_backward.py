"""`backward=True` with activation checkpointing: recomputed forwards are their layers' backward."""

from __future__ import annotations

import torch
import torch.utils.checkpoint
from torch import nn

from hybridprof.api import profile
from hybridprof.datamodel import ProfileSession

SEGMENT = ("seq", "seq.0", "seq.1")


class Checkpointed(nn.Module):
    """A Linear+ReLU segment, checkpointed (non-reentrant, torch's default) or not, then a head."""

    def __init__(self, checkpoint: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.seq = nn.Sequential(nn.Linear(64, 128), nn.ReLU())
        self.head = nn.Linear(128, 4)
        self.checkpoint = checkpoint

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.checkpoint:
            hidden = torch.utils.checkpoint.checkpoint(self.seq, x, use_reentrant=False)
        else:
            hidden = self.seq(x)
        return self.head(hidden)


def run(checkpoint: bool) -> ProfileSession:
    return profile(
        Checkpointed(checkpoint),
        torch.rand(16, 64),
        backward=True,
        warmup=1,
        iters=2,
        paths=["", *SEGMENT, "head"],
    )


def backward_ops(session: ProfileSession, path: str) -> set[str]:
    record = session.record(path)
    assert record is not None, path
    return {op.name for op in record.ops if op.backward}


def test_a_recomputed_forward_is_not_another_forward_call() -> None:
    plain, checkpointed = run(False), run(True)
    assert {r.path: r.calls for r in checkpointed.records} == {
        r.path: r.calls for r in plain.records
    }


def test_each_layer_owns_its_own_recompute() -> None:
    session = run(True)
    # Linear's forward, re-run in backward, is Linear's backward, not the segment's last layer's.
    assert "aten::addmm" in backward_ops(session, "seq.0")
    assert "aten::relu" in backward_ops(session, "seq.1")
    assert not {"aten::addmm", "aten::linear"} & backward_ops(session, "seq.1")
    # The checkpoint's bookkeeping around the recompute (in ReLU's node) is its caller's, the
    # root's.
    assert "ReluBackward0" in backward_ops(session, "")
    assert "ReluBackward0" not in backward_ops(session, "seq.1")
    for path in SEGMENT:
        record = session.record(path)
        assert record is not None and record.backward_self_cpu_us is not None
        assert record.backward_self_cpu_us.min > 0, path
    root = session.record("")
    assert root is not None and root.backward_total_cpu_us is not None
    seq = session.record("seq")
    assert seq is not None and seq.backward_total_cpu_us is not None
    assert root.backward_total_cpu_us.min >= seq.backward_total_cpu_us.min


def test_nothing_is_counted_twice() -> None:
    """Forward + backward self times of all layers, nested ones selected too, never exceed the
    step's profiled CPU time (self times are disjoint parts of it; a double count would not be)."""
    session = profile(
        Checkpointed(True),
        torch.rand(16, 64),
        backward=True,
        warmup=1,
        iters=1,
        paths=["", *SEGMENT, "head"],
    )
    whole = session.iteration_cpu_us[0]
    layers = 0.0
    for record in session.records:
        assert record.backward_self_cpu_us is not None
        layers += record.self_cpu_us.median + record.backward_self_cpu_us.median
    assert 0 < layers <= whole * (1 + 1e-9), (layers, whole)


class Reentrant(nn.Module):
    """Two Linear+ReLU blocks under reentrant checkpointing (`use_reentrant=True`): each block's
    backward runs inside its checkpoint's node, as a nested `torch.autograd.backward`."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.blocks = nn.ModuleList(nn.Sequential(nn.Linear(32, 32), nn.ReLU()) for _ in range(2))
        self.head = nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=True)
        return self.head(x)


def test_reentrant_checkpointing_gives_each_layer_its_backward_nodes() -> None:
    session = profile(
        Reentrant(), torch.rand(8, 32).requires_grad_(), backward=True, warmup=1, iters=2
    )
    for path in ("blocks.0.0", "blocks.1.0"):
        assert "AddmmBackward0" in backward_ops(session, path), path
        assert "AddmmBackward0" not in backward_ops(session, "")
    assert "ReluBackward0" in backward_ops(session, "blocks.0.1")
    whole = session.iteration_cpu_us[0]
    layers = sum(
        r.self_cpu_us.values[0] + r.backward_self_cpu_us.values[0]
        for r in (rec.per_iteration for rec in session.records)
        if r is not None and r.backward_self_cpu_us is not None
    )
    assert 0 < layers <= whole * (1 + 1e-9)
