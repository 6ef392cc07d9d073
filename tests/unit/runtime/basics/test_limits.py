"""Absurd option values are refused in one short line before torch sees them (issue 25: M-15,
L-12, L-13)."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.cli import main
from hybridprof.cli.common import one_line
from hybridprof.errors import UsageError
from hybridprof.files.loader import parse_shape
from hybridprof.runtime.basics.limits import MAX_ITERATIONS, max_threads
from hybridprof.runtime.basics.stopping import IterationRule
from hybridprof.runtime.runs.guards import first_line


@pytest.mark.parametrize(
    "spec",
    ["99999999999999999999,8", f"{2**63},8", f"{2**63 - 1},8", f"{2**32},{2**32}", "4x" * 40 + "9"],
)
def test_shapes_beyond_int64_are_refused_in_a_short_line(spec: str) -> None:
    with pytest.raises(UsageError) as caught:
        parse_shape(spec)
    message = str(caught.value)
    assert len(message) <= 300
    assert "beyond torch's limit (2**63 - 1)" in message or "cannot be allocated" in message


def test_the_largest_shape_torch_takes_still_parses() -> None:
    assert parse_shape(f"{2**62},1") == ((2**62, 1), "float32")


def test_a_long_shape_is_shown_cut() -> None:
    with pytest.raises(UsageError) as caught:
        parse_shape("1," * 5000 + "a")
    assert len(str(caught.value)) < 200


def test_error_lines_keep_their_start_and_end_within_the_limit() -> None:
    frames = " ".join(f"frame #{i}: c10::Error at /pytorch/aten/src/x.cpp:{i}" for i in range(100))
    line = one_line(f"rand(): overflow {frames}; give a smaller shape")
    assert len(line) <= 600
    assert line.startswith("rand(): overflow frame #0") and line.endswith("give a smaller shape")
    assert " ... " in line


def test_a_torch_error_quoted_in_ours_is_cut() -> None:
    quoted = first_line(RuntimeError("Overflow when unpacking long " + "x" * 2000))
    assert len(quoted) == 300 and quoted.endswith("...")


def test_internal_errors_are_one_short_line(capsys: pytest.CaptureFixture[str]) -> None:
    from hybridprof.cli.common import guarded

    def broken() -> int:
        raise TypeError("failed to unpack " + "Exception raised from THPUtils_unpackLong " * 50)

    assert guarded(broken, debug=False) == 1
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and len(lines[0]) < 320


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--threads", "100000"], "--threads 100,000 is more threads than this machine can run"),
        (["--threads", "99999999999999999999"], "--threads 999999999999... is more threads"),
        (["--threads", "0"], "--threads must be 1 or more, got 0"),
        (["--iters", "100000000"], "--iters 100,000,000 is more than hybridprof runs (100,000"),
        (["--warmup", "100000000"], "--warmup 100,000,000 is more than hybridprof runs"),
    ],
)
def test_run_refuses_absurd_counts_before_loading(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The model file does not exist: the refusal comes before anything is loaded.
    assert main(["run", "no_such_model.py", *argv]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1 and message in lines[0], lines


def test_the_thread_limit_leaves_room_to_oversubscribe() -> None:
    assert max_threads() >= 64


def test_the_library_refuses_the_same_counts() -> None:
    with pytest.raises(UsageError, match="100,000 at most"):
        IterationRule.of(0, MAX_ITERATIONS + 1, None)
    assert IterationRule.of(0, MAX_ITERATIONS, None).iters == MAX_ITERATIONS
    model = nn.Linear(2, 2)
    with pytest.raises(UsageError, match="more threads than this machine can run"):
        hybridprof.profile(model, (torch.rand(1, 2),), iters=1, warmup=0, threads=10**6)
