"""The paired A/B run (`hybridprof.runtime.runs.interleaved`) on real small models: ABBA order,
whole pairs, stopping rules, failures, and both models left exactly as they were."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from hybridprof.errors import ModelRunError
from hybridprof.planner.module_tree import tree_plan
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.runs.interleaved import run_paired
from hybridprof.runtime.runs.iteration_loop import FIRST_CHECK_PAIRS
from hybridprof.runtime.runs.lanes import LaneModel
from hybridprof.runtime.runs.options import RunOptions


class Logged(nn.Module):
    """Two Linears; each forward notes its name in a shared log (and may fail on call N)."""

    def __init__(self, name: str, log: list[str], fail_at: int | None = None) -> None:
        super().__init__()
        self.name, self.log, self.fail_at = name, log, fail_at
        self.fc = nn.Linear(8, 8)
        self.out = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.log.append(self.name)
        if self.fail_at is not None and self.log.count(self.name) == self.fail_at:
            raise KeyboardInterrupt if self.name == "B" else RuntimeError("boom")
        y: torch.Tensor = self.out(torch.relu(self.fc(x)))
        return y


def side(model: nn.Module) -> LaneModel:
    return LaneModel(model, (torch.rand(2, 8),), tree_plan(model, None, (), None))


@pytest.mark.usefixtures("waits_unknown")  # an excluded pair would add its calls to the log
def test_iterations_alternate_abba_and_both_models_come_back_unchanged() -> None:
    log: list[str] = []
    a, b = Logged("A", log), Logged("B", log)
    a.train()
    b.eval()
    before = {name: dict(vars(m)) for name, m in (("a", a), ("b", b))}
    base, new = run_paired(side(a), side(b), RunOptions(warmup=1, iters=4, threads=1))
    # one warm-up each, then pairs of (warm step + measured step) per side: AB BA AB BA
    assert log == ["A", "B", *"AABB", *"BBAA", *"AABB", *"BBAA"]
    assert base.iterations == new.iterations == 4 and not base.interrupted
    fc = next(r for r in new.records if r.path == "fc")
    assert fc.per_iteration is not None and len(fc.per_iteration.self_cpu_us.values) == 4
    assert live_patches() == ()
    assert "forward" not in vars(a) and "forward" not in vars(b) and a.training and not b.training
    assert {k for k in vars(a) if k not in before["a"]} == set()


def test_ctrl_c_keeps_whole_pairs_only() -> None:
    log: list[str] = []
    a, b = Logged("A", log), Logged("B", log, fail_at=8)  # B's 8th call: mid-way through pair 3
    base, new = run_paired(side(a), side(b), RunOptions(warmup=1, iters=10, threads=1))
    assert base.interrupted and new.interrupted and base.stop_reason == "interrupted"
    assert base.iterations == new.iterations == 3  # pair 4's half measured is dropped
    assert live_patches() == () and "forward" not in vars(b)


def test_a_failing_model_is_named_and_both_are_restored() -> None:
    log: list[str] = []
    a, b = Logged("A", log, fail_at=3), Logged("B", log)
    with pytest.raises(ModelRunError, match=r"forward failed in \(root\) \(Logged\): boom"):
        run_paired(side(a), side(b), RunOptions(warmup=1, iters=5, threads=1))
    assert live_patches() == () and "forward" not in vars(a) and "forward" not in vars(b)


def test_auto_stops_when_settled_or_at_the_time_limit() -> None:
    asked: list[int] = []

    def settled_at_once(base: object, new: object) -> bool:
        asked.append(1)
        return True

    a, b = Logged("A", []), Logged("B", [])
    base, _ = run_paired(
        side(a), side(b), RunOptions(warmup=0, iters="auto", threads=1), settled=settled_at_once
    )
    assert (base.iterations, base.stop_reason, len(asked)) == (FIRST_CHECK_PAIRS, "converged", 1)
    never = RunOptions(warmup=0, iters="auto", max_time_s=0.5, threads=1)
    base, new = run_paired(side(a), side(b), never, settled=lambda b, n: False)
    assert base.stop_reason == "max_time" and base.iterations == new.iterations > FIRST_CHECK_PAIRS


def test_lanes_that_share_modules_are_patched_only_around_their_own_iterations() -> None:
    """A model beside a wrapper around it (as an eager model beside its torch.compile wrapper):
    each lane's patches are in only while its own iterations run, never both at once."""
    log: list[str] = []
    inner = Logged("A", log)
    outer = nn.Sequential(inner)  # runs the same module objects
    seen: list[tuple[str, ...]] = []
    inner.register_forward_pre_hook(lambda module, args: seen.append(live_patches()))
    base, new = run_paired(side(inner), side(outer), RunOptions(warmup=1, iters=4, threads=1))
    assert base.iterations == new.iterations == 4
    assert base.record("fc") is not None and new.record("0.fc") is not None
    alone = {len(patched) for patched in seen}
    assert alone == {len(base.plan.selected_paths()), len(new.plan.selected_paths())}
    assert live_patches() == () and "forward" not in vars(inner.fc)


def test_a_gate_stopped_by_ctrl_c_answers_inconclusive_never_pass() -> None:
    from hybridprof.cli.diff import exit_code
    from hybridprof.diff import diff_sessions

    log: list[str] = []
    a, b = Logged("A", log), Logged("B", log, fail_at=20)  # stopped after whole pairs
    base, new = run_paired(side(a), side(b), RunOptions(warmup=1, iters=30, threads=1))
    assert base.interrupted and base.iterations >= 6  # enough pairs to be judged otherwise
    diff = diff_sessions(base, new, paired=True)
    assert diff.gate is not None and diff.gate.answer == "inconclusive"
    assert diff.gate.reasons[0].startswith("the paired run was interrupted after ")
    assert exit_code(diff) == 5
