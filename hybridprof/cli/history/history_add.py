"""Record sessions' per-layer figures in the history, under a commit.

Each session (saved by hybridprof run or diff --run) adds its layers' self times with their
intervals, total times, shares, and FLOPs and memory where measured, keyed by commit, branch,
machine fingerprint (CPU model and cores, device, torch, threads) and model. The commit is
--commit (resolved to its full hash when git knows it; outside a git checkout any label, e.g.
a CI job's commit variable), else the checkout's HEAD; the branch is --branch, else the one
checked out. The history file is created when missing; records are never changed or removed.
The same session added twice is recorded once; two jobs adding at once wait for each other.

exit codes: 0 added (or recorded already), 2 bad input (a session or history file that cannot
be read, an unknown commit).

examples:
  hybridprof history add session.json
  hybridprof history add session.json --commit "$GITHUB_SHA" --branch main --db history.sqlite
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hybridprof.cli.common import command_parser, guarded, notice, parse_or_exit_code
from hybridprof.cli.terminal import emit
from hybridprof.history.store import DEFAULT_NAME

__all__ = ["add_options", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("history add", __doc__)
    parser.add_argument(
        "sessions", nargs="+", metavar="FILE", help="saved sessions (hybridprof run -o FILE)"
    )
    parser.add_argument(
        "--db",
        metavar="FILE",
        help=f"the history file (default: {DEFAULT_NAME} beside the first session)",
    )
    add_options(parser)
    parser.add_argument("--debug", action="store_true", help="show tracebacks of errors")
    return parser


def add_options(parser: argparse.ArgumentParser) -> None:
    """What a record is keyed by, beyond the session's own figures."""
    parser.add_argument(
        "--commit",
        metavar="NAME",
        help="the commit the sessions measured: a revision, or outside a git checkout any label "
        "(default: HEAD of the git checkout here)",
    )
    parser.add_argument(
        "--branch",
        metavar="NAME",
        help="the branch it is on (default: the branch checked out; none when HEAD is detached)",
    )
    parser.add_argument(
        "--machine",
        metavar="NAME",
        help="a name for the machine, part of its fingerprint: runners that look alike but are "
        "not get a series each (default: none, the fingerprint alone)",
    )
    parser.add_argument(
        "--model",
        metavar="NAME",
        help="the model's name in the history (default: the model file's name and root class, "
        "e.g. net.py:Net)",
    )


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else add(args)

    return guarded(body, "--debug" in argv)


def add(args: argparse.Namespace) -> int:
    """Read every session first (a bad one adds nothing), then the commit, then add them."""
    from hybridprof.history.commits import resolve_commit
    from hybridprof.history.snapshot import read_snapshot
    from hybridprof.history.store import open_store
    from hybridprof.reporting.format import visible

    files = [Path(name) for name in args.sessions]
    # only the figures the history keeps are read (session_figures: a tenth of the whole file)
    snapshots = [read_snapshot(f, args.machine or "", args.model) for f in files]
    commit = resolve_commit(args.commit, args.branch, Path.cwd())
    db = Path(args.db) if args.db else files[0].parent / DEFAULT_NAME
    with open_store(db, create=True) as store:
        if store.migrated_from is not None:
            notice(f"migrated history {db} from schema {store.migrated_from}")
        lines = []
        for file, snapshot in zip(files, snapshots, strict=True):
            done = store.add(snapshot, commit)
            if done.added:
                branch = f" ({commit.branch})" if commit.branch else ""
                lines.append(
                    f"added {file} to {db}: commit {commit.rev[:10]}{branch}, {done.layers} "
                    f"layers, {snapshot.model} on {snapshot.machine.describe()}"
                )
            else:
                lines.append(f"{file} is in {db} already (commit {done.rev[:10]}); not added again")
    emit(visible(line) for line in lines)  # a line break in a name starts no line
    return 0
