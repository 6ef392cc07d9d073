"""The Hugging Face `TrainerCallback` (imports transformers; reached through `integrations.hf`).

One step is one optimizer step, `on_step_begin` to `on_step_end`: the Trainer fires the first at
the step's first micro-batch, after its batches were fetched, and the second after
`optimizer.step()`, `lr_scheduler.step()` and `model.zero_grad()`, before logging, evaluation
and saving. The model profiled is the one the events carry (the Trainer's unwrapped model: a
DDP or accelerate wrapper calls its forward). HF's Trainer has no event for a failed run: a
callback left open by one is closed at the next `on_train_begin`, or by `close()`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from hybridprof.integrations.trainer_steps import TrainerSteps
from hybridprof.planner.module_tree import Selector
from hybridprof.runtime.runs.user_steps import STEPS_PER_SESSION
from hybridprof.runtime.strategies import DEFAULT_STRATEGY
from hybridprof.runtime.training.schedule import Schedule


class HybridprofCallback(TrainerCallback):
    """Profile the scheduled optimizer steps of `Trainer.train()` and save the session.

    schedule: which steps (`hybridprof.schedule`; default wait 5, warm-up 3, active 10);
    paths/leaves_only/strategy: as `hybridprof.Profile` (default: every module that runs a
    forward); reports: report formats written beside the session ("html", "pdf", "txt", "csv",
    "json"); out_dir: where (default `<output_dir>/hybridprof/`). After training, `session`
    holds the `ProfileSession` and `files` the paths written.
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
    ) -> None:
        self.steps = TrainerSteps(
            schedule,
            paths=paths,
            leaves_only=leaves_only,
            strategy=strategy,
            reports=reports,
            out_dir=out_dir,
            steps_per_session=steps_per_session,
        )

    @property
    def session(self) -> Any:
        return self.steps.session

    @property
    def files(self) -> list[Path]:
        return self.steps.files

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            self.steps.start(model)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.end_step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.finish(args.output_dir, write=bool(state.is_world_process_zero))

    def close(self) -> None:
        """Stop profiling now (after a `train()` that raised), keeping what was measured."""
        self.steps.close()


__all__ = ["HybridprofCallback"]
