"""The README's sample output is what `hybridprof run` prints: the same table header, row names
and lines in the same order (the figures are a real run's, so they differ run to run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from hybridprof.cli import main
from tests.integration.project.test_docs_commands import blocks_of
from tests.paths import ROOT

README = ROOT / "README.md"


def sample_and_model() -> tuple[str, str]:
    blocks = blocks_of(README)
    model = next(b.text for b in blocks if b.marks.get("file") == "net.py")
    sample = next(b.text for b in blocks if b.language == "text" and "Module " in b.text)
    return sample, model


def shape(text: str) -> list[str]:
    """Each line with its figures blanked: what every run prints alike. Lines a run prints only
    when it has something to say (a warning, the median iteration where it is over 5% off the
    headline: a busy machine's) are left out of both."""
    conditional = ("warning: ", "the median iteration took ")
    lines = [line for line in text.splitlines() if not line.startswith(conditional)]
    # a figure with its interval, in each form an interval takes: ±5%, lopsided -0.6% +30%, or
    # a range where it is wider than the figure, (39.000us to 15.000ms)
    interval = r"( ±\d+(\.\d+)?%| -\d+(\.\d+)?% \+\d+(\.\d+)?%| \(\S+ to \S+\))?"
    figure = re.compile(r"\d+(\.\d+)?(us|ms|s|%)?" + interval)
    blanked = [figure.sub("N", re.sub(r"-{2,}", "-", line)) for line in lines]  # widths vary
    # which layers are the heaviest three depends on the figures too (the root or a ReLU third)
    blanked = [re.sub(r"heaviest: .*", "heaviest: ...", line) for line in blanked]
    return [re.sub(r"\s+", " ", line).strip() for line in blanked]


def test_the_readme_sample_is_what_run_prints(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    sample, model = sample_and_model()
    (tmp_path / "net.py").write_text(model)
    monkeypatch.chdir(tmp_path)
    assert main(["run", "net.py", "--report", "net.html", "--threads", "1"]) == 0
    printed = capsys.readouterr().out
    assert shape(printed) == shape(sample)
