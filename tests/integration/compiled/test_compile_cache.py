"""`hybridprof run --compile` twice, in two processes, with the caches on (as a user has them):
the second compile is answered by inductor's cache, and its kernel map, read from hybridprof's
cache beside it, is the first run's; a damaged or missing map is never trusted, but rebuilt."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from hybridprof.datamodel import CompileSection, ProfileSession
from hybridprof.files.storage import load_session
from tests.integration.cli_run import SCRIPT

pytestmark = pytest.mark.slow

MODEL = """
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class Net(nn.Module):
    def __init__(self, d=16):
        super().__init__()
        self.tok = nn.Embedding(50, d)
        self.pos = nn.Embedding(8, d)
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.head = nn.Linear(d, 50)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def build_model():
    torch.manual_seed(0)
    return Net()


def example_inputs():
    return (torch.randint(0, 50, (2, 8)),)
"""


def _run(home: Path, out: str, *extra: str) -> ProfileSession:
    """One `run --compile` in a new process, its caches (torch's and hybridprof's) under `home`."""
    env = {
        **os.environ,
        "TORCHINDUCTOR_CACHE_DIR": str(home / "inductor"),
        "XDG_CACHE_HOME": str(home / "xdg"),
    }
    argv = [str(SCRIPT), "run", "net.py", "--compile", "--warmup", "1", "--iters", "2"]
    argv += ["--threads", "1", "--out-dir", out, *extra]
    done = subprocess.run(argv, cwd=home, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return load_session(home / out / "session.json")


def _section(session: ProfileSession) -> CompileSection:
    assert session.compiled is not None
    return session.compiled


def _kernel_map(session: ProfileSession) -> dict[str, Any]:
    """Where each kernel went: every layer's kernels (its ops, forward and backward), which
    layers have backward time, what each layer fused, and the compile section's map figures."""
    compiled = _section(session)
    return {
        "ops": {r.path: sorted(op.name for op in r.ops) for r in session.records},
        "backward": [r.path for r in session.records if r.backward_self_cpu_us is not None],
        "layers": compiled.layers,
        "state": compiled.kernel_map,
        "call_sites": compiled.call_sites,
        "matched": compiled.matched_events,
        "unmatched": compiled.unmatched_events,
    }


def _cache(session: ProfileSession) -> tuple[int, int]:
    """Graphs inductor's cache answered (maps read back), and cached ones compiled again."""
    return _section(session).cache_hits, _section(session).cache_rebuilt


def _maps(home: Path) -> list[Path]:
    return sorted((home / "xdg" / "hybridprof" / "kernel-maps").glob("*.json"))


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ProfileSession]:
    """A first run, forward and backward: inductor's cache cold, so everything is compiled."""
    home = tmp_path_factory.mktemp("cache")
    (home / "net.py").write_text(MODEL)
    return home, _run(home, "first", "--backward")


def _copy(home: Path, tmp_path: Path) -> Path:
    """The first run's folder with both caches, for a test to change its own copy."""
    shutil.copytree(home / "inductor", tmp_path / "inductor")
    shutil.copytree(home / "xdg", tmp_path / "xdg")
    (tmp_path / "net.py").write_text(MODEL)
    return tmp_path


def test_a_second_process_reads_its_kernel_map_from_the_cache(
    first: tuple[Path, ProfileSession], tmp_path: Path
) -> None:
    home, session = first
    assert _cache(session) == (0, 0)
    cold = _section(session)
    assert cold.kernel_map == "mapped" and cold.backward_compile_s > 0
    assert len(_maps(home)) == 2  # one map per graph: the forward and the backward
    mapped = _kernel_map(session)
    assert mapped["ops"]["blocks.0.up"] and "blocks.1.down" in mapped["backward"]
    again = _run(_copy(home, tmp_path), "second", "--backward")
    assert _cache(again) == (2, 0)
    notes = _section(again).notes
    assert any("inductor's cache answered 2 compiled graphs" in n for n in notes), notes
    assert _kernel_map(again) == mapped
    assert [r.path for r in again.records] == [r.path for r in session.records]


def test_a_damaged_or_missing_map_is_rebuilt_never_trusted(
    first: tuple[Path, ProfileSession], tmp_path: Path
) -> None:
    home, session = first
    copy = _copy(home, tmp_path)
    damaged, removed = _maps(copy)
    damaged.write_text(damaged.read_text()[:40])  # a half-written file
    removed.unlink()
    rebuilt = _run(copy, "rebuilt", "--backward")
    assert _cache(rebuilt) == (0, 2)
    assert any("without a kernel map" in n for n in _section(rebuilt).notes)
    assert _kernel_map(rebuilt) == _kernel_map(session)
    for path in _maps(copy):  # both stored again, whole
        assert json.loads(path.read_text())["key"] == path.stem
    assert len(_maps(copy)) == 2
    after = _run(copy, "after", "--backward")
    assert _cache(after) == (2, 0)
    assert _kernel_map(after) == _kernel_map(session)


def test_where_a_hit_cannot_be_mapped_both_caches_are_off_and_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """AOTAutograd bundling its compiled graphs (the user's setting): they carry no FX-graph key
    and bypass inductor's cache, so no cache is asked during the profile, and a note says so."""
    import torch
    import torch._dynamo.utils as dynamo_utils
    from torch._functorch import config as functorch_config

    import hybridprof
    from tests.compiled_models import fresh

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    torch.manual_seed(0)
    model = fresh().MLP().eval()
    asked = ("autograd_cache_miss", "autograd_cache_hit", "autograd_cache_bypass")
    before = [dynamo_utils.counters["aot_autograd"][name] for name in asked]
    with functorch_config.patch({"bundled_autograd_cache": True}), torch.no_grad():
        session = hybridprof.profile(model, torch.randn(4, 32), compile=True, warmup=1, iters=1)
        assert functorch_config.bundled_autograd_cache  # the user's settings are left as set
    assert [dynamo_utils.counters["aot_autograd"][name] for name in asked] == before
    compiled = _section(session)
    assert compiled.kernel_map == "mapped" and compiled.cache_hits == 0
    assert any("caches were off for the run (AOTAutograd bundles" in n for n in compiled.notes)
    assert not (tmp_path / "xdg").exists()  # no map stored that no hit could use
