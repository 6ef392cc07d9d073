"""The Lightning callback on a tiny LightningModule (accumulation and clipping on)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hybridprof
from hybridprof.files.storage import load_session
from tests.paths import ROOT

pl = pytest.importorskip("lightning.pytorch")


class Tiny(pl.LightningModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def fit(out: Path, callbacks: list[Any]) -> tuple[Tiny, dict[str, torch.Tensor]]:
    pl.seed_everything(0, verbose=False)
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(128, 16, generator=generator), torch.randint(0, 4, (128,), generator=generator)
    )
    module = Tiny()
    trainer = pl.Trainer(
        max_steps=8,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(out),
        accumulate_grad_batches=2,
        gradient_clip_val=1.0,
        callbacks=callbacks,
    )
    trainer.fit(module, torch.utils.data.DataLoader(data, batch_size=8))
    return module, {k: v.detach().clone() for k, v in module.state_dict().items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from hybridprof.integrations.lightning import HybridprofCallback

    folder = tmp_path_factory.mktemp("lightning")
    callback = HybridprofCallback(hybridprof.schedule(wait=1, warmup=2, active=4), reports=("txt",))
    _, profiled = fit(folder / "with", [callback])
    _, bare = fit(folder / "without", [])
    return {"callback": callback, "profiled": profiled, "bare": bare, "out": folder}


def test_the_callback_writes_a_session_with_backward_and_optimizer(runs: dict[str, Any]) -> None:
    folder = runs["out"] / "with" / "hybridprof"
    session = load_session(folder / "session.json")
    assert session.iterations == 4 and session.steps == 8
    for path in ("net.0", "net.2"):
        record = session.record(path)
        assert record is not None and record.backward_self_cpu_us is not None
        assert record.backward_self_cpu_us.min > 0 and record.calls == 2 * 4  # 2 batches a step
    assert session.optimizer is not None and session.optimizer.calls == 4
    assert {p.name for p in session.optimizer.parts} >= {"step", "clip_grad", "zero_grad"}
    # the forward and backward ran in the closure inside optimizer.step: not the optimizer's
    assert "aten::addmm" not in {op.name for op in session.optimizer.ops}
    report = (folder / "report.txt").read_text(encoding="utf-8")
    assert "(optimizer)" in report and "Self CPU (backward)" in report


def test_training_is_bitwise_unchanged(runs: dict[str, Any]) -> None:
    bare, profiled = runs["bare"], runs["profiled"]
    assert all(torch.equal(bare[k], profiled[k]) for k in bare)


def test_the_module_imports_nothing_of_lightning_until_used() -> None:
    code = (
        "import sys, hybridprof.integrations.lightning\n"
        "assert 'lightning' not in sys.modules and 'torch' not in sys.modules\n"
    )
    root = ROOT
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
