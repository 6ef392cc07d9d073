"""What both trainer callbacks do: a `hybridprof.Profile` driven by the trainer's hooks, and the
session and reports written into the run's folder when training ends.

A step is one optimizer step: the callbacks call `begin_step()` where a trainer starts the first
micro-batch of one and `end_step()` once its optimizer has stepped, so data loading before it and
logging, evaluation and checkpointing after it are in no step.

The files follow `run`'s rule for names hybridprof picks (files/own_files.py): session.json and
report.<ext> are replaced only over what hybridprof wrote, never through a symlink; a file of the
user's there needs `overwrite=True`. Everything is checked when training starts (a typed
OutputError then, before any step); what still fails at the end is said in one line and training
returns normally, so the script's next lines (saving the model) run.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path

from torch import nn

from hybridprof.api.profiler import Profile
from hybridprof.datamodel import ProfileSession
from hybridprof.errors import HybridprofError, OutputError
from hybridprof.files.outputs import check_output_path, rescue_copy, write_atomic
from hybridprof.files.own_files import replaceable_own_file
from hybridprof.planner.module_tree import Selector
from hybridprof.reporting import renderer_for, write_report
from hybridprof.runtime.runs.user_steps import STEPS_PER_SESSION
from hybridprof.runtime.strategies import DEFAULT_STRATEGY
from hybridprof.runtime.training.schedule import Schedule, schedule

FOLDER = "hybridprof"  # under the run's output folder
SESSION_NAME = "session.json"
_FIX = "move it away, give the callback another out_dir, or pass overwrite=True to replace it"


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
        overwrite: bool = False,
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
        self.overwrite = overwrite
        self.profile: Profile | None = None
        self.session: ProfileSession | None = None
        self.files: list[Path] = []

    def start(self, model: nn.Module, run_folder: str | Path | None = None) -> None:
        """Training begins: its outputs are checked (`run_folder`; None: this process writes
        none), then a new Profile around it (one left open by a run that raised is closed
        first). OutputError here, before any step, for an output that could not be written."""
        self.close(failed=True)
        self.session, self.files = None, []
        if run_folder is not None:
            self.check_outputs(self.folder_of(run_folder))
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

    def folder_of(self, run_folder: str | Path) -> Path:
        return self.out_dir or Path(run_folder) / FOLDER

    def names(self) -> list[str]:
        return [SESSION_NAME, *(f"report.{e}" for e in self.reports)]

    def check_outputs(self, folder: Path) -> None:
        """Every output can be written into `folder`: what is there is hybridprof's (or the
        user's, with overwrite=True), never a link; the folder exists or can be made."""
        self._check_folder(folder)
        if not folder.exists():
            check_creatable(folder)
            return
        for name in self.names():
            replaceable_own_file(folder / name, self.overwrite, _FIX)
            check_output_path(folder / name, False, own=True, replace_users=self.overwrite)

    def _check_folder(self, folder: Path) -> None:
        """As `run`'s --out-dir: a folder, or a link to one (you may point it at another disk;
        the files in it are still replaced only over hybridprof's own)."""
        if os.path.lexists(folder) and not folder.is_dir():
            raise OutputError(
                f"'{folder}' exists and is not a folder, so the session cannot go there: {_FIX}"
            )

    def finish(self, run_folder: str | Path, write: bool) -> list[Path]:
        """Training ended: close the Profile and, where `write` (the main process), write the
        session and the reports into `<run_folder>/hybridprof/` (or `out_dir`). What cannot be
        written is said in one line (training ran; raising now would lose the script's next
        lines), with the session saved in the temp folder if it could not go there."""
        self.close()
        if not write:
            return []
        folder = self.folder_of(run_folder)
        if self.session is None:
            print(
                f"hybridprof: nothing measured (the run ended before its schedule's first active "
                f"step: {self.schedule}); no files written",
                file=sys.stderr,
            )
            return []
        try:
            self._write(folder, self.session)
        except Exception as exc:  # after training: one line, never raised out of train()
            print(_not_written(exc, folder, self.session, self.files), file=sys.stderr)
            return []
        print(
            f"hybridprof: {self.session.iterations} measured steps; session and report in {folder}",
            file=sys.stderr,
        )
        return self.files

    def _write(self, folder: Path, session: ProfileSession) -> None:
        self.files = []
        self._check_folder(folder)
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create folder '{folder}': {exc.strerror}") from exc
        for name in self.names():  # checked again: the line then advises the callback's fix
            replaceable_own_file(folder / name, self.overwrite, _FIX)
        mine = self.overwrite
        text = session.to_json()
        self.files.append(write_atomic(folder / SESSION_NAME, text, own=True, replace_users=mine))
        for extension in self.reports:
            path = folder / f"report.{extension}"
            self.files.append(write_report(session, path, own=True, replace_users=mine))


def check_creatable(folder: Path) -> None:
    """`folder` can be made: its nearest existing ancestor is a writable folder."""
    ancestor = folder
    while not os.path.lexists(ancestor) and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise OutputError(f"cannot create folder '{folder}': '{ancestor}' is not a folder")
    if not os.access(ancestor, os.W_OK):
        raise OutputError(f"cannot create folder '{folder}': '{ancestor}' is not writable")


def _not_written(exc: Exception, folder: Path, session: ProfileSession, written: list[Path]) -> str:
    """The one line for outputs that failed after training ran."""
    reason = str(exc) if isinstance(exc, HybridprofError) else f"{type(exc).__name__}: {exc}"
    reason = " ".join(reason.split())
    if written:
        return f"hybridprof: {reason}; reports not written (the session is in {folder})"
    saved = rescue_copy(session.to_json(), "hybridprof-session")
    where = f" (the session is saved in {saved})" if saved else ""
    return f"hybridprof: {reason}; session and reports not written{where}"


__all__ = ["FOLDER", "TrainerSteps", "default_schedule"]
