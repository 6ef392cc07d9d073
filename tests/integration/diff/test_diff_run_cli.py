"""`hybridprof diff --run` as a user runs it: two model files (or one at git revisions) profiled
in one process, pair by pair; its exit codes and its one-line refusals."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from hybridprof.cli import main
from tests.paths import FIXTURES

MODEL = """
import torch
from torch import nn
from torch.nn import functional as F

REPS = {reps}
BUILT = []  # module state: each import of this file has its own


class Work(nn.Module):
    def __init__(self, reps):
        super().__init__()
        self.reps = reps
        self.weight = nn.Parameter(torch.rand(64, 64) / 64)

    def forward(self, x):
        for _ in range(self.reps):
            y = F.linear(x, self.weight)
        return y


class Net(nn.Module):
    def __init__(self, reps):
        super().__init__()
        self.work = Work(reps)
        self.act = nn.ReLU()
        self.head = nn.Linear(64, 8)

    def forward(self, x):
        return self.head(self.act(self.work(x)))


def build_model():
    BUILT.append(1)  # a second build in the same module would be 10x heavier
    return Net(REPS * (1 if len(BUILT) == 1 else 10)), (torch.rand(16, 64),)
"""
QUICK = ["--threads", "1", "--warmup", "2", "--iters", "12"]


def write_model(path: Path, reps: int) -> Path:
    path.write_text(MODEL.format(reps=reps))
    return path


def saved(report: Path) -> dict:  # type: ignore[type-arg]
    return json.loads(report.read_text())  # type: ignore[no-any-return]


def test_the_same_model_twice_never_fails_the_gate_and_is_imported_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = write_model(tmp_path / "base.py", 1)
    report = tmp_path / "d.json"
    code = main(
        ["diff", "--run", str(a), str(a), *QUICK, "--fail-on-regression", "--report", str(report)]
    )
    printed = capsys.readouterr().out
    assert code in (0, 5), printed  # pass, or inconclusive on a busy machine; never 1
    result = saved(report)
    assert result["pairing"] == {"order": "ABBA", "pairs": 12, "stop_reason": "count"}
    work = next(x for x in result["layers"] if x["new_path"] == "work")
    assert "12 pairs of iterations in ABBA order" in printed
    assert result["base"]["iterations"] == result["new"]["iterations"] == 12
    # one module for both sides would have built the second model 10x heavier
    assert work["verdict"] != "slower" and "min delta:" in printed


def test_a_heavier_layer_fails_the_gate_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = write_model(tmp_path / "base.py", 1), write_model(tmp_path / "new.py", 10)
    report = tmp_path / "d.json"
    argv = ["diff", "--run", str(base), str(new), *QUICK, "--fail-on-regression"]
    assert main([*argv, "--report", str(report)]) == 1, capsys.readouterr().out
    first = saved(report)["layers"][0]
    assert (first["new_path"], first["verdict"]) == ("work", "slower")
    assert first["times"][0]["paired"]["ratio"] > 3
    assert "answer: regression (exit 1 with --fail-on-regression)" in capsys.readouterr().out


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_one_file_at_two_git_revisions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()

    def git(*argv: str) -> None:
        subprocess.run(["git", "-C", str(repo), *argv], check=True, capture_output=True)

    git("init", "-q")
    git("config", "user.email", "t@example.com")
    git("config", "user.name", "t")
    net = write_model(repo / "net.py", 1)
    git("add", ".")
    git("commit", "-q", "-m", "light")
    git("tag", "light")
    write_model(net, 10)
    git("commit", "-q", "-am", "heavy")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    code = main(["diff", "--run", str(net), "--rev", "light", "--rev", "HEAD", *QUICK])
    printed = capsys.readouterr().out
    assert code == 0 and "  slower: work [Work]: self " in printed  # no gate asked: exit 0
    assert f"base: {net}@light (" in printed and f"new:  {net}@HEAD (" in printed
    assert list(temp.iterdir()) == []  # the revisions' copies are gone
    assert sorted(p.name for p in repo.iterdir()) == [".git", "net.py"]  # nothing left beside
    # one --rev: that revision against the file as it is
    write_model(net, 1)
    code = main(["diff", "--run", str(net), "--rev", "HEAD", *QUICK, "--fail-on-regression"])
    assert code in (0, 5) and "(working tree)" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["--run", "{a}", "--rev", "main"], "not in a git checkout"),
        (["{a}", "{a}"], "is a model file; add --run"),
        (["x.json", "y.json", "--iters", "5"], "--iters is an option of diff --run"),
        (["--run", "{a}"], "diff --run compares two model files, got 1"),
        (["--run", "{a}", "{a}", "--rev", "main"], "--rev reads one model file"),
        (["--run", "{a}", "{a}", "--min-delta", "fast"], "--min-delta 'fast' is not a time"),
        (["--run", "{a}", "{a}", "--iters", "0"], "--iters must be 1 or more"),
        # the limits `run` keeps hold here too (one check for both commands)
        (["--run", "{a}", "{a}", "--iters", "100000000"], "more than hybridprof runs"),
        (["--run", "{a}", "{a}", "--threads", "100000"], "more threads than this machine"),
        (["--run", "{a}", "{a}", "--input-shape", "99999999999999999999,8"], "beyond torch's"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], fragment: str
) -> None:
    loose = tmp_path / "loose"
    loose.mkdir()
    a = write_model(loose / "a.py", 1)
    code = main(["diff", *(arg.format(a=a) for arg in argv)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and fragment in err[0], err
    assert "Traceback" not in err[0]


def test_help_names_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["diff", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "1 a regression" in text and "5 inconclusive" in text and "--rev" in text


def test_a_44_layer_model_s_answer_fits_one_screen(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The default output of a 4-block GPT against the same with a 4x wider MLP: the answer, the
    layers slower or faster and a count of the rest, in 60 lines; -v gives the details."""
    base = tmp_path / "base.py"
    shutil.copy(FIXTURES / "gpt_blocks.py", base)
    new = tmp_path / "new.py"
    new.write_text(base.read_text().replace("WIDTH = 4 ", "WIDTH = 16 "))
    argv = ["diff", "--run", str(base), str(new), "--threads", "1", "--warmup", "1"]
    main([*argv, "--iters", "8", "--fail-on-regression"])
    brief = capsys.readouterr().out.splitlines()
    assert len(brief) <= 60, "\n".join(brief)
    assert any(line.startswith("answer: ") for line in brief)
    assert any(line.startswith("layers: ") and "45 in all" in line for line in brief)
    assert brief[-8:] and any("-v lists every changed layer" in line for line in brief)
    assert not any(line.startswith("      aten::") for line in brief)  # no op lines
    main([*argv, "--iters", "8", "-v"])
    detailed = capsys.readouterr().out
    assert "ops (self CPU per iteration):" in detailed and "method: paired" in detailed


