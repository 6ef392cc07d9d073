"""A model file as it was at a git revision (`hybridprof diff --run net.py --rev main --rev HEAD`).

The file's text at the revision comes from `git show REV:path` and is written into a temporary
folder of its own (under the system's temp folder, never beside the user's files), keeping its
name; the caller removes the folder. Only the model file is read at the revision: modules it
imports from its folder come from the working tree, and `changed_beside` names those that differ
between the revisions, so a report can say so.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hybridprof.errors import UsageError
from hybridprof.files.loader import MAX_MODEL_BYTES, too_big

_GIT_TIMEOUT_S = 60


@dataclass(frozen=True, slots=True)
class Checkout:
    """A file inside a git checkout: the checkout's top folder and the file's path in it."""

    top: Path
    path: str  # relative to `top`, with forward slashes, as `git show REV:path` wants it

    @classmethod
    def of(cls, file: Path) -> Checkout:
        """The checkout holding `file`; UsageError when it is in none (or git is missing). The
        file's own name is kept (not resolved): a symlink is the link's path in the checkout."""
        folder = file.absolute().parent.resolve()
        done = _git(folder, "rev-parse", "--show-toplevel")
        if done.returncode != 0:
            raise UsageError(
                f"--rev reads '{file}' at a git revision, but it is not in a git checkout "
                f"(git: {_first_line(done.stderr)}); give two model files instead: "
                "hybridprof diff --run base.py new.py"
            )
        top = Path(done.stdout.strip()).resolve()
        relative = Path(os.path.relpath(folder / file.name, top)).as_posix()
        return cls(top, relative)

    @classmethod
    def around(cls, folder: Path) -> Checkout | None:
        """The checkout `folder` is in (its `path` is the folder itself), None outside one."""
        if shutil.which("git") is None:
            return None
        done = _git(folder, "rev-parse", "--show-toplevel")
        if done.returncode != 0:
            return None
        top = Path(done.stdout.strip()).resolve()
        return cls(top, Path(os.path.relpath(folder.resolve(), top)).as_posix())

    def commit(self, rev: str) -> str:
        """The commit `rev` names (its full hash); UsageError for a name git does not know."""
        _check_rev(rev)
        done = _git(self.top, "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}")
        if done.returncode != 0:
            raise UsageError(
                f"git knows no revision '{rev}' in {self.top}; give a branch, tag or commit "
                "(git log --oneline lists them)"
            )
        return str(done.stdout).strip()

    def write_at(self, rev: str, folder: Path) -> Path:
        """The file at `rev`, written into a new subfolder of `folder` under its own name: a
        regular file within MAX_MODEL_BYTES (its size read from git's tree first), streamed
        from git to the file, never held in memory whole."""
        commit = self.commit(rev)
        blob = self._blob_at(rev, commit)
        target = folder / f"rev-{len(list(folder.iterdir()))}" / Path(self.path).name
        target.parent.mkdir(parents=True)
        with target.open("wb") as handle:
            done = _git(self.top, "cat-file", "blob", blob, text=False, stdout=handle)
        if done.returncode != 0:
            raise UsageError(f"git cat-file failed in {self.top}: {_first_line(done.stderr)}")
        return target

    def _blob_at(self, rev: str, commit: str) -> str:
        """The file's blob at `commit`; UsageError when it is missing, a symbolic link (its
        target's text would be imported as Python), a folder or submodule, or too big."""
        done = _git(self.top, "ls-tree", "-l", "-z", "--full-tree", commit, "--", self.path)
        entry = done.stdout.split("\0")[0] if done.returncode == 0 else ""
        meta, _, name = entry.partition("\t")
        fields = meta.split()
        if len(fields) != 4 or name != self.path:
            raise UsageError(
                f"'{self.path}' does not exist at revision '{rev}' ({commit[:10]}); check the "
                f"revision, or the file's path at it (git log --oneline -- {self.path})"
            )
        mode, kind, blob, size = (str(field) for field in fields)
        where = f"'{self.path}' at revision '{rev}' ({commit[:10]})"
        if mode == "120000":
            raise UsageError(
                f"{where} is a symbolic link, not a model file (its target's text would be "
                "read as Python); give the file it points to"
            )
        if kind != "blob" or not size.isdigit():
            raise UsageError(f"{where} is a {kind}, not a model file; give a .py file")
        if int(size) > MAX_MODEL_BYTES:
            raise UsageError(too_big(where, int(size)))
        return blob

    def described(self, rev: str) -> tuple[str, int, str]:
        """The commit `rev` names: its full hash, its committer's time (epoch s), its subject."""
        commit = self.commit(rev)
        done = _git(self.top, "show", "-s", "--format=%ct%n%s", commit)
        lines = done.stdout.splitlines() if done.returncode == 0 else []
        when = int(lines[0]) if lines and lines[0].isdigit() else 0
        return commit, when, lines[1] if len(lines) > 1 else ""

    def modified(self) -> bool:
        """The file differs from HEAD (changed, staged or not, or never committed)."""
        done = _git(self.top, "status", "--porcelain", "--", self.path)
        return done.returncode != 0 or bool(done.stdout.strip())

    def branch(self) -> str:
        """The branch checked out ("" when HEAD is detached, as in most CI checkouts)."""
        done = _git(self.top, "symbolic-ref", "--quiet", "--short", "HEAD")
        return done.stdout.strip() if done.returncode == 0 else ""

    def commits_between(self, good: str, bad: str) -> list[str]:
        """The commits after `good` up to `bad`, oldest first, on the ancestry path between them,
        that changed the file (only the file is read at a revision, so only those can differ)."""
        first, last = self.commit(good), self.commit(bad)
        done = _git(
            self.top,
            "rev-list",
            "--reverse",
            "--ancestry-path",
            f"{first}..{last}",
            "--",
            self.path,
        )
        if done.returncode != 0:
            raise UsageError(f"git rev-list failed in {self.top}: {_first_line(done.stderr)}")
        return [str(line) for line in done.stdout.split()]

    def changed_beside(self, rev_a: str, rev_b: str | None) -> list[str]:
        """Files in the model file's folder (itself left out) that differ between the revisions
        (`rev_b` None: between `rev_a` and the working tree)."""
        folder = Path(self.path).parent.as_posix()
        revs = [self.commit(rev_a), *([self.commit(rev_b)] if rev_b is not None else [])]
        done = _git(self.top, "diff", "--name-only", *revs, "--", folder or ".")
        names = [line for line in done.stdout.splitlines() if line and line != self.path]
        return names if done.returncode == 0 else []


def _check_rev(rev: str) -> None:
    if not rev.strip() or rev.startswith("-") or ":" in rev or "\n" in rev:
        raise UsageError(
            f"--rev {rev!r} is not a revision name; give a branch, tag or commit, e.g. --rev main"
        )


def _git(
    folder: Path, *argv: str, text: bool = True, stdout: Any = subprocess.PIPE
) -> subprocess.CompletedProcess[Any]:
    """git's result in `folder` (its exit status is the caller's to judge); `stdout`: a file
    its output is streamed into instead of captured."""
    if shutil.which("git") is None:
        raise UsageError("--rev needs git, which is not installed here; give two model files")
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *argv],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=text,
            timeout=_GIT_TIMEOUT_S,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise UsageError(f"git {argv[0]} failed in {folder}: {exc}") from exc
    return done


def _first_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else "no output"


__all__ = ["Checkout"]
