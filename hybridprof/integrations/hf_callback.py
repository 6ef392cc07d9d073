"""The Hugging Face `TrainerCallback` (imports transformers; reached through `integrations.hf`).

One step is one optimizer step, `on_step_begin` to `on_step_end`: the Trainer fires the first at
the step's first micro-batch, after its batches were fetched, and the second after
`optimizer.step()`, `lr_scheduler.step()` and `model.zero_grad()`, before logging, evaluation
and saving. The model profiled is the one the events carry (the Trainer's unwrapped model: a
DDP or accelerate wrapper calls its forward). HF's Trainer has no event for a failed run, so
the callback wraps the Trainer's `training_step` (forward, loss and backward, where a run fails:
out of memory, a bad batch, Ctrl-C) for the run: one that raises closes the profile at once
(modules unpatched, torch's profiler stopped, the GC as it was) and the error goes on unchanged.
The Trainer is the `self` of the frame that fires `on_train_begin` (events carry no trainer).
A failure elsewhere in a step (the optimizer's step) is closed at the next `on_train_begin`, or
by `close()`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from transformers import Trainer, TrainerCallback

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
    holds the `ProfileSession` and `files` the paths written. The files are replaced on the next
    run only where hybridprof wrote them, never through a symlink; overwrite=True also replaces
    a file of yours there. An output that cannot be written is an OutputError when training
    starts (before any step); one that still fails at the end is said in one line.
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

    @property
    def session(self) -> Any:
        return self.steps.session

    @property
    def files(self) -> list[Path]:
        return self.steps.files

    def on_train_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        model = kwargs.get("model")
        if model is not None:
            writes = bool(state.is_world_process_zero)
            self.steps.start(model, args.output_dir if writes else None)
            self._guard(_calling_trainer())

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.begin_step()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.steps.end_step()

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self._unguard()
        self.steps.finish(args.output_dir, write=bool(state.is_world_process_zero))

    def close(self) -> None:
        """Stop profiling now (after a `train()` that raised), keeping what was measured."""
        self._unguard()
        self.steps.close()

    _trainer: Any = None  # the Trainer whose training_step is wrapped, while it is

    def _guard(self, trainer: Any) -> None:
        """Wrap `trainer.training_step` (an attribute of the instance, removed at the end) so a
        step that raises closes the profile before the error leaves `train()`."""
        self._unguard()
        if trainer is None or "training_step" in vars(trainer):
            return  # no trainer found, or the user's own per-instance step: left as it is
        step: Callable[..., Any] = trainer.training_step

        def training_step(*args: Any, **kwargs: Any) -> Any:
            try:
                return step(*args, **kwargs)
            except BaseException:
                self._unguard()
                self.steps.close(failed=True)
                raise

        trainer.training_step = training_step
        self._trainer = trainer

    def _unguard(self) -> None:
        trainer, self._trainer = self._trainer, None
        if trainer is not None:
            vars(trainer).pop("training_step", None)


def _calling_trainer() -> Any:
    """The Trainer running the event being handled: the nearest `self` up the stack that is
    one (None if there is none, e.g. an event fired by hand)."""
    frame = sys._getframe(1)
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if isinstance(candidate, Trainer):
            return candidate
        frame = frame.f_back  # type: ignore[assignment]
    return None


__all__ = ["HybridprofCallback"]
