"""A session file's snapshot, read straight from its JSON (`read_snapshot`), holds exactly what the
layer table's rows show: the figures the history stored before it read files that way."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.analysis.layer_table import LayerRow, profiled_layers
from hybridprof.datamodel import ProfileSession, Stat
from hybridprof.errors import SessionFileError
from hybridprof.files.storage import load_session
from hybridprof.history.fingerprint import machine_of
from hybridprof.history.session_figures import read_figures
from hybridprof.history.snapshot import (
    LayerFigures,
    Snapshot,
    Timing,
    model_name,
    read_snapshot,
    snapshot_of,
)
from hybridprof.history.store import FIGURE_COLUMNS, CommitRef, open_store
from hybridprof.runtime.runs.options import RunOptions


class Block(nn.Module):
    """A parent that runs its own ops around its children: its total is not its self time."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.norm = nn.LayerNorm(16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(torch.tanh(self.fc(x)) + x * 2)


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), Block(), nn.Linear(16, 4))


def _saved(session: ProfileSession, folder: Path, name: str) -> Path:
    file = folder / f"{name}.json"
    file.write_text(session.to_json(), encoding="utf-8")
    return file


def _run(**options: object) -> ProfileSession:
    run = RunOptions(iters=8, warmup=1, **options)  # type: ignore[arg-type]
    return hybridprof.profile(_model(), torch.randn(4, 8), options=run)


