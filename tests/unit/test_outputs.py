"""Output files: checked before work, written atomically, never clobbered without --force."""

from __future__ import annotations

from pathlib import Path

import pytest

from hybridprof.errors import OutputError
from hybridprof.files.outputs import check_output_path, write_atomic


def test_write_atomic_writes_and_leaves_no_temp(tmp_path: Path) -> None:
    target = write_atomic(tmp_path / "out.txt", "hello")
    assert target.read_text() == "hello"
    assert [p.name for p in tmp_path.iterdir()] == ["out.txt"]


def test_existing_output_needs_force(tmp_path: Path) -> None:
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(OutputError, match="pass --force"):
        write_atomic(target, "new")
    assert target.read_text() == "old"
    write_atomic(target, b"new", force=True)
    assert target.read_text() == "new"


def test_missing_folder_and_folder_target(tmp_path: Path) -> None:
    with pytest.raises(OutputError, match="does not exist"):
        check_output_path(tmp_path / "nope" / "out.html", force=False)
    with pytest.raises(OutputError, match="is a folder"):
        check_output_path(tmp_path, force=True)
