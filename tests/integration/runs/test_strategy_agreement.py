"""The three strategies agree on structure: same paths, same call counts, the same ops seen.

Numbers are not compared here (timings are noisy); benchmarks/bench_overhead.py prints the numeric
agreement of `session` and `per-call` on the AlexNet-like example.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.api import profile
from hybridprof.datamodel import ProfileSession
from hybridprof.runtime.strategies import STRATEGIES


class Twice(nn.Module):
    """Calls its shared activation twice and runs a nested block: the cases attribution can get
    wrong."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.act = nn.ReLU()
        self.pool = nn.AdaptiveAvgPool2d(2)
        self.head = nn.Sequential(nn.Linear(16, 8), nn.ReLU(), nn.Linear(8, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.act(self.conv(x))
        x = self.act(self.pool(x))
        return self.head(torch.flatten(x, 1))


PATHS = ["conv", "act", "pool", "head", "head.0", "head.1", "head.2"]


def run(strategy: str) -> ProfileSession:
    torch.manual_seed(0)
    return profile(
        Twice().eval(), torch.randn(1, 3, 10, 10), paths=PATHS, warmup=1, iters=3, strategy=strategy
    )


@pytest.fixture(scope="module")
def sessions() -> dict[str, ProfileSession]:
    return {name: run(name) for name in STRATEGIES}


def test_all_strategies_name_themselves(sessions: dict[str, ProfileSession]) -> None:
    assert {name: s.strategy for name, s in sessions.items()} == {n: n for n in STRATEGIES}


def test_same_paths_and_call_counts(sessions: dict[str, ProfileSession]) -> None:
    counts = {name: {r.path: r.calls for r in s.records} for name, s in sessions.items()}
    expected = {"conv": 3, "act": 6, "pool": 3, "head": 3, "head.0": 3, "head.1": 3, "head.2": 3}
    for name, seen in counts.items():
        assert seen == expected, name


def test_session_and_per_call_see_the_same_ops(sessions: dict[str, ProfileSession]) -> None:
    def main_ops(session: ProfileSession, path: str) -> set[str]:
        record = session.record(path)
        assert record is not None
        return {op.name for op in record.ops}

    for path, op in [
        ("conv", "aten::conv2d"),
        ("act", "aten::relu"),
        ("head.0", "aten::addmm"),
        ("pool", "aten::adaptive_avg_pool2d"),
    ]:
        assert op in main_ops(sessions["session"], path)
        assert op in main_ops(sessions["per-call"], path)
    assert main_ops(sessions["session"], "head") == set()  # a pure container does no work itself


def test_timer_has_times_but_no_op_breakdown(sessions: dict[str, ProfileSession]) -> None:
    for record in sessions["timer"].records:
        assert record.ops == ()
        assert record.total_cpu_us.median >= record.self_cpu_us.median > 0