def _training_loop() -> ProfileSession:
    """A profiled training loop: backward, an optimizer's rows, the outside time."""
    model = _model()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    x, y = torch.randn(4, 8), torch.randn(4, 4)
    with hybridprof.Profile(model) as prof:
        for _ in range(7):
            nn.functional.mse_loss(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    return prof.session()


def _reference(session: ProfileSession) -> Snapshot:
    """The snapshot as the history made it from the layer table's rows (`profiled_layers`),
    before it read the figures without the table. The history keeps the figures as measured,
    so the table's rows are the raw ones (no calibration: nothing compensated)."""
    timing: Timing = "device" if session.use_device else "cpu"
    table = profiled_layers(replace(session, calibration=None))
    layers = [_reference_figures(row, timing) for row in table.rows]
    env = session.environment
    identity = [
        session.started_at,
        list(session.command),
        session.model_file,
        session.model_hash,
        [env.hybridprof_version, env.torch_version, env.cpu, env.device, env.threads],
        list(session.iteration_cpu_us),
        [(r.path, r.calls, r.self_cpu_us.median, r.total_cpu_us.median) for r in session.records],
    ]
    text = json.dumps(identity, ensure_ascii=False, separators=(",", ":"))
    return Snapshot(
        digest=hashlib.sha256(text.encode("utf-8")).hexdigest(),
        model=model_name(session),
        model_hash=session.model_hash,
        machine=machine_of(session.environment),
        started_at=session.started_at,
        iterations=session.iterations,
        iteration_us=table.iteration_us if table.iteration_us > 0 else None,
        timing=timing,
        stability=session.stability.verdict if session.stability is not None else "unknown",
        layers=tuple(layer for layer in layers if layer is not None),
    )


def _reference_figures(row: LayerRow, timing: Timing) -> LayerFigures | None:
    low = high = None
    if timing == "device":
        value = row.self_device_us or 0.0
    elif row.self_cpu is not None:
        value = row.self_cpu.median
        if row.self_cpu.interval is not None:
            low, high = row.self_cpu.interval.low, row.self_cpu.interval.high
    else:
        return None
    return LayerFigures(
        path=row.path,
        class_name=row.class_name,
        self_us=value,
        self_low=low,
        self_high=high,
        total_us=row.total_cpu.median if row.total_cpu is not None else None,
        share_pct=row.pct_self,
        flops=row.work.flops if row.work is not None else None,
        mem_bytes=row.memory.peak if row.memory is not None else None,
    )


def _stored(db: Path) -> list[tuple[object, ...]]:
    """Every figure row of the history, with its layer's path, in layer order."""
    columns = ", ".join(f"f.{c}" for c in FIGURE_COLUMNS[2:])
    with sqlite3.connect(db) as conn:
        return conn.execute(
            f"SELECT l.path, {columns} FROM figures f JOIN layers l ON l.id = f.layer_id "
            "ORDER BY f.session_id, l.path"
        ).fetchall()


def _rows_of(snapshot: Snapshot) -> list[tuple[object, ...]]:
    rows = [(f.path, *(getattr(f, c) for c in FIGURE_COLUMNS[2:])) for f in snapshot.layers]
    return sorted(rows, key=lambda row: str(row[0]))


SESSIONS = {
    "forward": lambda: _run(),
    "backward and memory": lambda: _run(backward=True, profile_memory=True),
    "flops": lambda: _run(flops=True, peak_gflops=100.0, peak_gbps=10.0),
    "training loop": _training_loop,
}


@pytest.mark.parametrize("kind", SESSIONS)
def test_the_file_read_directly_stores_what_the_layer_table_showed(
    kind: str, tmp_path: Path
) -> None:
    session = SESSIONS[kind]()
    file = _saved(session, tmp_path, "session")
    assert read_figures(file.read_text(encoding="utf-8")) is not None  # the direct reading
    whole = load_session(file)
    expected = _reference(whole)
    assert read_snapshot(file) == expected
    assert snapshot_of(whole) == expected == snapshot_of(session)  # run --history's path
    layers = expected.layers
    assert len(layers) == len(whole.records) and len({f.class_name for f in layers}) >= 3
    assert all(f.self_low is not None and f.share_pct is not None for f in layers)
    assert whole.outside_cpu_us is not None  # totals are subtree sums (the next test: not)
    if kind != "training loop":  # (a training loop profiles the layers that hold no layer)
        assert any(f.total_us != f.self_us for f in layers)  # a parent's total: its subtree's
    if kind == "backward and memory":
        assert all(f.mem_bytes is not None for f in layers)
        assert any(r.backward_self_cpu_us is not None for r in whole.records)
    if kind == "flops":
        assert any(f.flops for f in layers)
    if kind == "training loop":
        assert whole.optimizer is not None and whole.outside_cpu_us is not None
    db = tmp_path / "history.sqlite"
    with open_store(db, create=True) as store:
        assert store.add(read_snapshot(file), CommitRef("c1")).added
    assert _stored(db) == _rows_of(expected)  # bit for bit: floats compared exactly


def test_without_the_outside_time_or_the_iterations_totals_are_as_measured(
    tmp_path: Path,
) -> None:
    session = replace(_run(), outside_cpu_us=None)
    for variant in (session, replace(session, iteration_cpu_us=())):
        file = _saved(variant, tmp_path, "older")
        assert read_figures(file.read_text(encoding="utf-8")) is not None
        assert read_snapshot(file) == _reference(load_session(file))


def test_device_times_are_followed_where_measured(tmp_path: Path) -> None:
    session = _run()
    timed = [  # a device time on every other layer (the others ran no kernel of their own)
        replace(r, self_device_us=Stat(i * 1.5, i * 1.0, i * 2.0)) if i % 2 else r
        for i, r in enumerate(session.records)
    ]
    file = _saved(replace(session, use_device=True, records=tuple(timed)), tmp_path, "device")
    assert read_figures(file.read_text(encoding="utf-8")) is not None
    snapshot = read_snapshot(file)
    assert snapshot == _reference(load_session(file)) and snapshot.timing == "device"
    assert [f.self_us for f in snapshot.layers][:4] == [0.0, 1.5, 0.0, 4.5]


def test_a_file_of_an_older_layout_is_read_by_the_full_reader_to_the_same_snapshot(
    tmp_path: Path,
) -> None:
    file = _saved(_run(), tmp_path, "session")
    data = json.loads(file.read_text(encoding="utf-8"))
    stat = data["records"][0]["self_cpu_us"]
    data["records"][0]["self_cpu_us"] = dict(zip(("median", "min", "max"), stat, strict=True))
    older = tmp_path / "older.json"  # a Stat as files before schema 4 held it
    older.write_text(json.dumps(data), encoding="utf-8")
    assert read_figures(older.read_text(encoding="utf-8")) is None
    assert read_snapshot(older) == read_snapshot(file) == _reference(load_session(file))


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r.update(calls="20"), "records[1].calls: expected int"),
        (lambda r: r.update(self_cpu_us=[1.0, 2.0]), "records[1].self_cpu_us"),
        (lambda r: r.update(per_iteration={"self_cpu_us": "1 2 x"}), "not a number"),
        (lambda r: r.update(per_iteration={"self_cpu_us": "1 2"}), "do not hold 8 values"),
        (lambda r: r.update(shape="1x2"), "unknown field 'shape'"),
    ],
)
def test_a_corrupt_figure_is_refused_in_the_full_readers_words(
    change: object, named: str, tmp_path: Path
) -> None:
    file = _saved(_run(), tmp_path, "session")
    data = json.loads(file.read_text(encoding="utf-8"))
    change(data["records"][1])  # type: ignore[operator]
    file.write_text(json.dumps(data), encoding="utf-8")
    assert read_figures(file.read_text(encoding="utf-8")) is None
    with pytest.raises(SessionFileError, match="corrupt hybridprof-session file") as raised:
        read_snapshot(file)
    assert named in str(raised.value) and str(file) in str(raised.value)


def test_without_ops_the_snapshot_is_the_same_and_no_op_is_read(tmp_path: Path) -> None:
    file = _saved(_run(), tmp_path, "session")
    whole = load_session(file)
    figures = load_session(file, ops=False)
    assert any(r.ops for r in whole.records)  # the file holds op lists
    assert all(r.ops == () for r in figures.records) and figures.outside_ops == ()
    assert snapshot_of(figures) == snapshot_of(whole) == read_snapshot(file)
