"""A compiled train step (`torch.compile(train_step)`: forward, loss, backward, the optimizer's
step and zero_grad in one compiled function) inside `with Profile(model)`, with `prof.step()`:
its kernels are split by layer like a compiled model's, forward and backward, the optimizer's
kernels are the `(optimizer)` row, the loss is outside; it trains bitwise as the same compiled
loop without hybridprof, the model is left as it was, and the step's next call after the block
compiles nothing."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hybridprof
from hybridprof.datamodel import ProfileSession
from tests.compiled_models import counters, delta

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

D, HEADS, VOCAB = 32, 2, 50
WARM_STEPS = 2  # the user's loop ran its compiled step this often before the block
STEPS = 10  # steps in the block: one warm-up step (hybridprof's compile of the step), then measured


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(D, 3 * D)
        self.proj = nn.Linear(D, D)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, HEADS, D // HEADS).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, D))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(D)
        self.attn = Attention()
        self.ln_2 = nn.LayerNorm(D)
        self.mlp = nn.Sequential(nn.Linear(D, 4 * D), nn.GELU(), nn.Linear(4 * D, D))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.ln_f = nn.LayerNorm(D)
        self.head = nn.Linear(D, VOCAB)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def compiled_train_step(
    model: nn.Module, optimizer: torch.optim.Optimizer
) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The user's step, compiled as a whole (it names the model by a closure variable)."""

    @torch.compile
    def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        return loss

    return train_step


def _setup() -> tuple[nn.Module, Callable[..., torch.Tensor], torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    model = TinyTransformer()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x = torch.randint(0, VOCAB, (4, 16))
    y = torch.randn(4, 16, VOCAB)
    return model, compiled_train_step(model, optimizer), x, y


@pytest.fixture(scope="module")
def profiled() -> Iterator[dict[str, Any]]:
    # One thread: with two, inductor's CPU kernel of the embedding's backward adds into the
    # gradient in whatever order its threads run, so two unprofiled runs already differ in the
    # last bit (seen here: emb.weight, and every weight after it through the next forward).
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield from _profiled()
    finally:
        torch.set_num_threads(threads)


def _profiled() -> Iterator[dict[str, Any]]:
    bare, bare_step, x, y = _setup()
    for _ in range(WARM_STEPS + STEPS):  # the same compiled loop, unprofiled
        bare_step(x, y)
    model, train_step, x, y = _setup()
    for _ in range(WARM_STEPS):  # the loop compiled its step before the profile
        train_step(x, y)
    attributes = {name: dict(vars(m)) for name, m in model.named_modules()}
    walls_us = []
    # the block's first step compiles the step again under hybridprof's hooks: a warm-up step
    with hybridprof.Profile(
        model, schedule=hybridprof.schedule(warmup=1, active=STEPS - 1)
    ) as prof:
        for _ in range(STEPS):
            started = time.perf_counter()
            train_step(x, y)
            walls_us.append((time.perf_counter() - started) * 1e6)
            prof.step()
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    before = counters()
    train_step(x, y)
    yield {
        "session": prof.session(),
        "model": model,
        "bare": bare,
        "weights": weights,
        "next": delta(before, counters()),
        "attributes": attributes,
        "walls_us": walls_us[1:],
    }
    del bare_step, train_step, prof
    while gc.collect():  # dynamo's compile state goes with them, here, not in a later test
        pass


def _linears(model: nn.Module) -> list[str]:
    return [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]


def test_every_linear_has_forward_and_backward_time(profiled: dict[str, Any]) -> None:
    session: ProfileSession = profiled["session"]
    assert session.compiled is not None and session.compiled.kernel_map == "mapped"
    linears = _linears(profiled["model"])
    assert len(linears) == 9
    for path in linears:
        record = session.record(path)
        assert record is not None and record.self_cpu_us.median > 0, path
        assert record.backward_self_cpu_us is not None, path
        assert record.backward_self_cpu_us.median > 0, path


def test_the_optimizer_has_its_row_and_the_rows_add_up(profiled: dict[str, Any]) -> None:
    session: ProfileSession = profiled["session"]
    assert session.optimizer is not None and session.optimizer.self_cpu_us.median > 0
    assert session.outside_cpu_us is not None
    rows = session.outside_cpu_us.median + session.optimizer.self_cpu_us.median
    for record in session.records:
        backward = record.backward_self_cpu_us
        rows += record.self_cpu_us.median + (backward.median if backward is not None else 0.0)
    # a sum of medians is not the median of the sums: it moves with the steps' spread on a busy
    # machine, so it is held to the steps' own range (the check below is the exact one, per step)
    steps = sorted(session.iteration_cpu_us)
    assert steps[0] * 0.95 <= rows <= steps[-1] * 1.05, (rows, steps)
    # each step's range holds the step the loop timed around its call, and little more
    for measured, wall in zip(session.iteration_cpu_us, profiled["walls_us"], strict=True):
        assert wall <= measured * 1.0001 and measured <= wall * 1.05 + 200, (measured, wall)
    # the loss is the step's own code: its kernel is outside every layer
    assert any("mse_loss" in op.name for op in session.outside_ops), session.outside_ops


def test_it_trains_bitwise_as_the_same_compiled_loop_unprofiled(profiled: dict[str, Any]) -> None:
    bare = profiled["bare"].state_dict()
    for name, value in profiled["weights"].items():
        assert torch.equal(value, bare[name]), name


def test_the_session_says_what_was_mapped(profiled: dict[str, Any]) -> None:
    section = profiled["session"].compiled
    assert section.where[0].kind.startswith("torch.compile(")
    (note,) = [n for n in section.notes if "a torch.compile'd function calling the model" in n]
    assert "(optimizer)" in note and "(outside modules)" in note
    (again,) = [n for n in section.notes if "compiled it again under its hooks" in n]
    assert "train_step()" in again
    assert not any("frame while the model was profiled" in w for w in profiled["session"].warnings)


def test_the_model_is_left_as_it_was_and_the_step_does_not_compile_again(
    profiled: dict[str, Any],
) -> None:
    assert profiled["next"] == (0, 0, 0, 0)
    for name, module in profiled["model"].named_modules():
        assert set(vars(module)) == set(profiled["attributes"][name]), name
        assert "forward" not in vars(module), name


def test_a_step_that_gets_the_model_as_an_argument_is_said_with_the_fix() -> None:
    """Not found (the limit docs/compiled.md states): the layers are patched as for an eager
    model, dynamo traces the patched code, and the warning says how to get the kernels mapped."""

    @torch.compile
    def train_step(net: nn.Module, x: torch.Tensor) -> torch.Tensor:
        loss = net(x).square().mean()
        loss.backward()
        return loss

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8))
    x = torch.randn(4, 8)
    train_step(model, x)
    with hybridprof.Profile(model) as prof:
        for _ in range(2):
            train_step(model, x)
            prof.step()
    session = prof.session()
    assert session.compiled is None
    (said,) = [w for w in session.warnings if "while the model was profiled" in w]
    assert "name the model (a global or a closure variable, not an argument)" in said
