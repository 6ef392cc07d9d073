"""Small real models and the training loops the tests profile in a with-block (torch only, but
`gpt2()`, which builds Hugging Face GPT-2 from a config: no download)."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from torch import nn

import hybridprof


def mlp() -> nn.Module:
    torch.manual_seed(0)
    layers: list[nn.Module] = []
    for _ in range(4):
        layers += [nn.Linear(32, 32), nn.ReLU()]
    return nn.Sequential(*layers, nn.Linear(32, 5))


class Block(nn.Module):
    """Pre-norm attention and MLP, each Linear its own module (so each is called)."""

    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.fc1, self.fc2 = nn.Linear(dim, 4 * dim), nn.Linear(4 * dim, dim)
        self.act, self.drop = nn.GELU(), nn.Dropout(0.1)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.drop(self.proj(attended.transpose(1, 2).reshape(b, t, d)))
        return x + self.fc2(self.act(self.fc1(self.ln2(x))))


class Transformer(nn.Module):
    """Two blocks over token embeddings; `checkpoint`: "reentrant" or "non-reentrant"."""

    def __init__(self, checkpoint: str | None = None) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(100, 32)
        self.blocks = nn.ModuleList(Block() for _ in range(2))
        self.ln = nn.LayerNorm(32)
        self.head = nn.Linear(32, 100)
        self.checkpoint = checkpoint

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.emb(tokens)
        for block in self.blocks:
            if self.checkpoint:
                reentrant = self.checkpoint == "reentrant"
                x = torch.utils.checkpoint.checkpoint(block, x, use_reentrant=reentrant)
            else:
                x = block(x)
        return self.head(self.ln(x))


class GPT2Logits(nn.Module):
    """Hugging Face GPT-2 from a config (2 layers, no download), returning the logits."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        torch.manual_seed(0)
        config = GPT2Config(
            n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, bos_token_id=0
        )
        self.lm = GPT2LMHeadModel(config)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        logits: torch.Tensor = self.lm(tokens).logits
        return logits


@dataclass
class Task:
    """A model, one micro-batch, and its loss."""

    model: nn.Module
    x: torch.Tensor
    y: torch.Tensor
    loss: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


def task(name: str) -> Task:
    torch.manual_seed(1)
    if name == "mlp":
        return Task(mlp(), torch.randn(16, 32), torch.randint(0, 5, (16,)), F.cross_entropy)
    checkpoint = name.partition(":")[2] or None
    model: nn.Module = GPT2Logits() if name == "gpt2" else Transformer(checkpoint)
    tokens, targets = torch.randint(0, 100, (4, 12)), torch.randint(0, 100, (4, 12))
    return Task(model, tokens, targets, _token_loss)


def _token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@dataclass
class Loop:
    """The issue's loop and its variants: `micro` micro-batches of accumulation, an optimizer,
    clipping, a scheduler, autocast, GradScaler."""

    optimizer: str = "adamw"  # "adamw", "sgd", "fused"
    micro: int = 2
    clip: bool = True
    autocast: torch.dtype | None = None
    scaler: bool = False
    set_to_none: bool = True
    scheduler: bool = True
    groups: bool = False  # two param groups (decay / no decay), as HF's Trainer makes
    walls_us: list[float] = field(default_factory=list)

    def make_optimizer(self, model: nn.Module) -> torch.optim.Optimizer:
        params: Any = list(model.parameters())
        if self.groups:
            params = [
                {"params": [p for p in params if p.ndim >= 2]},
                {"params": [p for p in params if p.ndim < 2], "weight_decay": 0.0},
            ]
        if self.optimizer == "sgd":
            return torch.optim.SGD(params, lr=1e-2, momentum=0.9)
        return torch.optim.AdamW(params, lr=1e-3, fused=self.optimizer == "fused" or None)


@dataclass
class Trained:
    """What a run left: the weights, the optimizer state and the profile (if profiled)."""

    task: Task
    weights: dict[str, torch.Tensor]
    state: list[torch.Tensor]
    prof: hybridprof.Profile | None
    walls_us: list[float]


def train(
    name: str,
    loop: Loop,
    steps: int = 3,
    *,
    profile: Callable[[nn.Module], hybridprof.Profile] | None = None,
    step_calls: bool = False,
) -> Trained:
    """`steps` steps of `loop` on task `name`; with `profile`, the first step (all of them with
    `step_calls`, each ended by `prof.step()`) inside `with profile(model)`."""
    work = task(name)
    model = work.model
    model.train()
    torch.manual_seed(2)
    optimizer = loop.make_optimizer(model)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.9) if loop.scheduler else None
    scaler = torch.amp.GradScaler("cpu") if loop.scaler else None
    walls: list[float] = []

    def one_step() -> None:
        start = time.perf_counter()
        for _ in range(loop.micro):
            dtype = loop.autocast or torch.bfloat16
            with torch.autocast("cpu", dtype=dtype, enabled=loop.autocast is not None):
                loss = work.loss(model(work.x), work.y) / loop.micro
            (scaler.scale(loss) if scaler is not None else loss).backward()
        if scaler is not None:
            scaler.unscale_(optimizer)
        if loop.clip:
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if scaler is not None:
            scaler.step(optimizer)
            scaler.update()
        else:
            optimizer.step()
        optimizer.zero_grad(set_to_none=loop.set_to_none)
        if schedule is not None:
            schedule.step()
        walls.append((time.perf_counter() - start) * 1e6)

    prof = profile(model) if profile is not None else None
    done = 0
    if prof is not None:
        with prof:
            for _ in range(steps if step_calls else 1):
                one_step()
                if step_calls:
                    prof.step()
        done = steps if step_calls else 1
    for _ in range(steps - done):
        one_step()
    weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    state = [t.clone() for s in optimizer.state.values() for t in s.values() if torch.is_tensor(t)]
    return Trained(work, weights, state, prof, walls)


def bitwise_equal(a: Trained, b: Trained) -> bool:
    """The same weights and optimizer state, bit for bit."""
    same_weights = a.weights.keys() == b.weights.keys() and all(
        torch.equal(a.weights[k], b.weights[k]) for k in a.weights
    )
    same_state = len(a.state) == len(b.state) and all(
        torch.equal(x, y) for x, y in zip(a.state, b.state, strict=True)
    )
    return same_weights and same_state


def linears(model: nn.Module) -> list[str]:
    """The paths of the Linear layers (and HF's Conv1D, GPT-2's Linear) of `model`."""
    return [
        path
        for path, module in model.named_modules()
        if isinstance(module, nn.Linear) or type(module).__name__ == "Conv1D"
    ]
