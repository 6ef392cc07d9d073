"""Threads that fit: `run`, `profile()` and `diff --run` measure on one torch thread unless told
otherwise (said in one line by the commands), and the session records the count the model really
ran with; a `Profile` with-block keeps the user's threads."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.cli import main
from hybridprof.datamodel import ProfileSession
from hybridprof.files.storage import load_session
from hybridprof.runtime.basics.limits import DEFAULT_THREADS, default_threads_line
from tests.integration.cli_run import QUICK


class SeesThreads(nn.Module):
    """Notes torch's thread count each time its forward runs."""

    def __init__(self, set_to: int | None = None) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.seen: list[int] = []
        self.set_to = set_to

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.set_to is not None:
            torch.set_num_threads(self.set_to)
        self.seen.append(torch.get_num_threads())
        return self.fc(x)


@pytest.fixture
def threads_kept() -> Iterator[int]:
    before = torch.get_num_threads()
    yield before
    torch.set_num_threads(before)


def session_of(model: SeesThreads, **options: object) -> ProfileSession:
    session = hybridprof.profile(model, torch.rand(2, 8), warmup=1, iters=3, **options)
    assert isinstance(session, ProfileSession)
    return session


def test_profile_runs_on_the_default_thread_and_records_it(threads_kept: int) -> None:
    torch.set_num_threads(2)
    model = SeesThreads()
    session = session_of(model)
    assert set(model.seen) == {DEFAULT_THREADS}
    assert session.environment.threads == DEFAULT_THREADS
    assert torch.get_num_threads() == 2  # the caller's setting is back


def test_the_recorded_count_is_what_the_model_ran_with(threads_kept: int) -> None:
    model = SeesThreads()
    assert session_of(model, threads=2).environment.threads == model.seen[-1] == 2
    # a model that sets torch's threads itself: the session says what it ran with
    changing = SeesThreads(set_to=3)
    assert session_of(changing, threads=2).environment.threads == changing.seen[-1] == 3


def test_a_with_block_keeps_the_users_threads(threads_kept: int) -> None:
    torch.set_num_threads(2)
    model = SeesThreads()
    with hybridprof.Profile(model) as prof:
        model(torch.rand(2, 8))
    assert model.seen == [2]
    assert prof.session().environment.threads == 2


def test_run_says_the_default_once_and_records_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *QUICK, "--out-dir", str(tmp_path)]) == 0
    said = capsys.readouterr()
    assert (said.out + said.err).count(default_threads_line()) == 1
    assert load_session(tmp_path / "session.json").environment.threads == DEFAULT_THREADS


def test_threads_given_are_used_and_not_announced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", *QUICK, "--threads", "2", "--out-dir", str(tmp_path)]) == 0
    said = capsys.readouterr()
    assert default_threads_line() not in said.out + said.err
    assert load_session(tmp_path / "session.json").environment.threads == 2
