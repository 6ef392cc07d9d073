"""Memory per layer on real CPU torch (`profile_memory=True`): the issue's must-holds, each
against an independent count (the model's own sizes, a plain saved_tensors_hooks pair, torch's
own profiler events of the same step)."""

from __future__ import annotations

import gc
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

import hybridprof
from hybridprof.datamodel import DeviceMemory, LayerMemory, ProfileSession
from hybridprof.datamodel.memory import LAYER_BYTES
from hybridprof.files.loader import ModelInputs
from hybridprof.runtime.basics.workload import training_step

MiB = 2**20


@pytest.fixture(autouse=True)
def one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def device_of(session: ProfileSession) -> DeviceMemory:
    assert session.memory is not None and session.memory.primary is not None
    return session.memory.primary


def layer(device: DeviceMemory, path: str) -> LayerMemory:
    found = device.layer(path)
    assert found is not None, f"no memory row for {path!r}"
    return found


class Spike(nn.Module):
    """Allocates and frees a 64 MiB temporary inside its forward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        tmp = torch.ones(16 * MiB)  # 64 MiB of float32
        total = tmp.sum()
        del tmp
        return x + total * 0


class ViewOnly(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.view(x.shape[0], -1)


def spike_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 32), Spike(), ViewOnly(), nn.ReLU(), nn.Linear(32, 4))


@pytest.mark.parametrize("backward", [False, True])
def test_the_layer_with_a_64_mib_temporary_is_the_step_peak(backward: bool) -> None:
    session = hybridprof.profile(
        spike_model(), torch.randn(16, 32), warmup=1, iters=2, backward=backward,
        profile_memory=True,
    )  # fmt: skip
    device = device_of(session)
    assert layer(device, "1").peak >= 64 * MiB
    assert layer(device, "1").self_alloc >= 64 * MiB and layer(device, "1").self_freed >= 64 * MiB
    assert (device.peak.phase, device.peak.path) == ("forward", "1")
    assert device.peak.above_start_bytes >= 64 * MiB
    view = layer(device, "2")  # a view allocates nothing
    assert view.peak == 0 and view.self_alloc == 0 and view.alloc == 0


def mlp(inplace: bool = False) -> nn.Module:
    torch.manual_seed(0)
    if inplace:
        return nn.Sequential(nn.Linear(256, 512), nn.ReLU(inplace=True), nn.Linear(512, 10))
    return nn.Sequential(
        nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 10)
    )


def whole_model_saved(model: nn.Module, step: Callable[[], Any]) -> int:
    """What one plain saved_tensors_hooks pair sees saved in a step: distinct storages, the
    parameters' and buffers' left out."""
    params = {t.untyped_storage().data_ptr() for t in [*model.parameters(), *model.buffers()]}
    seen: dict[int, int] = {}

    def pack(t: torch.Tensor) -> Any:
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t.detach()

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        step()
    return sum(seen.values())


def test_a_linear_saves_its_input_and_the_layers_add_up_to_the_whole_model() -> None:
    model, x = mlp(), torch.randn(64, 256)
    session = hybridprof.profile(model, x, warmup=1, iters=2, backward=True, profile_memory=True)
    device = device_of(session)
    for path, fan_in in (("0", 256), ("2", 512), ("4", 512)):
        assert layer(device, path).saved == pytest.approx(64 * fan_in * 4, rel=0.01)
    assert layer(device, "1").saved == 64 * 512 * 4  # ReLU saves its output
    # Linear 0's input needs no grad: only x is saved; Linear 2 saves its weight too (apart)
    assert layer(device, "0").saved_params == 0
    assert layer(device, "2").saved_params == 512 * 512 * 4
    whole = whole_model_saved(model, lambda: model(x).float().mean().backward())
    ours = sum(m.saved_unique for m in device.layers) + (
        device.outside.saved_unique if device.outside else 0
    )
    assert ours == pytest.approx(whole, rel=0.01)
    assert device.saved_bytes == ours


def test_the_allocator_view_says_which_layer_keeps_what_an_inplace_activation_saves() -> None:
    session = hybridprof.profile(
        mlp(inplace=True), torch.randn(64, 256), warmup=1, iters=1, backward=True,
        profile_memory=True,
    )  # fmt: skip
    linear = layer(device_of(session), "0")
    assert linear.saved == 64 * 256 * 4  # its input
    assert linear.saved_alloc == 64 * 512 * 4  # its output, which the in-place ReLU saves


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(1000, 128)
        self.blocks = nn.ModuleList(
            nn.TransformerEncoderLayer(128, 4, 256, dropout=0.1, batch_first=True) for _ in range(2)
        )
        self.head = nn.Linear(128, 1000)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def raw_peak_above_start(step: Callable[[], Any]) -> int:
    """The peak of torch's own allocation events over one step, above its start: the step's
    second run in one profiler session, so that the frees of what the first made are reported
    (the CPU allocator reports none of a block allocated before the profiler started). The
    cyclic GC waits, as it does in a profiled block: a collection of an earlier test's garbage
    inside the step would change its peak."""
    gc.collect()
    gc.disable()
    try:
        with torch.autograd.profiler.profile(profile_memory=True) as prof:
            step()
            mark = time.time_ns()
            step()
    finally:
        gc.enable()
    events = prof.kineto_results.events()
    sizes = [e.nbytes() for e in events if e.name() == "[memory]" and e.start_ns() >= mark]
    return max(0, *itertools.accumulate(sizes))


def test_a_transformer_step_with_adamw_peaks_where_the_events_do_and_its_parts_add_up() -> None:
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids, target = torch.randint(0, 1000, (8, 64)), torch.randint(0, 1000, (8, 64))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        out = model(ids)
        loss = nn.functional.cross_entropy(out.reshape(-1, 1000), target.reshape(-1))
        loss.backward()
        opt.step()

    step()  # the optimizer's state exists before profiling, as after any first step
    expected_above = raw_peak_above_start(step)
    with hybridprof.Profile(model, profile_memory=True, optimizers=[opt], leaves_only=False) as p:
        step()
    device = device_of(p.session())
    peak = device.peak
    assert peak.phase in ("backward", "optimizer")
    # Within 1% (the promise of docs/memory.md; an Embedding model once read +6% to +17%): the two
    # runs are separate steps, and where a few blocks are freed relative to the peak varies with
    # what ran before the test in the same process (seen in full-suite orders: 512 bytes, and once
    # 128 KiB, 0.7%, of 19 MB).
    assert peak.above_start_bytes == pytest.approx(expected_above, rel=1e-2)
    assert peak.categories is not None
    assert abs(peak.categories.total() - peak.live_bytes) <= 0.02 * peak.live_bytes
    param_bytes = sum(t.numel() * 4 for t in model.parameters())
    assert peak.categories.parameters == param_bytes
    assert peak.categories.optimizer_state == pytest.approx(2 * param_bytes, rel=0.01)
    assert peak.categories.activations > 0.5 * (peak.live_bytes - 3 * param_bytes)
    assert device.start is not None and device.start.optimizer_state >= 2 * param_bytes


class EmbeddingMlp(nn.Module):
    """A lookup feeding an MLP whose head shares the lookup's weight (as GPT-2's does): the
    weight's gradient comes from EmbeddingBackward0 and from the head's matmul."""

    def __init__(self, tied: bool) -> None:
        super().__init__()
        self.emb = nn.Embedding(3000, 64, padding_idx=0)
        self.mlp = nn.Sequential(nn.Linear(64, 256), nn.GELU(), nn.Linear(256, 64))
        self.head = nn.Linear(64, 3000, bias=False)
        if tied:
            self.head.weight = self.emb.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.mlp(self.emb(ids)))


@pytest.mark.parametrize("tied", [False, True])
def test_an_embedding_models_step_peaks_where_torchs_own_events_do(tied: bool) -> None:
    torch.manual_seed(0)
    model = EmbeddingMlp(tied)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ids = torch.randint(0, 3000, (8, 48))

    def step() -> None:
        opt.zero_grad(set_to_none=True)
        logits = model(ids)
        nn.functional.cross_entropy(logits.reshape(-1, 3000), ids.reshape(-1)).backward()
        opt.step()

    step()
    expected_above = raw_peak_above_start(step)
    with hybridprof.Profile(model, profile_memory=True, optimizers=[opt], leaves_only=False) as p:
        step()
    assert device_of(p.session()).peak.above_start_bytes == pytest.approx(expected_above, rel=1e-3)


def test_memory_totals_are_torchs_own_events_and_nothing_is_negative_but_net() -> None:
    model, x = mlp(), torch.randn(64, 256)
    session = hybridprof.profile(model, x, warmup=1, iters=2, backward=True, profile_memory=True)
    device = device_of(session)
    model.train()
    training_step(model, ModelInputs((x,)))
    with torch.autograd.profiler.profile(profile_memory=True) as prof:
        training_step(model, ModelInputs((x,)))
    sizes = [e.nbytes() for e in prof.kineto_results.events() if e.name() == "[memory]"]
    assert device.allocated_bytes == sum(n for n in sizes if n > 0)
    assert device.freed_bytes == -sum(n for n in sizes if n < 0)
    rows = [*device.layers, *([device.outside] if device.outside else [])]
    own = sum(m.self_alloc + m.backward_self_alloc for m in rows)
    assert own == device.allocated_bytes  # every allocation in exactly one row
    assert sum(m.self_freed + m.backward_self_freed for m in rows) == device.freed_bytes
    for memory in rows:
        assert all(getattr(memory, name) >= 0 for name in LAYER_BYTES), memory
    assert any(m.self_net < 0 for m in rows)  # the net change is signed, and named so
    assert device.peak.live_bytes >= 0 and device.start_bytes > 0


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(256, 256)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.shared = nn.Linear(256, 256)
        self.ck = Block()
        self.plain = Block()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.shared(x)
        h = checkpoint(self.ck, h, use_reentrant=False)
        h = self.plain(h)
        return self.shared(h)  # the same module called twice


def test_checkpointed_layers_save_nothing_and_recompute_in_backward() -> None:
    torch.manual_seed(0)
    session = hybridprof.profile(
        Net(), torch.randn(64, 256), warmup=1, iters=1, backward=True, profile_memory=True
    )
    device = device_of(session)
    checkpointed, plain = layer(device, "ck.fc"), layer(device, "plain.fc")
    assert checkpointed.saved == 0 and plain.saved == 64 * 256 * 4
    assert checkpointed.backward_self_alloc > plain.backward_self_alloc  # the recomputed output
    assert layer(device, "shared").self_alloc == 2 * 64 * 256 * 4  # two calls, summed
    assert layer(device, "").saved == 64 * 256 * 4  # checkpoint saves its input, at the caller


def test_the_with_block_sees_gradients_made_before_the_profiler_freed_by_zero_grad() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(32, 512)

    def step() -> None:
        opt.zero_grad(set_to_none=True)  # frees the last step's gradients
        model(x).sum().backward()
        opt.step()

    step()
    with hybridprof.Profile(model, profile_memory=True, optimizers=[opt]) as prof:
        step()
    device = device_of(prof.session())
    grad_bytes = sum(p.numel() * 4 for p in model.parameters())
    assert device.start is not None and device.start.gradients == grad_bytes
    assert device.timeline is not None
    assert min(device.timeline.live_bytes) <= device.start_bytes - grad_bytes
    assert any("weakref" in note for note in device.notes)


def test_the_callers_saved_tensor_hooks_still_run_and_a_layers_own_are_said() -> None:
    class Offloading(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc = nn.Linear(64, 64)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            with torch.autograd.graph.save_on_cpu():
                return self.fc(x)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), Offloading())
    x = torch.randn(8, 64)
    packed: list[int] = []

    def pack(t: torch.Tensor) -> torch.Tensor:
        packed.append(1)
        return t

    outer = torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t)
    with outer, hybridprof.Profile(model, profile_memory=True, leaves_only=False) as prof:
        model(x).sum().backward()
    device = device_of(prof.session())
    assert packed  # theirs ran: ours chains to it
    assert layer(device, "0").saved == 8 * 64 * 4  # and ours still saw what the first saves
    assert layer(device, "1.fc").saved_hidden and not layer(device, "0").saved_hidden
    assert layer(device, "1.fc").saved == 0  # save_on_cpu took what it saves


def test_the_model_and_torch_are_left_without_our_hooks() -> None:
    model = mlp()
    hybridprof.profile(model, torch.randn(4, 256), warmup=1, iters=1, backward=True,
                       profile_memory=True)  # fmt: skip
    assert all(p._post_accumulate_grad_hooks is None for p in model.parameters())
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None
    with hybridprof.Profile(model, profile_memory=True):
        model(torch.randn(4, 256)).sum().backward()
    assert all(p._post_accumulate_grad_hooks is None for p in model.parameters())
    assert torch._C._autograd._top_saved_tensors_default_hooks(False) is None


def test_a_session_with_memory_round_trips_and_renders_every_format(tmp_path: Any) -> None:
    from hybridprof.reporting import write_report

    session = hybridprof.profile(
        spike_model(), torch.randn(16, 32), warmup=1, iters=2, backward=True, profile_memory=True
    )
    assert ProfileSession.from_json(session.to_json()) == session
    frame = session.to_dataframe()
    assert {"mem_peak", "mem_saved", "mem_backward_peak", "mem_self_net"} <= set(frame.columns)
    spike = frame[frame["path"] == "1"].iloc[0]
    assert spike["mem_peak"] >= 64 * MiB
    for name in ("x.html", "x.txt", "x.csv", "x.json"):
        write_report(session, tmp_path / name)
    html = (tmp_path / "x.html").read_text()
    assert 'class="chart memory-timeline"' in html and 'id="chart-activations"' in html
    text = (tmp_path / "x.txt").read_text()
    assert "step peak" in text and "memory per layer on cpu" in text
    assert "mem_saved_unique" in (tmp_path / "x.csv").read_text().splitlines()[0]


@pytest.mark.parametrize("strategy", ["per-call", "timer"])
def test_other_strategies_say_per_layer_memory_needs_the_session_strategy(strategy: str) -> None:
    session = hybridprof.profile(
        mlp(), torch.randn(4, 256), warmup=0, iters=1, profile_memory=True, strategy=strategy
    )
    assert session.memory is None
    assert any("session strategy only" in w for w in session.warnings)


def test_a_replay_that_fails_leaves_the_run_and_says_why(monkeypatch: pytest.MonkeyPatch) -> None:
    import hybridprof.runtime.memory.replay as replay

    def unknown_layout(*_: object) -> None:
        raise KeyError("an event layout this replay does not know")

    monkeypatch.setattr(replay, "step_contexts", unknown_layout)
    session = hybridprof.profile(
        mlp(), torch.randn(4, 256), warmup=0, iters=2, backward=True, profile_memory=True
    )
    assert session.memory is None and session.records
    assert any("per-layer memory could not be worked out (KeyError" in w for w in session.warnings)


class Growing(nn.Module):
    """Each call allocates twice the temporary of the call before."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        tmp = torch.ones(1024 * 2**self.calls)
        return x + tmp.sum() * 0


