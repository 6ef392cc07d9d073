"""A model file at git revisions (`hybridprof.files.revisions`), in a real git repository made
here, and the one-line refusals outside one."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from hybridprof.errors import UsageError
from hybridprof.files.revisions import Checkout

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(folder: Path, *argv: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), *argv], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A checkout with models/net.py at two commits (tags v1, v2) and a sibling changed in v2."""
    top = tmp_path / "repo"
    (top / "models").mkdir(parents=True)
    git(top, "init", "-q")
    git(top, "config", "user.email", "t@example.com")
    git(top, "config", "user.name", "t")
    (top / "models" / "net.py").write_text("WIDTH = 1\n")
    (top / "models" / "parts.py").write_text("A = 1\n")
    git(top, "add", ".")
    git(top, "commit", "-q", "-m", "v1")
    git(top, "tag", "v1")
    (top / "models" / "net.py").write_text("WIDTH = 2\n")
    (top / "models" / "parts.py").write_text("A = 2\n")
    git(top, "commit", "-q", "-am", "v2")
    git(top, "tag", "v2")
    (top / "models" / "net.py").write_text("WIDTH = 3  # not committed\n")
    return top


def test_the_file_at_each_revision_lands_in_the_folder_given(repo: Path, tmp_path: Path) -> None:
    checkout = Checkout.of(repo / "models" / "net.py")
    assert checkout.path == "models/net.py" and checkout.top == repo.resolve()
    out = tmp_path / "out"
    out.mkdir()
    first, second = checkout.write_at("v1", out), checkout.write_at("v2", out)
    assert first.read_text() == "WIDTH = 1\n" and second.read_text() == "WIDTH = 2\n"
    assert first.name == second.name == "net.py" and first != second
    assert first.parent.parent == out and not list((repo / "models").glob("rev-*"))
    assert checkout.commit("v2") == git(repo, "rev-parse", "v2")
    assert checkout.changed_beside("v1", "v2") == ["models/parts.py"]
    assert checkout.changed_beside("v2", None) == []  # only net.py differs from the work tree


def test_a_file_outside_a_checkout_is_refused_in_one_line(tmp_path: Path) -> None:
    loose = tmp_path / "loose" / "net.py"
    loose.parent.mkdir()
    loose.write_text("x = 1\n")
    with pytest.raises(UsageError, match=r"not in a git checkout.*diff --run base\.py new\.py"):
        Checkout.of(loose)


@pytest.mark.parametrize(
    ("rev", "fragment"),
    [
        ("nosuchbranch", "git knows no revision 'nosuchbranch'"),
        ("--output=x", "is not a revision name"),
        ("v1:other.py", "is not a revision name"),
    ],
)
def test_bad_revisions_are_refused(repo: Path, tmp_path: Path, rev: str, fragment: str) -> None:
    checkout = Checkout.of(repo / "models" / "net.py")
    with pytest.raises(UsageError, match=fragment):
        checkout.write_at(rev, tmp_path)


def test_a_file_missing_at_a_revision_is_refused(repo: Path, tmp_path: Path) -> None:
    (repo / "models" / "later.py").write_text("y = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "later")
    checkout = Checkout.of(repo / "models" / "later.py")
    with pytest.raises(UsageError, match="does not exist at revision 'v1'"):
        checkout.write_at("v1", tmp_path)


def test_a_copy_at_a_revision_imports_its_siblings_from_the_checkout(
    repo: Path, tmp_path: Path
) -> None:
    from hybridprof.errors import ModelLoadError
    from hybridprof.files.loader import import_model_file

    net = repo / "models" / "net.py"
    net.write_text("from parts import A\n")
    git(repo, "commit", "-q", "-am", "imports a sibling")
    copy = Checkout.of(net).write_at("HEAD", tmp_path)
    with pytest.raises(ModelLoadError, match="No module named 'parts'"):
        import_model_file(copy, tag="alone")
    try:
        module = import_model_file(copy, tag="beside", siblings=net.parent)
        assert module.A == 2 and str(net.parent) not in sys.path
    finally:
        sys.modules.pop("parts", None)


def test_a_model_file_that_is_a_symlink_at_the_revision_is_refused(
    repo: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "elsewhere.py"
    secret.write_text("raise SystemExit('imported the link target')\n")
    link = repo / "models" / "linked.py"
    link.symlink_to(secret)
    git(repo, "add", "models/linked.py")
    git(repo, "commit", "-q", "-m", "a link")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(UsageError) as refused:
        Checkout.of(link).write_at("HEAD", out)
    message = str(refused.value)
    assert "\n" not in message and "at revision 'HEAD'" in message and "symbolic link" in message, (
        message
    )
    assert list(out.rglob("*.py")) == []


def test_a_huge_model_file_at_a_revision_is_refused_by_its_size(repo: Path, tmp_path: Path) -> None:
    from hybridprof.files.loader import MAX_MODEL_BYTES

    big = repo / "models" / "big.py"
    with big.open("w") as handle:
        handle.write(("#" * 1023 + "\n") * (MAX_MODEL_BYTES // 1024 + 1))
    git(repo, "add", "models/big.py")
    git(repo, "commit", "-q", "-m", "big")
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(UsageError) as refused:
        Checkout.of(big).write_at("HEAD", out)
    message = str(refused.value)
    assert (
        "\n" not in message
        and "at revision 'HEAD'" in message
        and "more than hybridprof reads" in message
    ), message
    assert list(out.rglob("*.py")) == []
