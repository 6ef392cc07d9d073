"""`hybridprof run` in-process: outputs, options, and every error case with its exit code and
line."""

from __future__ import annotations

import hashlib
import io
import json
import sys
from pathlib import Path

import pytest
import torch

from hybridprof.cli import main
from hybridprof.cli.progress import ProgressBar, wanted
from hybridprof.datamodel import ProfileSession
from hybridprof.files.storage import load_session
from hybridprof.planner.module_tree import tree_plan
from tests.paths import FIXTURES

SMALL = FIXTURES / "run_small.py"
QUICK = ["--warmup", "1", "--iters", "2"]


def fixture_module(path: Path) -> object:
    """The module the loader imported for `path` (so a test can reach the models it built)."""
    return next(m for m in list(sys.modules.values()) if getattr(m, "__file__", None) == str(path))


def one_error_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "Traceback" not in err[0]
    return err[0]


def test_demo_writes_session_and_report_and_reruns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["run", *QUICK]) == 0
    out = capsys.readouterr().out
    folder = tmp_path / "hybridprof-out"
    assert (folder / "session.json").is_file() and (folder / "report.html").is_file()
    assert "features" in out and "avgpool" in out and "classifier" in out
    assert "session: hybridprof-out/session.json" in out
    assert "report:  hybridprof-out/report.html" in out
    session = load_session(folder / "session.json")
    assert session.plan.root_class == "AlexNet" and session.iterations == 2
    assert main(["run", *QUICK]) == 0  # its own files in its own folder are overwritten


def test_model_file_outputs_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    reports = [tmp_path / f"r.{ext}" for ext in ("txt", "csv", "json", "html")]
    argv = ["run", str(SMALL), *QUICK, "-o", str(tmp_path / "s.json")]
    for report in reports:
        argv += ["--report", str(report)]
    assert main(argv) == 0
    assert all(r.is_file() and r.stat().st_size > 0 for r in reports)
    session = load_session(tmp_path / "s.json")
    assert session.model_file == str(SMALL)
    assert session.model_hash == hashlib.sha256(SMALL.read_bytes()).hexdigest()
    assert session.command[:3] == ("hybridprof", "run", str(SMALL))
    assert session.environment.torch_version == torch.__version__
    fc = session.record("features.0.fc")
    assert fc is not None and fc.input_shapes == ("8x32",) and fc.output_shapes == ("8x32",)
    assert fc.calls == 2 and len(session.iteration_cpu_us) == 2
    assert session.never_called == ("spare",)
    assert any(f.kind == "never_called" and f.path == "spare" for f in session.plan.findings)
    out = capsys.readouterr().out
    assert "fc" in out and f"session: {tmp_path / 's.json'}" in out


def test_inputs_function_shape_and_selection(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    argv = ["run", str(SMALL), *QUICK, "--inputs", "other_inputs", "--paths", "features.?,norm"]
    assert main([*argv, "-o", str(out)]) == 0
    session = load_session(out)
    assert {r.path for r in session.records} == {"features.0", "features.1", "norm"}
    norm = session.record("norm")
    assert norm is not None and norm.input_shapes == ("2x32",)
    shaped = tmp_path / "shaped.json"
    argv = ["run", str(SMALL), *QUICK, "--input-shape", "3,32", "--depth", "1", "-o", str(shaped)]
    assert main(argv) == 0
    assert {r.path for r in load_session(shaped).records} == {"features", "norm", "classifier"}


def test_backward_option(tmp_path: Path) -> None:
    out = tmp_path / "train.json"
    assert main(["run", str(SMALL), *QUICK, "--backward", "-o", str(out)]) == 0
    session = load_session(out)
    assert session.backward
    for record in session.records:
        assert record.backward_self_cpu_us is not None, record.path
    model = fixture_module(SMALL).BUILT[-1]  # type: ignore[attr-defined]
    assert not model.training and all("forward" not in m.__dict__ for m in model.modules())


def test_plan_file_selects_and_other_models_plan_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from torch import nn

    plan_file = tmp_path / "plan.json"
    plan = tree_plan(nn.Sequential(nn.Linear(2, 2)), paths=["0"])
    plan_file.write_text(plan.to_json())
    assert main(["run", str(SMALL), *QUICK, "--plan", str(plan_file)]) == 2
    assert (
        "the plan's path '0' is not in this model (SmallNet, the plan was made for Sequential)"
        in one_error_line(capsys)
    )
    from hybridprof.files.loader import load_model

    good = tree_plan(load_model(SMALL).module, paths=["classifier.0", "norm"])
    plan_file.write_text(good.to_json())
    out = tmp_path / "s.json"
    assert main(["run", str(SMALL), *QUICK, "--plan", str(plan_file), "-o", str(out)]) == 0
    assert {r.path for r in load_session(out).records} == {"classifier.0", "norm"}


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["--input-shape", "1,a,3"], 2, "bad --input-shape '1,a,3': give positive integers"),
        (["--input-shape", "2,32:complex"], 2, "unknown dtype 'complex'"),
        (["--iters", "0"], 2, "--iters must be 1 or more, got 0"),
        (["--paths", "featurez.0"], 2, "no module matches 'featurez.0'; did you mean: features.0"),
        (["--report", "out.docx"], 2, "report 'out.docx' has '.docx'"),
        (["--strategy", "timer", "--backward"], 2, "--backward needs --strategy session"),
        (["--device", "tpu"], 2, "--device 'tpu' is not supported"),
        (["--bogus"], 2, "unrecognized arguments: --bogus"),
        (["--entry", "nothing_here"], 2, "entry 'nothing_here' not found in run_small.py"),
    ],
)
def test_usage_errors(
    argv: list[str], code: int, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", str(SMALL), *QUICK, *argv]) == code
    line = one_error_line(capsys)
    assert line.startswith("hybridprof: error: ") and message in line


def test_missing_model_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "no_such_model.py"]) == 2
    assert "model file 'no_such_model.py' not found" in one_error_line(capsys)


