"""How `hybridprof run` tells a torchrun worker from a single process (no torch work)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridprof.cli import main
from hybridprof.cli.run_ranks import torchrun_launch
from hybridprof.errors import UsageError
from tests.paths import FIXTURES

MODEL = str(FIXTURES / "ranked_net.py")


def test_a_worker_is_known_by_torchruns_three_variables() -> None:
    launch = torchrun_launch({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert launch is not None and (launch.rank, launch.world_size, launch.local_rank) == (1, 2, 1)
    assert torchrun_launch({"RANK": "0", "WORLD_SIZE": "2"}) is None  # not torchrun: no LOCAL_RANK
    assert torchrun_launch({}) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"RANK": "x", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "must be integers"),
        ({"RANK": "2", "WORLD_SIZE": "2", "LOCAL_RANK": "0"}, "RANK 2 is outside WORLD_SIZE 2"),
    ],
)
def test_bad_launch_variables_are_one_line_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        torchrun_launch(env)


def test_ddp_outside_torchrun_says_how_to_launch(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    code = main(["run", MODEL, "--ddp", "-o", str(tmp_path / "s.json")])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "hybridprof: error: --ddp needs torchrun: torchrun --nproc-per-node N -m hybridprof run "
        "... --ddp"
    ]
    assert not (tmp_path / "s.json").exists()


@pytest.mark.parametrize("name", ["session-rank1.json", "session-merged.json", "report.html"])
def test_a_ranks_own_names_are_never_written_through_a_symlink(tmp_path: Path, name: str) -> None:
    from hybridprof.cli.run import build_parser
    from hybridprof.cli.run_ranks import plan_rank_outputs
    from hybridprof.errors import OutputError

    out = tmp_path / "ddp"
    out.mkdir()
    victim = tmp_path / "precious.txt"
    victim.write_text("precious")
    (out / name).symlink_to(victim)
    args = build_parser().parse_args([MODEL, "--out-dir", str(out), "--force"])
    rank = 1 if name == "session-rank1.json" else 0
    launch = torchrun_launch({"RANK": str(rank), "WORLD_SIZE": "2", "LOCAL_RANK": str(rank)})
    assert launch is not None
    with pytest.raises(OutputError, match=r"is a symbolic link; hybridprof never writes"):
        plan_rank_outputs(args, launch)
    assert victim.read_text() == "precious"


@pytest.mark.parametrize("option", [["--fsdp"], ["--fsdp-wrap", f"{MODEL}:build_model"]])
def test_fsdp_outside_torchrun_says_how_to_launch(
    option: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    code = main(["run", MODEL, *option, "-o", str(tmp_path / "s.json")])
    assert code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "hybridprof: error: --fsdp needs torchrun: torchrun --nproc-per-node N -m hybridprof run "
        "... --fsdp"
    ]
    assert not (tmp_path / "s.json").exists()


def test_ddp_and_fsdp_together_are_refused_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0")):
        monkeypatch.setenv(name, value)
    argv = ["run", MODEL, "--ddp", "--fsdp", "--warmup", "1", "--iters", "1"]
    assert main([*argv, "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["hybridprof: error: --ddp and --fsdp each wrap the model: give one of them"]
    assert not (tmp_path / "out").exists()
