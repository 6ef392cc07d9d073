"""Regressions found by QA on third-party model code and hostile inputs, each as a small model file.

torchvision/timm/transformers are not in the test venv: each bug is reproduced with plain torch.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hybridprof.cli import main
from hybridprof.files.storage import load_session

QUICK = ["--warmup", "1", "--iters", "2"]


def write_model(folder: Path, body: str, name: str = "model.py") -> Path:
    path = folder / name
    path.write_text("import torch\nfrom torch import nn\n" + textwrap.dedent(body))
    return path


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1, err
    assert err[0].startswith("hybridprof: error: ")
    return err[0]


CHDIR_MODEL = """
    import os
    os.chdir({elsewhere!r})

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)

        def forward(self, x):
            os.chdir({elsewhere!r})
            return self.a(x)

    def build_model():
        os.chdir({elsewhere!r})
        return Net()

    def example_inputs():
        os.chdir({elsewhere!r})
        return torch.rand(2, 4)
"""


def test_model_that_changes_cwd_keeps_relative_outputs_where_the_user_meant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A model file doing os.chdir at import, in its entry and in forward made the relative model
    # path unreadable afterwards (internal FileNotFoundError) and would scatter the outputs.
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    write_model(work, CHDIR_MODEL.format(elsewhere=str(elsewhere)))
    monkeypatch.chdir(work)
    argv = ["run", "model.py", *QUICK, "-o", "s.json", "--report", "r.txt", "--trace", "t.json"]
    assert main(argv) == 0, capsys.readouterr().err
    assert Path(os.getcwd()) == work
    assert sorted(p.name for p in work.iterdir()) == ["model.py", "r.txt", "s.json", "t.json"]
    assert list(elsewhere.iterdir()) == []
    assert load_session(work / "s.json").record("a") is not None


def test_analyze_of_a_model_that_changes_cwd_writes_the_plan_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    write_model(work, CHDIR_MODEL.format(elsewhere=str(elsewhere)))
    monkeypatch.chdir(work)
    assert main(["analyze", "model.py", "-o", "p.json"]) == 0, capsys.readouterr().err
    assert (work / "p.json").is_file()
    assert Path(os.getcwd()) == work


FAST_PATH_MODEL = """
    def build_model():
        layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, batch_first=True)
        return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()

    def example_inputs():
        return torch.rand(2, 5, 8)
"""


def test_fused_fast_path_that_skips_every_leaf_says_what_to_select(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # nn.TransformerEncoder in eval runs one fused op per layer: the default leaves never run and
    # the table was empty with "heaviest: " and no word of why.
    model = write_model(tmp_path, FAST_PATH_MODEL)
    session_file = tmp_path / "s.json"
    assert main(["run", str(model), *QUICK, "--leaves-only", "-o", str(session_file)]) == 0
    out = capsys.readouterr().out
    assert "heaviest: none (no selected layer ran" in out
    warning = next(line for line in out.splitlines() if line.startswith("warning: none of the"))
    assert warning.endswith("--paths layers.0,layers.1 (or --with-parents)")
    assert warning.removeprefix("warning: ") in load_session(session_file).warnings
    assert main(["run", str(model), *QUICK, "--paths", "layers.0,layers.1"]) == 0
    out = capsys.readouterr().out
    assert "heaviest: layers." in out and "warning: none of the" not in out
    # The default selection measures the layers that run the fused op: their rows hold the time.
    assert main(["run", str(model), *QUICK, "-o", str(session_file), "--force"]) == 0
    session = load_session(session_file)
    assert {"", "layers.0", "layers.1"} <= {r.path for r in session.records}


ENTRIES = """
    def klass():
        return nn.Linear

    def exits():
        raise SystemExit(3)

    def build_model():
        return nn.Linear(8, 4)

    def example_inputs():
        return torch.rand(2, 8)
"""


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--entry", "klass"], "klass() returned the class Linear, not an instance; return Linear"),
        (["--entry", "exits"], "exits() raised SystemExit: 3; fix exits in the model file"),
        (["--input-shape", "2,5"], "(2x5 and 8x4); check that the inputs fit the model"),
    ],
)
def test_entry_and_input_mistakes_name_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], expected: str
) -> None:
    model = write_model(tmp_path, ENTRIES)
    assert main(["run", str(model), *QUICK, *extra]) in (2, 3)
    assert expected in one_error_line(capsys)


def test_binary_model_file_names_the_fix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "model.py"
    model.write_bytes(b"\x7fELF\x02\x01\x01\x00\xd0\xff\xfe")
    assert main(["run", str(model)]) == 2
    assert "give a UTF-8 Python source file" in one_error_line(capsys)


def test_static_only_on_a_file_that_defines_no_module_says_to_drop_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # e.g. `return torchvision.models.resnet18(weights=None)`: no class in the file to read
    model = write_model(tmp_path, "def build_model():\n    return nn.Sequential(nn.Linear(2, 2))\n")
    assert main(["analyze", str(model), "--static-only", "-o", str(tmp_path / "p.json")]) == 2
    assert "drop --static-only to build the model" in one_error_line(capsys)
    assert not (tmp_path / "p.json").exists()


def test_with_parents_profiles_the_fused_layers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_model(tmp_path, FAST_PATH_MODEL)
    session_file = tmp_path / "s.json"
    assert main(["run", str(model), *QUICK, "--with-parents", "-o", str(session_file)]) == 0
    session = load_session(session_file)
    assert {"layers.0", "layers.1"} <= {r.path for r in session.records}
    # a busy machine may take an iteration out (said in a line); nothing else may warn
    assert [w for w in session.warnings if "to other processes" not in w] == []
    printed = capsys.readouterr().out.splitlines()
    # the stability verdict and the excluded iterations may warn on a busy machine; nothing else
    busy = ("noisy", "to other processes")
    assert not [w for w in printed if w.startswith("warning:") and not any(b in w for b in busy)]


ATTENTION_MODEL = """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(8, 2, batch_first=True)
            self.head = nn.Linear(8, 2)

        def forward(self, x):
            y, _ = self.attn(x, x, x, need_weights=False)
            return self.head(y)

    def build_model():
        return Net()

    def example_inputs():
        return torch.rand(2, 5, 8)
