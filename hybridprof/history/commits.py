"""The commit a session is recorded under: a revision git knows (resolved to its full hash, its
committer's time and subject), or, outside a git checkout, a label as given (a CI job's commit
variable where the sources are not checked out)."""

from __future__ import annotations

from pathlib import Path

from hybridprof.errors import UsageError
from hybridprof.files.revisions import Checkout
from hybridprof.history.store import CommitRef

MAX_LABEL = 200


def resolve_commit(rev: str | None, branch: str | None, folder: Path) -> CommitRef:
    """`rev` (None: HEAD) as git knows it in the checkout around `folder`; `branch` (None: the
    branch checked out, "" when HEAD is detached)."""
    checkout = Checkout.around(folder)
    if rev is not None:
        _check_label(rev)
    if checkout is None:
        if rev is None:
            raise UsageError(
                f"no git checkout at {folder} to take the commit from; give --commit REV (e.g. "
                '--commit "$GITHUB_SHA"), or run it in the checkout'
            )
        return CommitRef(rev=rev, branch=branch or "")
    commit, when, subject = checkout.described(rev or "HEAD")
    chosen = branch if branch is not None else checkout.branch()
    return CommitRef(rev=commit, branch=chosen, committed_at=when or None, subject=subject)


def _check_label(rev: str) -> None:
    if not rev.strip() or "\n" in rev or len(rev) > MAX_LABEL:
        raise UsageError(
            f"--commit {rev[:60]!r} is no commit name; give a revision (a hash, branch or tag) "
            f"or a label of one line, at most {MAX_LABEL} characters"
        )


__all__ = ["resolve_commit"]
