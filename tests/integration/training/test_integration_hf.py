"""The Hugging Face Trainer callback on a tiny GPT-2 from a config (no download)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

import hybridprof
from hybridprof.files.storage import load_session
from tests.paths import ROOT
from tests.training_loops import linears

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")


class Tokens(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self) -> None:
        self.ids = torch.randint(0, 100, (32, 16), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def fit(out: Path, callbacks: list[Any]) -> tuple[torch.nn.Module, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, bos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(out),
        max_steps=8,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        max_grad_norm=1.0,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(), callbacks=callbacks
    )
    trainer.train()
    return model, {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from hybridprof.integrations.hf import HybridprofCallback

    folder = tmp_path_factory.mktemp("hf")
    callback = HybridprofCallback(hybridprof.schedule(wait=1, warmup=2, active=4))
    model, profiled = fit(folder / "with", [callback])
    _, bare = fit(folder / "without", [])
    return {"callback": callback, "model": model, "profiled": profiled, "bare": bare, "out": folder}


def test_the_callback_writes_a_session_with_backward_and_optimizer(runs: dict[str, Any]) -> None:
    folder = runs["out"] / "with" / "hybridprof"
    assert sorted(p.name for p in folder.iterdir()) == ["report.html", "session.json"]
    session = load_session(folder / "session.json")
    assert session.iterations == 4 and session.steps == 8 and session.warmup == 2
    for path in linears(runs["model"]):
        record = session.record(path)
        assert record is not None and record.backward_self_cpu_us is not None, path
        assert record.backward_self_cpu_us.min > 0, path
    assert session.optimizer is not None and session.optimizer.classes == ("AdamW",)
    parts = {p.name for p in session.optimizer.parts}
    assert {"step", "clip_grad", "zero_grad"} <= parts  # Trainer zeroes with model.zero_grad()
    assert "(optimizer)" in (folder / "report.html").read_text(encoding="utf-8")
    assert runs["callback"].files == [folder / "session.json", folder / "report.html"]


def test_training_is_bitwise_unchanged(runs: dict[str, Any]) -> None:
    bare, profiled = runs["bare"], runs["profiled"]
    assert bare.keys() == profiled.keys()
    assert all(torch.equal(bare[k], profiled[k]) for k in bare)


def test_the_module_imports_nothing_of_transformers_until_used() -> None:
    code = (
        "import sys, hybridprof.integrations.hf\n"
        "assert 'transformers' not in sys.modules and 'torch' not in sys.modules\n"
    )
    root = ROOT
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
