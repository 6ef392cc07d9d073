"""`--history FILE` of `hybridprof run` and `diff --run --rev`: add the sessions just measured
to a history, as `hybridprof history add` would, under the commits they measured.

Everything is checked before anything runs: the history file (a foreign, damaged or newer one is
refused; a missing one must have a folder to be made in) and the commits: `run` records the
checkout's HEAD, and refuses a model file with changes not committed (its figures are not HEAD's);
`diff --run` needs two --rev, each side's commit. The sessions are added after they are saved.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hybridprof.errors import UsageError
from hybridprof.history.store import CommitRef, HistoryFileError, check_file, open_store

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfileSession

__all__ = ["Recorder", "add_history_option", "recorder_for_diff", "recorder_for_run"]


def add_history_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--history",
        metavar="FILE",
        help="also add the session(s) to this history file under the commit(s) measured, as "
        "hybridprof history add does (default: none)",
    )


@dataclass(frozen=True, slots=True)
class Recorder:
    """Where the sessions go, and under which commits (one per session, in order)."""

    db: Path
    commits: tuple[CommitRef, ...]

    def add(self, sessions: tuple[ProfileSession, ...]) -> list[str]:
        """Add the sessions; the lines that say what was added."""
        from hybridprof.history.snapshot import snapshot_of

        lines = []
        with open_store(self.db, create=True) as store:
            for session, commit in zip(sessions, self.commits, strict=True):
                done = store.add(snapshot_of(session), commit)
                verb = "added to" if done.added else "already in"
                rev = commit.rev[:10]
                lines.append(f"history: {verb} {self.db}: commit {rev}, {done.layers} layers")
        return lines


def _check_db(db: Path) -> None:
    """The file can be added to: hybridprof's and whole, or absent with a folder to make it in."""
    if db.exists():
        check_file(db)
        open_store(db).close()  # another program's file, or a newer schema: refused now
    elif not db.parent.is_dir():
        raise HistoryFileError(f"folder '{db.parent}' of history '{db}' does not exist")


def recorder_for_run(name: str | None, model_file: Path) -> Recorder | None:
    """`run --history FILE`: HEAD of the model file's checkout, the file as committed."""
    if name is None:
        return None
    from hybridprof.files.revisions import Checkout

    found = Checkout.around(model_file.resolve().parent)
    if found is None:
        raise UsageError(
            f"--history records the commit of the model file's git checkout, but {model_file} "
            "is in none; save the session (-o) and add it with hybridprof history add SESSION "
            "--commit NAME"
        )
    checkout = Checkout.of(model_file)
    if checkout.modified():
        raise UsageError(
            f"--history records a commit's figures, but {model_file} has changes not committed; "
            "commit them, or save the session (-o) and add it later: hybridprof history add "
            "SESSION --commit NAME"
        )
    commit, when, subject = checkout.described("HEAD")
    ref = CommitRef(commit, checkout.branch(), when or None, subject)
    _check_db(Path(name))
    return Recorder(Path(name), (ref,))


def recorder_for_diff(args: argparse.Namespace) -> Recorder | None:
    """`diff --run FILE --rev A --rev B --history FILE`: each side under its revision."""
    if args.history is None:
        return None
    if not args.run or len(args.rev) != 2 or len(args.files) != 1:
        raise UsageError(
            "--history adds the sessions of a paired run under their commits: give --run with "
            "one model file and two --rev (e.g. --run net.py --rev main --rev HEAD)"
        )
    from hybridprof.files.revisions import Checkout

    checkout = Checkout.of(Path(args.files[0]))
    branch = checkout.branch()  # both sides: one series, as history add records it
    refs = []
    for rev in args.rev:
        commit, when, subject = checkout.described(rev)
        refs.append(CommitRef(commit, branch, when or None, subject))
    _check_db(Path(args.history))
    return Recorder(Path(args.history), tuple(refs))