def test_one_wider_mlp_says_what_of_each_layers_own_work_changed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 37's pair: the GPT against the same with block 2's MLP 4x wider. Whatever the
    timings say, the comparison knows what changed: the GELU in the wider MLP got a 4x input
    (the same code doing more work, so never knock-on), the other blocks' layers did the same
    work; with the parents, the MLP passes the wider tensors between its children; profiled at
    --depth 2, block 2's self time holds its MLP, whose parameters grew."""
    base = tmp_path / "base.py"
    shutil.copy(FIXTURES / "gpt_blocks.py", base)
    new = tmp_path / "new.py"
    new.write_text(
        base.read_text().replace(
            "def build_model():\n    return GPT()",
            "def build_model():\n    model = GPT()\n    model.blocks[2].mlp = MLP(32, 16 * 32)\n"
            "    return model",
        )
    )
    argv = ["diff", "--run", str(base), str(new), "--warmup", "1", "--iters", "4", "--force"]

    def own_work(*extra: str) -> dict[str, list[str] | None]:
        saved = tmp_path / "diff.json"
        main([*argv, *extra, "--report", str(saved)])
        capsys.readouterr()
        return {
            layer["new_path"]: layer["own_work"]
            for layer in json.loads(saved.read_text())["layers"]
        }

    leaves = own_work()
    assert leaves["blocks.2.mlp.act"] == [
        "input 2x16x128 -> 2x16x512",
        "output 2x16x128 -> 2x16x512",
    ]
    assert leaves["blocks.1.mlp.act"] == [] and leaves["blocks.2.ln2"] == []
    assert leaves["blocks.2.mlp.fc"] == [
        "parameters 4,224 -> 16,896",
        "output 2x16x128 -> 2x16x512",
    ]
    parents = own_work("--with-parents")  # the MLP's own code passes the wider tensors on
    assert parents["blocks.2.mlp"][0].startswith("its children's shapes act input 2x16x128 -> ")
    assert parents["blocks.2"] == [] and parents["blocks.1.mlp"] == []
    blocks = own_work("--depth", "2")
    assert blocks["blocks.2"] == ["parameters of its children not profiled 12,704 -> 37,664"]
    assert blocks["blocks.1"] == [] and blocks["tok"] == []
