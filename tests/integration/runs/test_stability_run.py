"""Per-iteration figures, the stability verdict and auto iteration counts, on real CPU torch."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.analysis.stats import ci_within
from hybridprof.api.profile_call import profile
from hybridprof.cli import main
from hybridprof.datamodel import ProfileSession
from hybridprof.files.storage import load_session
from hybridprof.runtime.events.kineto import TRACE_ITERATIONS
from tests.paths import FIXTURES

SMALL = FIXTURES / "run_small.py"
STABILITY_KEYS = ["verdict", "iteration_cv", "load", "threads", "advice"]
ONLY_WHEN_TRUE = "threads_exceed_free_cores"  # the compact form leaves a false out


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + x  # the add runs in the block's own forward


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(16, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


class Sleeper(nn.Module):
    """Sleeps `pattern[i % len(pattern)]` seconds on call i: iteration times set by the test."""

    def __init__(self, pattern: list[float]) -> None:
        super().__init__()
        self.pattern, self.calls = pattern, 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        time.sleep(self.pattern[self.calls % len(self.pattern)])
        self.calls += 1
        return x


def stability_json(session: ProfileSession) -> dict[str, object]:
    data = json.loads(session.to_json())
    assert [key for key in data["stability"] if key != ONLY_WHEN_TRUE] == STABILITY_KEYS
    return data["stability"]  # type: ignore[no-any-return]


def test_every_record_keeps_each_iterations_times_compactly() -> None:
    model = Net().eval()
    session = profile(model, torch.randn(4, 16), warmup=1, iters=7, depth=None, globs=["**"])
    assert session.iterations == 7
    by_path = {r.path: r for r in session.records}
    for record in session.records:
        series = record.per_iteration
        assert series is not None and series.lengths() == {7}, record.path
    leaf = by_path["blocks.0.fc"].per_iteration
    parent = by_path["blocks.0"].per_iteration
    assert leaf is not None and leaf.total_cpu_us is None  # a leaf's total is its self time
    assert parent is not None and parent.total_cpu_us is not None
    assert all(
        t >= s for t, s in zip(parent.total_cpu().values, parent.self_cpu_us.values, strict=True)
    )
    again = ProfileSession.from_json(session.to_json())
    assert again == session


def test_profile_sessions_carry_stability() -> None:
    session = profile(Net().eval(), torch.randn(4, 16), warmup=1, iters=6, threads=1)
    assert session.stability is not None
    assert session.stability.threads == 1
    assert session.stability.verdict in ("stable", "noisy")
    assert stability_json(session)["iteration_cv"] == session.stability.iteration_cv
    assert session.stop_reason == "count" and session.requested_warmup == 1


def test_library_profile_blocks_carry_stability() -> None:
    model = Net().eval()
    with hybridprof.Profile(model) as prof:
        model(torch.randn(4, 16))
    session = prof.session()
    assert session.stability is not None
    assert session.stability.iteration_cv == 0.0  # one with-block: one iteration
    assert session.stability.threads == torch.get_num_threads()
    stability_json(session)
    assert all(r.per_iteration is None for r in session.records)  # one value: the median itself


def test_iters_auto_stops_when_converged_or_out_of_time() -> None:
    session = profile(
        Net().eval(), torch.randn(4, 16), warmup="auto", iters="auto", max_time_s=8.0, threads=1
    )
    assert session.requested_iterations == "auto" and session.requested_warmup == "auto"
    assert session.max_time_s == 8.0
    assert session.warmup >= 3  # warm-up needs three times to see them stop falling
    # a busy machine can keep a tiny model's median from settling until the iteration cap
    assert session.stop_reason in ("converged", "max_time", "max_iterations")
    if session.stop_reason == "converged":
        assert session.iterations >= 6
        assert ci_within(session.iteration_cpu_us, 3.0)
    assert all(
        r.per_iteration and r.per_iteration.lengths() == {session.iterations}
        for r in session.records
    )


def test_iters_auto_gives_up_at_the_time_limit_and_says_so() -> None:
    sleeper = Sleeper([0.001, 0.02])  # alternating 1 ms and 20 ms: the median never settles
    # (without the warm step, which would take every other call and leave the measured ones equal)
    session = profile(
        sleeper, torch.zeros(1), warmup=0, iters="auto", max_time_s=0.6, depth=0, warm_step=False
    )
    assert session.stop_reason == "max_time"
    assert 1 <= session.iterations < 100
    assert any(
        "--iters auto stopped before" in w and "--max-time 0.6 s" in w for w in session.warnings
    )


def test_warmup_auto_runs_until_iteration_times_stop_falling() -> None:
    sleeper = Sleeper([0.06, 0.04, 0.02] + [0.002] * 12)
    session = profile(sleeper, torch.zeros(1), warmup="auto", iters=2, depth=0)
    assert session.warmup >= 5  # past the three slow calls, then two more to see them level off
    assert session.warmup < 10


def test_cli_iters_auto_records_how_many_ran_and_why(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.json"
    argv = ["run", str(SMALL), "--warmup", "auto", "--iters", "auto", "--max-time", "6"]
    assert main([*argv, "--threads", "1", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    session = load_session(out)
    data = json.loads(out.read_text())
    assert data["requested_iterations"] == "auto" and data["stop_reason"] == session.stop_reason
    assert [key for key in data["stability"] if key != ONLY_WHEN_TRUE] == STABILITY_KEYS
    assert f"{session.iterations} measured forwards" in printed
    assert "auto" in printed


@pytest.mark.parametrize(
    "args, message",
    [
        (["--iters", "many"], "argument --iters: expected a whole number or 'auto', got 'many'"),
        (["--warmup", "-2"], "--warmup must be 0 or more, got -2; or give auto"),
        (["--max-time", "0"], "--max-time must be more than 0 seconds, got 0"),
    ],
)
def test_cli_refuses_bad_counts(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(SMALL), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]


def test_an_auto_warmup_stays_out_of_the_trace(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    session = profile(
        Net().eval(), torch.randn(4, 16), warmup="auto", iters=2, trace_path=str(trace)
    )
    assert session.warmup >= 3
    events = json.loads(trace.read_text())["traceEvents"]
    head = [e for e in events if e.get("name") == "head" and e.get("ph") == "X"]
    # one per measured iteration (those excluded for time lost to other processes included, as
    # they ran), none from the warm-up
    excluded = session.cpu_waits.excluded if session.cpu_waits is not None else 0
    assert len(head) == min(2 + excluded, TRACE_ITERATIONS)
