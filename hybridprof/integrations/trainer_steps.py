"""What both trainer callbacks do: a `hybridprof.Profile` driven by the trainer's hooks, and the
session and reports written into the run's folder when training ends.

A step is one optimizer step: the callbacks call `begin_step()` where a trainer starts the first
micro-batch of one and `end_step()` once its optimizer has stepped, so data loading before it and
logging, evaluation and checkpointing after it are in no step.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from torch import nn

from hybridprof.api.profiler import Profile
from hybridprof.datamodel import ProfileSession
from hybridprof.files.outputs import write_atomic
from hybridprof.planner.module_tree import Selector
from hybridprof.reporting import renderer_for, write_report
from hybridprof.runtime.runs.user_steps import STEPS_PER_SESSION
from hybridprof.runtime.strategies import DEFAULT_STRATEGY
from hybridprof.runtime.training.schedule import Schedule, schedule

FOLDER = "hybridprof"  # under the run's output folder


def default_schedule() -> Schedule:
    """Skip the first 5 optimizer steps (compiling, allocating), warm up 3, measure 10."""
    return schedule(wait=5, warmup=3, active=10)


class TrainerSteps:
    """One training run's Profile, its steps bracketed by a trainer's hooks."""

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
        for extension in reports:
            renderer_for(f"report.{extension}")  # an unknown format fails here, not at the end
        self.schedule = schedule if schedule is not None else default_schedule()
        self.paths = paths
        self.leaves_only = leaves_only
        self.strategy = strategy
        self.reports = tuple(reports)
        self.out_dir = Path(out_dir) if out_dir is not None else None
        self.steps_per_session = steps_per_session
        self.profile: Profile | None = None
        self.session: ProfileSession | None = None
        self.files: list[Path] = []

    def start(self, model: nn.Module) -> None:
        """Training begins: a new Profile around it (one left open by a run that raised is
        closed first)."""
        self.close(failed=True)
        self.session, self.files = None, []
        profile = Profile(
            model,
            paths=self.paths,
            strategy=self.strategy,
            leaves_only=self.leaves_only,
            schedule=self.schedule,
            steps_per_session=self.steps_per_session,
        )
        profile.__enter__()
        self.profile = profile

    def begin_step(self) -> None:
        if self.profile is not None:
            self.profile.begin_step()

    def end_step(self) -> None:
        if self.profile is not None:
            self.profile.end_step()

    def close(self, failed: bool = False) -> None:
        """End the Profile (a window still open is closed and kept)."""
        profile, self.profile = self.profile, None
        if profile is not None and not profile.exited:
            error = RuntimeError("training stopped") if failed else None
            profile.__exit__(type(error) if error else None, error, None)
            if not failed and profile.iterations:
                self.session = profile.session()

    def finish(self, run_folder: str | Path, write: bool) -> list[Path]:
        """Training ended: close the Profile and, where `write` (the main process), write the
        session and the reports into `<run_folder>/hybridprof/` (or `out_dir`)."""
        self.close()
        if not write:
            return []
        folder = self.out_dir or Path(run_folder) / FOLDER
        if self.session is None:
            print(
                f"hybridprof: nothing measured (the run ended before its schedule's first active "
                f"step: {self.schedule}); no files written",
                file=sys.stderr,
            )
            return []
        folder.mkdir(parents=True, exist_ok=True)
        files = [write_atomic(folder / "session.json", self.session.to_json(), force=True)]
        files += [write_report(self.session, folder / f"report.{e}", True) for e in self.reports]
        self.files = files
        print(
            f"hybridprof: {self.session.iterations} measured steps; session and report in {folder}",
            file=sys.stderr,
        )
        return files


__all__ = ["FOLDER", "TrainerSteps", "default_schedule"]
