"""The trainer callbacks write under the same rule as `run`: the names they pick (session.json,
report.<ext> in <run>/hybridprof/) are replaced only over files hybridprof wrote, never through a
symlink; a file of the user's there needs `overwrite=True`; what cannot be written is refused as
a typed error before training starts, or said in one line after it, never raised out of train()."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hybridprof
from hybridprof.errors import OutputError
from hybridprof.files.storage import load_session

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

SCHEDULE = hybridprof.schedule(wait=1, warmup=1, active=2)


class Regressor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 1))

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        return {"loss": F.mse_loss(self.net(x).squeeze(-1), y)}


class Points(torch.utils.data.Dataset[dict[str, torch.Tensor]]):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x, self.y = (
            torch.randn(32, 8, generator=generator),
            torch.randn(32, generator=generator),
        )

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"x": self.x[i], "y": self.y[i]}


def hf_train(out: Path, callbacks: list[Any], model: nn.Module | None = None) -> nn.Module:
    torch.manual_seed(0)
    model = model or Regressor()
    args = transformers.TrainingArguments(
        output_dir=str(out),
        max_steps=5,
        per_device_train_batch_size=4,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=Points(), callbacks=callbacks
    )
    trainer.train()
    return model


def hf_callback(**options: Any) -> Any:
    from hybridprof.integrations.hf import HybridprofCallback

    return HybridprofCallback(SCHEDULE, **options)


def one_line(error: BaseException) -> str:
    text = str(error)
    assert "\n" not in text and text
    return text


def test_a_symlink_at_an_own_name_is_refused_before_training(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "hybridprof"
    folder.mkdir(parents=True)
    outside = tmp_path / "precious.json"
    outside.write_text("keep me", encoding="utf-8")
    os.symlink(outside, folder / "session.json")
    os.symlink(tmp_path / "created-through-link.html", folder / "report.html")
    callback = hf_callback()
    with pytest.raises(OutputError) as refused:
        hf_train(tmp_path / "run", [callback])
    assert "symbolic link" in one_line(refused.value)
    assert outside.read_text(encoding="utf-8") == "keep me"
    assert not (tmp_path / "created-through-link.html").exists()
    assert callback.session is None  # refused before training: nothing measured


def test_the_users_own_files_need_overwrite(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "hybridprof"
    folder.mkdir(parents=True)
    (folder / "report.html").write_text("<p>my notes</p>", encoding="utf-8")
    with pytest.raises(OutputError) as refused:
        hf_train(tmp_path / "run", [hf_callback()])
    assert "overwrite=True" in one_line(refused.value)
    assert (folder / "report.html").read_text(encoding="utf-8") == "<p>my notes</p>"
    callback = hf_callback(overwrite=True)
    hf_train(tmp_path / "run", [callback])
    assert "hybridprof" in (folder / "report.html").read_text(encoding="utf-8")
    assert load_session(folder / "session.json").iterations == 2


def test_a_second_run_replaces_its_own_files_in_every_format(tmp_path: Path) -> None:
    reports = ("html", "txt", "csv", "json", "pdf")
    for _ in range(2):
        callback = hf_callback(reports=reports)
        hf_train(tmp_path / "run", [callback])
        assert len(callback.files) == 1 + len(reports)


def test_a_file_where_the_folder_goes_is_a_typed_error_before_training(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "hybridprof").write_text("a file of mine", encoding="utf-8")
    model = Regressor()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(OutputError) as refused:
        hf_train(tmp_path / "run", [hf_callback()], model)
    assert "not a folder" in one_line(refused.value)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # no training


class PlantLinks(transformers.TrainerCallback):  # type: ignore[misc]
    """Plants a symlink at the session's name while training runs (after the start's check)."""

    def __init__(self, folder: Path, target: Path) -> None:
        self.folder, self.target = folder, target

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        if not os.path.lexists(self.folder / "session.json"):
            os.symlink(self.target, self.folder / "session.json")


def test_an_output_that_fails_after_training_is_one_line_not_an_exception(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    outside = tmp_path / "precious.json"
    outside.write_text("keep me", encoding="utf-8")
    folder = tmp_path / "run" / "hybridprof"
    callback = hf_callback()
    hf_train(tmp_path / "run", [callback, PlantLinks(folder, outside)])  # returns: no raise
    assert outside.read_text(encoding="utf-8") == "keep me"
    lines = [line for line in capsys.readouterr().err.splitlines() if "hybridprof:" in line]
    assert len(lines) == 1 and "symbolic link" in lines[0] and "not written" in lines[0]
    assert callback.session is not None and callback.files == []


class Boom(RuntimeError):
    pass


class FailsAtStep(Regressor):
    def __init__(self, step: int) -> None:
        super().__init__()
        self.calls, self.fail_at = 0, step

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> dict[str, torch.Tensor]:
        self.calls += 1
        if self.calls == self.fail_at:
            raise Boom("the model failed")
        return super().forward(x, y)


def test_a_train_that_raises_in_a_measured_step_leaves_nothing_behind(tmp_path: Path) -> None:
    import gc

    model = FailsAtStep(step=3)  # wait 1, warm-up 1: the third step is measured
    forwards = {m: m.forward for m in model.modules()}
    gc_was = gc.isenabled()
    callback = hf_callback()
    with pytest.raises(Boom):
        hf_train(tmp_path / "run", [callback], model)
    assert callback.steps.profile is None  # closed at once, not at the next train()
    assert all(m.forward == f for m, f in forwards.items())
    assert all("forward" not in vars(m) for m in model.modules())
    assert gc.isenabled() == gc_was
    assert torch.autograd.profiler._is_profiler_enabled is False
    assert not (tmp_path / "run" / "hybridprof").exists()


pl = pytest.importorskip("lightning.pytorch")


class Tiny(pl.LightningModule):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], index: int) -> torch.Tensor:
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=1e-2)


def lightning_fit(out: Path, callbacks: list[Any]) -> None:
    generator = torch.Generator().manual_seed(0)
    data = torch.utils.data.TensorDataset(
        torch.randn(64, 8, generator=generator), torch.randint(0, 2, (64,), generator=generator)
    )
    trainer = pl.Trainer(
        max_steps=5,
        accelerator="cpu",
        devices=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(out),
        callbacks=callbacks,
    )
    trainer.fit(Tiny(), torch.utils.data.DataLoader(data, batch_size=8))


def lightning_callback(**options: Any) -> Any:
    from hybridprof.integrations.lightning import HybridprofCallback

    return HybridprofCallback(SCHEDULE, **options)


def test_lightning_refuses_a_symlink_and_a_users_file_before_training(tmp_path: Path) -> None:
    folder = tmp_path / "run" / "hybridprof"
    folder.mkdir(parents=True)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me", encoding="utf-8")
    os.symlink(outside, folder / "report.html")
    with pytest.raises(OutputError) as refused:
        lightning_fit(tmp_path / "run", [lightning_callback()])
    assert "symbolic link" in one_line(refused.value)
    assert outside.read_text(encoding="utf-8") == "keep me"
    os.unlink(folder / "report.html")
    (folder / "session.json").write_text("{}", encoding="utf-8")
    with pytest.raises(OutputError):
        lightning_fit(tmp_path / "run", [lightning_callback()])
    callback = lightning_callback(overwrite=True)
    lightning_fit(tmp_path / "run", [callback])
    assert load_session(folder / "session.json").iterations == 2


def test_lightning_a_file_where_the_folder_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "hybridprof").write_text("a file of mine", encoding="utf-8")
    with pytest.raises(OutputError) as refused:
        lightning_fit(tmp_path / "run", [lightning_callback()])
    assert "not a folder" in one_line(refused.value)
