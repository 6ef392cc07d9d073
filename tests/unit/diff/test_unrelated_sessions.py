"""`diff` of runs of different models: said first, and no layer of one is paired with a layer of
the other unless asked (`--match-across-models`)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from hybridprof.cli import main
from hybridprof.datamodel import ProfileSession
from hybridprof.diff import diff_sessions
from tests.unit.diff.test_sessions import run


def other_model(session: ProfileSession, root: str = "ConvNet") -> ProfileSession:
    return replace(session, plan=replace(session.plan, root_class=root))


def test_runs_of_different_models_share_no_layer() -> None:
    diff = diff_sessions(run(1), other_model(run(2, heavier={"fc2": 1.4})))
    assert {layer.match for layer in diff.layers} == {"removed", "added"}
    assert not any(layer.verdict in ("slower", "faster") for layer in diff.layers)
    assert diff.warnings[0].startswith(
        "the runs profile different models (base Net, new ConvNet): no layer is compared"
    )
    assert "--match-across-models" in diff.warnings[0]


def test_asked_to_they_are_paired_with_the_warning_first() -> None:
    diff = diff_sessions(run(1), other_model(run(2, heavier={"fc2": 1.4})), across_models=True)
    assert {layer.match for layer in diff.layers} == {"path"}
    assert {layer.path: layer.verdict for layer in diff.layers}["fc2"] == "slower"
    assert diff.warnings[0].startswith("the runs profile different models (base Net, new ConvNet)")


def test_a_model_that_differs_in_most_layers_is_said_first() -> None:
    renamed = run(2, rename={"fc1": "enc.0", "act": "enc.1", "fc2": "head"})
    diff = diff_sessions(run(1), renamed)
    assert diff.warnings[0] == (
        "the models differ in most layers: only 0 of 3 layer paths are in both runs; layers "
        "paired by class and position may be unrelated"
    )
    assert not any("differ in most" in w for w in diff_sessions(run(1), run(2)).warnings)


def test_the_command_line_says_it_and_takes_the_option(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(run(1).to_json())
    new.write_text(other_model(run(2, heavier={"fc2": 1.4})).to_json())
    assert main(["diff", str(base), str(new), "--fail-on-regression", "--all"]) in (0, 1)
    out = capsys.readouterr().out
    assert "the runs profile different models (base Net, new ConvNet)" in out
    assert "fc2 [Linear, matched by path]" not in out
    main(["diff", str(base), str(new), "--match-across-models", "--all"])
    assert "layers are paired across them" in capsys.readouterr().out