def test_no_inputs_says_how_to_give_them(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(FIXTURES / "run_no_inputs.py"), *QUICK]) == 2
    line = one_error_line(capsys)
    assert "no inputs for the model in run_no_inputs.py: give --input-shape" in line
    assert "example_inputs()" in line


def test_forward_failure_names_layer_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "s.json"
    argv = ["run", str(FIXTURES / "run_bad_shape.py"), *QUICK, "-o", str(out)]
    assert main(argv) == 3
    assert one_error_line(capsys) == (
        "hybridprof: error: forward failed in classifier.0 (Linear): "
        "mat1 and mat2 shapes cannot be multiplied (4x32 and 64x10); "
        "check that the inputs fit the model"
    )
    assert list(tmp_path.iterdir()) == []
    for warmup in ("0", "1"):  # the failure in a measured and in a warm-up iteration
        trace = tmp_path / "trace.json"
        argv = [
            "run",
            str(FIXTURES / "run_bad_shape.py"),
            "--warmup",
            warmup,
            "--trace",
            str(trace),
        ]
        assert main(argv) == 3
        assert list(tmp_path.iterdir()) == []


def test_debug_shows_the_traceback(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(FIXTURES / "run_bad_shape.py"), *QUICK, "--debug"]) == 3
    err = capsys.readouterr().err
    assert "Traceback" in err and "mat1 and mat2 shapes" in err


def test_output_checked_before_any_model_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # the bad-shape model would fail with exit 3; the output problem must be found first
    bad = str(FIXTURES / "run_bad_shape.py")
    assert main(["run", bad, "-o", str(tmp_path / "missing" / "s.json")]) == 2
    assert "folder" in one_error_line(capsys)
    existing = tmp_path / "s.json"
    existing.write_text("keep me")
    assert main(["run", bad, "--report", str(existing)]) == 2
    assert "exists; pass --force" in one_error_line(capsys)
    assert existing.read_text() == "keep me"
    assert main(["run", bad, "-o", str(existing), "--report", str(existing), "--force"]) == 2
    assert "given as two outputs" in one_error_line(capsys)


def test_pdf_without_weasyprint_fails_before_the_model_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "weasyprint", None)  # as if not installed: import fails
    bad = str(FIXTURES / "run_bad_shape.py")  # would fail with exit 3 if it ran
    assert main(["run", bad, "--report", str(tmp_path / "r.pdf")]) == 4
    assert "PDF reports need the weasyprint package" in one_error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_force_overwrites(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    out.write_text("old")
    assert main(["run", str(SMALL), *QUICK, "-o", str(out), "--force"]) == 0
    assert json.loads(out.read_text())["kind"] == "hybridprof-session"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_without_cuda(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SMALL), "--device", "cuda"]) == 2
    assert "CUDA is not available" in one_error_line(capsys)


def test_ctrl_c_saves_partial_session_and_restores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = FIXTURES / "run_interrupt.py"
    out = tmp_path / "s.json"
    assert main(["run", str(path), "--warmup", "1", "--iters", "10", "-o", str(out)]) == 130
    err = capsys.readouterr().err
    assert f"interrupted after 2 of 10 iterations; partial session saved to {out}" in err
    session = ProfileSession.from_json(out.read_text())
    assert session.interrupted and session.iterations == 2
    model = fixture_module(path).BUILT[-1]  # type: ignore[attr-defined]
    assert all("forward" not in m.__dict__ for m in model.modules())


