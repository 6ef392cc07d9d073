"""`--compare-eager`'s report of its own, on a real compile (inductor on the CPU): a block that
compiling makes slower is named slower, the others' speed-ups are not taken out as a run-wide
shift, and the page, the JSON and the terminal state the same headline."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.diff.speedup import SpeedupResult, SpeedupSummary
from hybridprof.reporting import write_speedup_report
from hybridprof.reporting.text.speedup_text import headline_text, render_speedup

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


class Block(nn.Module):
    def __init__(self, width: int, slower_compiled: bool = False) -> None:
        super().__init__()
        self.fc = nn.Linear(width, width)
        self.act = nn.GELU()
        self.slower_compiled = slower_compiled
        self.register_buffer("extra", torch.randn(width, 4096))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.fc(x))
        if self.slower_compiled and torch.compiler.is_compiling():
            # work the compiled code alone does (a user's compile-only branch): this block must
            # read slower compiled than eager, whatever the rest gained
            y = y + torch.tanh(x @ self.extra).mean(dim=1, keepdim=True)
        return y


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(64), Block(64, slower_compiled=True), Block(64))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(x)


def test_a_block_made_slower_in_the_compiled_code_only_is_named_slower(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = Net().eval()
    result = hybridprof.profile(
        model, torch.randn(32, 64), compile=True, compare_eager=True, warmup=2, iters=8, threads=1
    )
    assert isinstance(result, SpeedupResult)
    summary = result.summary()
    rows = {row.path: row for row in summary.rows}
    slowed = rows["blocks.1"]
    assert slowed.verdict == "slower", render_speedup(summary)
    assert slowed.speedup is not None and slowed.speedup < 0.5
    assert slowed.interval is not None and slowed.interval[1] < 1.0
    assert summary.compiled.threads == summary.eager.threads == 1  # what the model ran with
    # one headline in the terminal, the page and the JSON
    page = write_speedup_report(result, tmp_path / "cmp.html")
    saved = write_speedup_report(result, tmp_path / "cmp.json")
    headline = headline_text(summary)
    assert headline in render_speedup(summary)
    assert headline.removeprefix("iteration (median): ") in page.read_text()
    assert SpeedupSummary.from_json(saved.read_text()) == summary
