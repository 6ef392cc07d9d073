"""The PyTorch Lightning `Callback` (imports Lightning; reached through `integrations.lightning`).

One step is one optimizer step: it begins at the first `on_train_batch_start` of the step (a
no-op while one is open, so with `accumulate_grad_batches=k` it spans k batches) and ends at the
`on_train_batch_end` where `trainer.global_step` advanced, i.e. where the optimizer stepped.
(`on_before_optimizer_step` is no boundary: Lightning runs the forward and backward inside
`optimizer.step(closure)`, and so that hook too.) The model profiled is the LightningModule;
`training_step` is no forward, so the loss is outside every layer. A run that raises is closed
by `on_exception`, keeping what was measured and writing nothing.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hybridprof.integrations.trainer_steps import TrainerSteps
from hybridprof.planner.module_tree import Selector
from hybridprof.runtime.runs.user_steps import STEPS_PER_SESSION
from hybridprof.runtime.strategies import DEFAULT_STRATEGY
from hybridprof.runtime.training.schedule import Schedule


def _callback_class() -> Any:
    """Lightning's `Callback`: `lightning.pytorch`'s, else the older `pytorch_lightning`'s."""
    for package in ("lightning.pytorch", "pytorch_lightning"):
        try:
            return importlib.import_module(package).Callback
        except ImportError:
            continue
    raise ImportError("neither lightning nor pytorch_lightning is installed")


Callback: Any = _callback_class()


class HybridprofCallback(Callback):
    """Profile the scheduled optimizer steps of `Trainer.fit()` and save the session.

    schedule: which steps (`hybridprof.schedule`; default wait 5, warm-up 3, active 10);
    paths/leaves_only/strategy: as `hybridprof.Profile` (default: every module that runs a
    forward); reports: report formats written beside the session ("html", "pdf", "txt", "csv",
    "json"); out_dir: where (default `<log_dir or default_root_dir>/hybridprof/`). After
    training, `session` holds the `ProfileSession` and `files` the paths written. The files
    are replaced on the next run only where hybridprof wrote them, never through a symlink;
    overwrite=True also replaces a file of yours there. An output that cannot be written is an
    OutputError when training starts (before any step).
    """

    def __init__(
        self,
        schedule: Schedule | None = None,
        *,
        paths: Sequence[Selector] | None = None,
        leaves_only: bool = False,
        strategy: str = DEFAULT_STRATEGY,
        reports: Sequence[str] = ("html",),
        out_dir: str | Path | None = None,
        steps_per_session: int = STEPS_PER_SESSION,
        overwrite: bool = False,
    ) -> None:
        super().__init__()
        self.steps = TrainerSteps(
            schedule,
            paths=paths,
            leaves_only=leaves_only,
            strategy=strategy,
            reports=reports,
            out_dir=out_dir,
            steps_per_session=steps_per_session,
            overwrite=overwrite,
        )
        self._global_step = 0

    @property
    def session(self) -> Any:
        return self.steps.session

    @property
    def files(self) -> list[Path]:
        return self.steps.files

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        self._global_step = trainer.global_step
        folder = trainer.log_dir or trainer.default_root_dir
        self.steps.start(pl_module, folder if trainer.is_global_zero else None)

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        self.steps.begin_step()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if trainer.global_step != self._global_step:  # the optimizer stepped in this batch
            self._global_step = trainer.global_step
            self.steps.end_step()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        folder = trainer.log_dir or trainer.default_root_dir
        self.steps.finish(folder, write=bool(trainer.is_global_zero))

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        self.steps.close(failed=True)


__all__ = ["HybridprofCallback"]
