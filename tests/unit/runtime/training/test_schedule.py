"""`hybridprof.schedule`: torch.profiler.schedule's arithmetic, with repeat 1 by default."""

from __future__ import annotations

import pytest
import torch.profiler
from hypothesis import given
from hypothesis import strategies as st

import hybridprof
from hybridprof.runtime.training.schedule import EVERY_STEP

TORCH = {
    torch.profiler.ProfilerAction.NONE: "none",
    torch.profiler.ProfilerAction.WARMUP: "warmup",
    torch.profiler.ProfilerAction.RECORD: "active",
    torch.profiler.ProfilerAction.RECORD_AND_SAVE: "active",
}


@given(
    wait=st.integers(0, 4),
    warmup=st.integers(1, 4),
    active=st.integers(1, 5),
    repeat=st.integers(0, 3),
    skip_first=st.integers(0, 4),
    skip_first_wait=st.integers(0, 1),
)
def test_every_step_does_what_torch_profilers_schedule_says(
    wait: int, warmup: int, active: int, repeat: int, skip_first: int, skip_first_wait: int
) -> None:
    ours = hybridprof.schedule(
        wait=wait,
        warmup=warmup,
        active=active,
        repeat=repeat,
        skip_first=skip_first,
        skip_first_wait=skip_first_wait,
    )
    theirs = torch.profiler.schedule(
        wait=wait,
        warmup=warmup,
        active=active,
        repeat=repeat,
        skip_first=skip_first,
        skip_first_wait=skip_first_wait,
    )
    for step in range(60):
        assert ours.action(step) == TORCH[theirs(step)], step


def test_one_cycle_by_default() -> None:
    plan = hybridprof.schedule(wait=2, warmup=3, active=10)
    actions = [plan.action(step) for step in range(2000)]
    assert actions.count("active") == 10 and actions.count("warmup") == 3
    assert actions[:15] == ["none"] * 2 + ["warmup"] * 3 + ["active"] * 10
    forever = hybridprof.schedule(wait=2, warmup=3, active=10, repeat=0)
    assert sum(forever.action(step) == "active" for step in range(2000)) == 1330


def test_without_a_schedule_every_step_is_measured() -> None:
    assert {EVERY_STEP.action(step) for step in range(100)} == {"active"}


@pytest.mark.parametrize("name", ["wait", "warmup", "repeat", "skip_first", "skip_first_wait"])
def test_negative_counts_are_refused_by_name(name: str) -> None:
    with pytest.raises(ValueError, match=rf"schedule\({name}=-1\): {name} must be"):
        hybridprof.schedule(active=1, **{name: -1})


def test_schedule_info_is_what_the_session_records() -> None:
    info = hybridprof.schedule(wait=1, warmup=2, active=3, repeat=4, skip_first=5).info()
    assert (info.wait, info.warmup, info.active, info.repeat, info.skip_first) == (1, 2, 3, 4, 5)