@pytest.mark.parametrize("strategy", ["timer", "per-call"])
def test_other_strategies_are_named_in_the_session(strategy: str, tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert main(["run", str(SMALL), *QUICK, "--strategy", strategy, "-o", str(out)]) == 0
    session = load_session(out)
    assert session.strategy == strategy
    fc = session.record("features.0.fc")
    assert fc is not None and fc.calls == 2 and fc.self_cpu_us.median > 0


def test_memory_and_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, trace = tmp_path / "s.json", tmp_path / "trace.json"
    argv = ["run", str(SMALL), *QUICK, "--profile-memory", "--trace", str(trace), "-o", str(out)]
    assert main(argv) == 0
    session = load_session(out)
    assert session.profile_memory and session.trace_file == str(trace)
    fc = session.record("features.0.fc")
    assert fc is not None and fc.cpu_mem > 0  # the Linear allocates its 8x32 output
    events = json.loads(trace.read_text())["traceEvents"]
    assert any(e.get("name") == "features.0.fc" for e in events)
    assert f"trace:   {trace}" in capsys.readouterr().out


def test_big_model_table_is_depth_limited(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model_file = tmp_path / "run_deep.py"
    model_file.write_text(
        "import torch\nfrom torch import nn\n\n"
        "def build_model():\n"
        "    block = lambda: nn.Sequential(nn.Linear(4, 4), nn.ReLU())\n"
        "    return nn.Sequential(*[nn.Sequential(block(), block()) for _ in range(12)])\n\n"
        "def example_inputs():\n    return (torch.rand(1, 4),)\n"
    )
    assert main(["run", str(model_file), "--warmup", "0", "--iters", "1"]) == 0
    out = capsys.readouterr().out
    table, rest = out.split("\n(the ", 1)
    said = ("warning: ", "hybridprof: ")  # the noise verdict, the default threads line
    table = "\n".join(line for line in table.splitlines() if not line.startswith(said))
    assert len(table.splitlines()) <= 40 + 2  # rows, header and rule
    kept, _, tail = rest.partition(" heaviest of ")
    # every module runs a forward: 12 x (block, 2 x (pair, Linear, ReLU)) and the root
    assert tail.startswith("85 profiled layers") and int(kept) >= 10
    measured = [line for line in table.splitlines() if line.endswith("| 1")]
    assert len(measured) >= int(kept)  # each kept layer shows its figures, and so do its parents


def test_ctrl_c_during_warmup_saves_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = FIXTURES / "run_interrupt.py"  # interrupts on the 4th call: here a warm-up one
    out = tmp_path / "s.json"
    assert main(["run", str(path), "--warmup", "5", "--iters", "3", "-o", str(out)]) == 130
    assert "interrupted before a measured iteration finished; nothing saved" in one_error_line(
        capsys
    )
    assert not out.exists()
    model = fixture_module(path).BUILT[-1]  # type: ignore[attr-defined]
    assert all("forward" not in m.__dict__ for m in model.modules())


def test_analyze_then_run_the_plan_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan_file, out = tmp_path / "plan.json", tmp_path / "s.json"
    assert (
        main(
            [
                "analyze",
                str(SMALL),
                "--paths",
                "norm",
                "--paths",
                "classifier.?",
                "-o",
                str(plan_file),
            ]
        )
        == 0
    )
    data = json.loads(plan_file.read_text())
    data["torch_version"] = "1.13.1"  # as if planned on another machine
    plan_file.write_text(json.dumps(data))
    capsys.readouterr()
    # no model argument: the plan names its model file and entry
    assert main(["run", "--plan", str(plan_file), *QUICK, "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "warning: the plan was made with torch 1.13.1" in printed
    session = load_session(out)
    assert {r.path for r in session.records} == {
        "norm",
        "classifier.0",
        "classifier.1",
        "classifier.2",
    }
    assert session.plan.torch_version == torch.__version__
    assert any("torch 1.13.1" in w for w in session.warnings)


def test_default_plan_carries_static_findings(tmp_path: Path) -> None:
    out = tmp_path / "s.json"
    assert main(["run", str(SMALL), *QUICK, "-o", str(out)]) == 0
    plan = load_session(out).plan
    assert plan.model_file == str(SMALL) and plan.entry == "build_model"
    assert plan.classes  # libcst read SmallNet's and Block's source
    target = plan.target("features.0.fc")
    assert target is not None and target.source is not None


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_draws_only_on_a_terminal() -> None:
    assert wanted(FakeTerminal()) and not wanted(io.StringIO())
    screen = FakeTerminal()
    with ProgressBar(True, stream=screen) as bar:
        for done in range(3):
            bar("warmup", done, 2)
        for done in range(4):
            bar("measure", done, 3)
    drawn = screen.getvalue()
    assert "warm-up (not measured)" in drawn and "profiling" in drawn
    assert "3/3" in drawn and "elapsed" in drawn and "eta" in drawn
    silent = io.StringIO()
    with ProgressBar(False, stream=silent) as bar:
        bar("measure", 1, 3)
    assert silent.getvalue() == ""
