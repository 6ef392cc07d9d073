"""A session read for the history without its op lists gives the same snapshot as the whole file."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

import hybridprof
from hybridprof.files.storage import load_session
from hybridprof.history.snapshot import snapshot_of
from hybridprof.runtime.runs.options import RunOptions


def _saved_session(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    session = hybridprof.profile(model, torch.randn(8, 16), options=RunOptions(iters=6))
    file = tmp_path / "session.json"
    file.write_text(session.to_json(), encoding="utf-8")
    return file


def test_without_ops_the_snapshot_is_the_same_and_no_op_is_read(tmp_path: Path) -> None:
    file = _saved_session(tmp_path)
    whole = load_session(file)
    figures = load_session(file, ops=False)
    assert any(r.ops for r in whole.records)  # the file holds op lists
    assert all(r.ops == () for r in figures.records) and figures.outside_ops == ()
    assert [r.path for r in figures.records] == [r.path for r in whole.records]
    assert snapshot_of(figures) == snapshot_of(whole)