def test_the_iteration_broken_down_is_the_one_with_the_highest_peak() -> None:
    session = hybridprof.profile(
        nn.Sequential(nn.Linear(8, 8), Growing()), torch.randn(2, 8), warmup=0, iters=3,
        profile_memory=True,
    )  # fmt: skip
    assert session.memory is not None and session.memory.addressed_iteration == 2
    device = device_of(session)
    assert device.peak.iteration == 2
    assert device.peak.above_start_bytes == device.peak_above_start_bytes.max


class ModifiesSaved(nn.Module):
    """Changes in place a tensor that exp() saved for backward: torch refuses the backward."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x.exp()
        z = y * 2
        y.add_(1)
        return z


def test_an_inplace_change_of_a_saved_tensor_still_fails_the_backward() -> None:
    from hybridprof.errors import ModelRunError

    model = nn.Sequential(nn.Linear(4, 4), ModifiesSaved())
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        model(torch.randn(2, 4)).sum().backward()  # torch, without hybridprof
    with pytest.raises(ModelRunError, match="modified by an inplace operation"):
        hybridprof.profile(
            model, torch.randn(2, 4), warmup=0, iters=1, backward=True, profile_memory=True
        )
    refused = pytest.raises(RuntimeError, match="modified by an inplace operation")
    with refused, hybridprof.Profile(model, profile_memory=True):
        model(torch.randn(2, 4)).sum().backward()


def test_an_iteration_left_out_for_stolen_time_leaves_the_timeline_to_the_next(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first measured iteration is the one broken down (what was live at the peak, the
    timeline); when it is left out, as another process took its core, the next one is."""
    from hybridprof.runtime.runs import stolen_time

    calls = iter([True])  # the first round "lost time", every later one not
    monkeypatch.setattr(stolen_time, "stolen", lambda wait, step: next(calls, False))
    model, x = mlp(), torch.randn(64, 256)
    session = hybridprof.profile(model, x, warmup=1, iters=2, backward=True, profile_memory=True)
    assert session.cpu_waits is not None and session.cpu_waits.excluded == 1
    device = device_of(session)
    assert device.timeline is not None and device.peak.categories is not None
