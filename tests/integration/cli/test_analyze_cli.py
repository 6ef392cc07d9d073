"""`hybridprof analyze` end to end on fixture model files: output, saved plan, and every error."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.cli import main
from hybridprof.datamodel import ProfilePlan
from tests.paths import FIXTURES


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    for name in ("tiny_transformer.py", "resnet_like.py", "stacked_net.py", "layers_lib.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    for name in ("broken_syntax.py", "broken_import.py", "broken_entries.py"):
        shutil.copy(FIXTURES / name, tmp_path / name)
    return tmp_path


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["analyze", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_text_plan_and_default_plan_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([str(workdir / "tiny_transformer.py"), "--verbose"], capsys)
    assert code == 0, err
    assert "plan for TinyTransformer" in out
    assert "out_proj" in out and "never_called" in out
    assert "tiny_transformer.py:41" in out  # dropout's line in __init__
    assert "compat (torch" in out
    saved_file = workdir / "hybridprof-out" / "tiny_transformer.plan.json"  # workdir is the cwd
    saved = ProfilePlan.from_json(saved_file.read_text())
    assert saved.model_file and saved.entry == "build_model"
    assert saved.target("dropout").expected_calls == 0  # type: ignore[union-attr]


def test_json_output_selection_and_with_parents(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = workdir / "plan.json"
    argv = [str(workdir / "resnet_like.py"), "--paths", "layer1.*,fc", "--with-parents"]
    code, out, err = run([*argv, "--format", "json", "-o", str(out_file)], capsys)
    assert code == 0, err
    plan = ProfilePlan.from_json(out)
    assert set(plan.selected_paths()) >= {"layer1.0", "fc", ""}
    assert plan.target("layer1.0.conv1").expected_calls == 1  # type: ignore[union-attr]
    assert plan.target("layer2.0.downsample").expected_calls is None  # type: ignore[union-attr]
    assert json.loads(out_file.read_text())["kind"] == "hybridprof-plan"


def test_replaces_its_own_file_but_yours_only_with_force(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = str(workdir / "stacked_net.py")
    assert run([model], capsys)[0] == 0
    code, out, _ = run([model], capsys)
    assert code == 0 and "replaced hybridprof-out/stacked_net.plan.json" in out
    assert run([model, "-o", "mine.json"], capsys)[0] == 0
    code, _, err = run([model, "-o", "mine.json"], capsys)
    assert code == 2 and "--force" in err
    assert run([model, "-o", "mine.json", "--force"], capsys)[0] == 0


def test_static_only(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run([str(workdir / "stacked_net.py"), "--static-only"], capsys)
    assert code == 0, err
    assert "static-only plan for StackedNet" in out
    assert "Residual" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["missing.py"], "not found"),
        (["broken_syntax.py"], "broken_syntax.py:3:"),
        (["broken_import.py"], "hybridprof_missing_dependency"),
        (["broken_entries.py", "--entry", "nope"], "callables there: build_model"),
        (["broken_entries.py", "--entry", "raising_entry"], "weights file not found"),
        (["broken_entries.py", "--entry", "not_a_module"], "returned dict, not a torch.nn.Module"),
        (["broken_entries.py", "--paths", "wieght"], "no module matches"),
        (["tiny_transformer.py", "--paths", "blocks.0.atn"], "did you mean: blocks.0.attn"),
        (["tiny_transformer.py", "--depth", "x"], "invalid int value"),
    ],
)
def test_errors_are_one_line_exit_2_and_write_nothing(
    workdir: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    before = set(workdir.iterdir())
    code, _out, err = run([str(workdir / args[0]), *args[1:]], capsys)
    assert code == 2
    assert err.startswith("hybridprof: error: ") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err
    assert set(workdir.iterdir()) == before


def test_console_script(workdir: Path) -> None:
    script = Path(sys.executable).with_name("hybridprof")
    result = subprocess.run(
        [str(script), "analyze", str(workdir / "broken_syntax.py")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("hybridprof: error: syntax error in ")
    ok = subprocess.run(
        [str(script), "analyze", str(workdir / "stacked_net.py"), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert ProfilePlan.from_json(ok.stdout).root_class == "StackedNet"
