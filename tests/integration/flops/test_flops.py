"""`profile(..., flops=True)` / `run --flops` on real CPU torch: exact counts, totals,
attribution."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode

from hybridprof.analysis.roofline import NOT_COUNTED, session_rooflines
from hybridprof.api import profile
from hybridprof.datamodel import ProfileSession
from hybridprof.runtime.flops.formulas import EXTRA_FORMULAS
from tests.paths import FIXTURES

PEAK = {"peak_gflops": 50.0, "peak_gbps": 10.0}  # given: no microbenchmark in most tests


@pytest.fixture(autouse=True)
def private_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.grouped = nn.Conv2d(8, 12, 5, padding=2, groups=4, bias=False)
        self.act = nn.ReLU()
        self.drop = nn.Dropout(0.1)
        self.fc = nn.Linear(12, 7)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.act(self.grouped(self.conv(x)))  # N x 12 x 8 x 8
        rows = y.flatten(2).transpose(1, 2)  # N x 64 x 12: a 3-D input to the Linear
        return self.fc(self.drop(rows)) * 2.0


class Block(nn.Module):
    """A parent whose own forward does the attention (its out_proj is never called)."""

    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(16)
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)
        self.mlp = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm(x)
        a, _ = self.attn(h, h, h, need_weights=False)
        return self.mlp(x + a)


class Decoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(Block(), Block())
        self.head = nn.Linear(16, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def _flops_profile(model: nn.Module, x: torch.Tensor, **options: object) -> ProfileSession:
    torch.manual_seed(0)
    session = profile(model, x, warmup=0, iters=2, flops=True, **{**PEAK, **options})
    assert session.flops is not None
    return session


def _counter_total(model: nn.Module, x: torch.Tensor, backward: bool) -> int:
    # FlopCounterMode with the formulas hybridprof adds (attention on CPU, grouped convolutions'
    # backward): the rest is torch's registry, which both use
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FORMULAS) as counter:
        if backward:
            model(x).float().mean().backward()
        else:
            model(x)  # as FlopCounterMode is used: autograd on
    for parameter in model.parameters():
        parameter.grad = None
    return counter.get_total_flops()


def test_conv_and_linear_flops_equal_the_analytic_count() -> None:
    model, n = ConvNet(), 2
    session = _flops_profile(model, torch.randn(n, 3, 16, 16))
    work = session.flops
    assert work is not None
    conv, grouped, fc = (work.layer(p) for p in ("conv", "grouped", "fc"))
    assert conv is not None and grouped is not None and fc is not None
    # 2 * Cin/groups * K * K * Cout * Hout * Wout * N
    assert conv.flops == 2 * 3 * 3 * 3 * 8 * 8 * 8 * n
    assert grouped.flops == 2 * (8 // 4) * 5 * 5 * 12 * 8 * 8 * n
    # 2 * in * out * rows, rows = N * 64 positions
    assert fc.flops == 2 * 12 * 7 * (n * 64)
    assert conv.total_flops == conv.flops and conv.bytes > 0


def test_ops_without_a_formula_are_listed_not_silently_zero() -> None:
    session = _flops_profile(ConvNet().eval(), torch.randn(1, 3, 16, 16))
    work = session.flops
    assert work is not None
    act = work.layer("act")
    assert act is not None and act.flops == 0
    assert [o.name for o in act.not_counted] == ["aten.relu"]
    assert act.bytes == 2 * 12 * 8 * 8 * 4  # read and write one float32 activation
    drop = work.layer("drop")  # eval-mode Dropout runs no op: a row with nothing in it
    assert drop is not None and (drop.flops, drop.bytes, drop.not_counted) == (0, 0, ())
    root = work.layer("")  # the root's own `* 2.0`, outside every profiled layer
    assert root is not None and [o.name for o in root.not_counted] == ["aten.mul"]


@pytest.mark.parametrize("backward", [False, True])
def test_layers_add_up_to_flop_counter_modes_total(backward: bool) -> None:
    model, x = Decoder(), torch.randn(2, 10, 16)
    session = _flops_profile(model, x, backward=backward)
    work = session.flops
    assert work is not None
    expected = _counter_total(model, x, backward)
    assert expected > 0
    layers = sum(w.flops + w.backward_flops for w in work.layers)
    assert abs(layers - expected) <= 0.001 * expected
    assert work.forward_flops + work.backward_flops == expected
    if backward:
        assert work.backward_flops > work.forward_flops
        head = work.layer("head")
        assert head is not None and head.backward_flops == 2 * head.flops  # grad input + weight


def test_attention_counts_for_its_parent_selected_or_not() -> None:
    model, x = Decoder(), torch.randn(2, 10, 16)
    with FlopCounterMode(display=False, custom_mapping=EXTRA_FORMULAS) as counter:
        model(x)
    attn_flops = sum(counter.get_flop_counts()["Decoder.blocks.0.attn"].values())
    leaves = _flops_profile(model, x).flops  # attn: a parent whose out_proj never runs
    assert leaves is not None
    attn = leaves.layer("blocks.0.attn")
    assert attn is not None and attn.flops == attn_flops > 0
    chosen = _flops_profile(model, x, depth=None, paths=["blocks.0.attn", "blocks.0.mlp"])
    assert chosen.record("blocks.0.attn") is not None
    work = chosen.flops
    assert work is not None
    attn = work.layer("blocks.0.attn")
    assert attn is not None and attn.flops == attn_flops


def test_a_selected_parent_owns_its_unselected_childrens_work() -> None:
    model, x = Decoder(), torch.randn(2, 10, 16)
    session = _flops_profile(model, x, paths=["blocks.0", "blocks.1", "head"])
    work = session.flops
    assert work is not None
    block = work.layer("blocks.0")
    assert block is not None and block.flops == block.total_flops > 0
    attn = work.layer("blocks.0.attn")  # its work is the profiled block's self, like its time
    assert attn is not None and attn.flops == 0 and attn.total_flops > 0


def test_the_counting_pass_leaves_timing_and_the_model_alone() -> None:
    model, x = ConvNet(), torch.randn(1, 3, 16, 16)
    before = {name: p.detach().clone() for name, p in model.state_dict().items()}
    session = _flops_profile(model, x, backward=True)
    assert all(r.calls == 2 for r in session.records if r.path != "drop")  # 2 iterations only
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())
    assert all(p.grad is None for p in model.parameters())
    assert model.training  # as it was: a new module trains
    for name, value in model.state_dict().items():
        assert torch.equal(value, before[name]), name


def test_without_flops_the_session_has_none() -> None:
    session = profile(ConvNet(), torch.randn(1, 3, 16, 16), warmup=0, iters=1)
    assert session.flops is None
    assert '"flops"' not in session.to_json()


def test_the_peak_is_measured_once_then_cached(tmp_path: Path) -> None:
    from hybridprof.runtime.flops.peak import cache_dir

    x = torch.randn(1, 3, 16, 16)
    first = profile(ConvNet(), x, warmup=0, iters=1, flops=True, threads=1).flops
    cached_in = cache_dir() / "peak.json"
    assert first is not None and first.peak.source.startswith("measured (at load ")
    assert f"cached in {cached_in} for the next runs" in first.peak.source
    assert first.peak.gflops > 0 and first.peak.gbps > 0
    assert (cache_dir() / "peak.json").is_file()
    assert cache_dir().is_relative_to(tmp_path)
    again = profile(ConvNet(), x, warmup=0, iters=1, flops=True, threads=1).flops
    assert again is not None and again.peak.source.startswith("cached (measured 20")
    assert (
        " at load " in again.peak.source
        and f"read from {cached_in}; delete it" in again.peak.source
    )
    assert (again.peak.gflops, again.peak.gbps) == (first.peak.gflops, first.peak.gbps)
    given = profile(ConvNet(), x, warmup=0, iters=1, flops=True, threads=1, peak_gbps=3.5).flops
    assert given is not None and given.peak.gbps == 3.5 and "given" in given.peak.source


def test_a_session_with_flops_round_trips() -> None:
    session = _flops_profile(Decoder(), torch.randn(1, 4, 16), backward=True)
    again = ProfileSession.from_json(session.to_json())
    assert again == session


SMALL = FIXTURES / "run_small.py"
QUICK = ("--warmup", "0", "--iters", "2", "--threads", "1")


def test_run_flops_prints_verdicts_and_report_rerenders_every_format(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from hybridprof.cli import main

    out = tmp_path / "s.json"
    argv = ["run", str(SMALL), *QUICK, "--flops", "--backward", "--peak-gflops", "40"]
    assert main([*argv, "--peak-gbps", "8", "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Verdict" in printed and "FLOPs per step:" in printed
    assert "peak 40 GFLOP/s and 8 GB/s (given" in printed
    assert "not counted (no FLOP formula):" in printed
    session = ProfileSession.from_json(out.read_text())
    assert session.flops is not None and session.flops.backward_flops > 0
    reports = [tmp_path / f"r.{ext}" for ext in ("txt", "html", "pdf", "csv", "json")]
    assert main(["report", str(out), *(a for r in reports for a in ("-o", str(r)))]) == 0
    txt, html, pdf, csv_file, json_file = reports
    assert "roofline, self figures per step" in txt.read_text()
    assert 'id="chart-roofline"' in html.read_text() and "Verdict" in html.read_text()
    assert pdf.read_bytes().startswith(b"%PDF")
    assert "verdict" in csv_file.read_text().splitlines()[0]
    assert "achieved_gflops" in json_file.read_text()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--peak-gflops", "10"], "--peak-gflops is used with --flops"),
        (["--flops", "--peak-gbps", "0"], "--peak-gbps must be a positive number"),
        (["--flops", "--peak-gflops", "nan"], "--peak-gflops must be a positive number"),
    ],
)
def test_peak_options_are_checked(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from hybridprof.cli import main

    assert main(["run", str(SMALL), *QUICK, *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_byte_estimates_follow_the_tensors() -> None:
    from hybridprof.runtime.flops.op_bytes import bytes_of, footprint, moves_nothing

    aten = torch.ops.aten
    assert footprint(torch.zeros(4, 1).expand(4, 8)) == 4 * 4  # a broadcast dimension read once
    assert moves_nothing(aten.view.default) and moves_nothing(aten.t.default)
    assert moves_nothing(aten.empty.memory_format) and not moves_nothing(aten.add.Tensor)
    a = torch.ones(10)
    assert bytes_of((a, a), {}, a + a) == 40 + 40  # `a` read once, the result written


def test_attention_in_eval_mode_is_counted_not_fused_away() -> None:
    # eval + need_weights=False is nn.MultiheadAttention's fused fast path under no_grad
    model, x = Decoder().eval(), torch.randn(1, 6, 16)
    work = _flops_profile(model, x).flops
    assert work is not None
    attn = work.layer("blocks.0.attn")
    assert attn is not None and attn.flops >= 2 * 6 * 16 * 16 * 4  # in (q, k, v) and out projection
    names = {o.name for o in attn.not_counted}
    assert "aten._native_multi_head_attention" not in names
    assert all(not m._forward_hooks for m in model.modules()) and not model.training


class Normed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bn = nn.BatchNorm2d(4)
        self.gn = nn.GroupNorm(2, 4)
        self.ln = nn.LayerNorm(16)
        self.act = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.ln(self.gn(self.bn(x)).flatten(2)))


@pytest.mark.parametrize("train", [False, True])
def test_the_normalisation_layers_are_counted(train: bool) -> None:
    """BatchNorm, GroupNorm and LayerNorm: per element the statistics (4 FLOPs, when computed)
    and the normalisation with its scale and shift (4 FLOPs); an eval-mode BatchNorm uses its
    running statistics."""
    model = Normed().train(train)
    session = _flops_profile(model, torch.randn(2, 4, 4, 4))
    work = session.flops
    assert work is not None
    elements = 2 * 4 * 4 * 4
    for path, stats in (("bn", train), ("gn", True), ("ln", True)):
        layer = work.layer(path)
        assert layer is not None, path  # (a training BatchNorm's num_batches_tracked += 1 is not)
        assert not [o.name for o in layer.not_counted if "norm" in o.name], path
        assert layer.flops == elements * (4 + (4 if stats else 0)), path
    lines = {r.path: r for r in session_rooflines(session)}
    assert lines["bn"].verdict and lines["ln"].verdict  # timed and counted: a verdict
    assert lines["act"].verdict == NOT_COUNTED  # ReLU has no formula: not "overhead-bound"
    assert lines["bn"].verdict != NOT_COUNTED