"""


def test_attention_whose_out_proj_never_runs_has_its_row_with_leaves_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # torchvision's ViT: MultiheadAttention uses out_proj's weights, never calls it; with leaves
    # selected, attention time was in no row. The attention is selected as a leaf in effect.
    model = write_model(tmp_path, ATTENTION_MODEL)
    session_file = tmp_path / "s.json"
    for selection in (["--leaves-only"], ["--leaves-only", "--with-parents"], []):
        assert (
            main(["run", str(model), *QUICK, *selection, "-o", str(session_file), "--force"]) == 0
        )
        assert "(outside modules), in no layer's row" not in capsys.readouterr().out
        record = load_session(session_file).record("attn")
        assert record is not None and record.calls == 2 and record.self_cpu_us.median > 0


def test_with_parents_and_a_plan_conflict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_model(tmp_path, ATTENTION_MODEL)
    plan = tmp_path / "p.json"
    assert main(["analyze", str(model), "-o", str(plan)]) == 0
    capsys.readouterr()
    assert main(["run", str(model), "--plan", str(plan), "--with-parents"]) == 2
    assert "drop --paths/--depth/--leaves-only/--with-parents" in one_error_line(capsys)


NOISY_MODEL = """
    print("noise at import")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(4, 4)

        def forward(self, x):
            print("noise in forward")
            return self.a(x)

    def build_model():
        print("noise in build_model")
        return Net()

    def example_inputs():
        return torch.rand(2, 4)
"""


def test_model_prints_go_to_stderr_so_json_on_stdout_stays_parseable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = write_model(tmp_path, NOISY_MODEL)
    plan_file = tmp_path / "p.json"
    assert main(["analyze", str(model), "--format", "json", "-o", str(plan_file)]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["kind"] == "hybridprof-plan"
    assert "noise at import" in captured.err and "noise in build_model" in captured.err
    assert main(["run", str(model), *QUICK]) == 0
    captured = capsys.readouterr()
    assert "noise" not in captured.out
    assert "noise in forward" in captured.err
    table = [line for line in captured.out.splitlines() if not line.startswith("warning: ")]
    assert table[0].startswith("Module")  # (a noisy run's warning comes above the table)


def test_analyze_into_a_closed_pipe_is_quiet(tmp_path: Path) -> None:
    # `hybridprof analyze net.py --format json | head -1` said "internal error: BrokenPipeError"
    model = write_model(
        tmp_path,
        "def build_model():\n    return nn.Sequential(*[nn.Linear(1, 1) for _ in range(300)])\n",
    )
    command = (
        f"{shlex.quote(sys.executable)} -m hybridprof analyze {shlex.quote(str(model))} "
        f"--format json -o {shlex.quote(str(tmp_path / 'p.json'))} | head -c 10"
    )
    done = subprocess.run(
        ["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, timeout=120
    )
    assert done.stdout.startswith("{")
    assert done.stderr == ""
    assert done.returncode == 0
    assert (tmp_path / "p.json").is_file()


TWO_HEADS_MODEL = """
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Linear(4, 4)
            self.pooler = nn.Linear(4, 4)

        def forward(self, x):
            hidden = self.body(x)
            return {"last_hidden_state": hidden, "pooler_output": self.pooler(hidden[:, 0])}

    def build_model():
        return Net()

    def example_inputs():
        return torch.rand(2, 3, 4)
"""


def test_backward_runs_through_every_output_not_only_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # BERT returns (last_hidden_state, pooler_output): the pooler had 0 backward time
    model = write_model(tmp_path, TWO_HEADS_MODEL)
    session_file = tmp_path / "s.json"
    assert main(["run", str(model), *QUICK, "--backward", "-o", str(session_file)]) == 0
    pooler = load_session(session_file).record("pooler")
    assert pooler is not None and pooler.backward_self_cpu_us is not None
    assert pooler.backward_self_cpu_us.median > 0
