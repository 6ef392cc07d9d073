"""`prof.display(show_events=True)` after a training block: one screen of ops, every op on
request.

A 2-block transformer trained with AdamW runs 20 to 80 ops per layer (its backward's autograd
nodes, views, AccumulateGrad); listed in full its table ran to 440 lines."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

import hybridprof

SCREEN_LINES = 200  # a demanding user's one screen, for a 2-block transformer
_REST = re.compile(r"\.\.\. (\d+) more (?:backward )?ops? \(")


class Block(nn.Module):
    def __init__(self, dim: int = 32, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.blocks = nn.ModuleList([Block(), Block()])
        self.head = nn.Linear(32, 64)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        x = self.emb(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def _trained() -> hybridprof.Profile:
    torch.manual_seed(0)
    model = TinyGPT()
    optimizer = torch.optim.AdamW(model.parameters())
    idx = torch.randint(0, 64, (2, 16))
    with hybridprof.Profile(model) as prof:
        for _ in range(3):
            model(idx).logsumexp(-1).mean().backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    return prof


def _op_rows(table: str) -> list[str]:
    """The op rows of a display: below the header and the root, neither a layer's tree row
    (`├── `, `└── `) nor the `(optimizer)` and `(outside profiled modules)` rows."""
    body = table.splitlines()[3:]
    return [line for line in body if "── " not in line and not line.startswith("(")]


def test_a_training_blocks_ops_fit_a_screen_and_every_op_stays_reachable() -> None:
    prof = _trained()
    session = prof.session()
    assert session.optimizer is not None
    ops = sum(len(r.ops) for r in session.records) + len(session.optimizer.ops)
    ops += len(session.outside_ops)  # the (outside modules) row lists its ops too
    shown = prof.display(show_events=True)
    assert len(shown.splitlines()) <= SCREEN_LINES, f"{len(shown.splitlines())} lines"
    # The ops left out are counted, not lost: the ops listed plus the `... K more` rows' counts
    # are every op of every layer and of the optimizer.
    rows = _op_rows(shown)
    rests = [int(m.group(1)) for row in rows if (m := _REST.search(row))]
    assert rests, "no layer had more ops than it lists"
    assert len(rows) - len(rests) + sum(rests) == ops
    every = prof.display(show_events=True, max_events=None)
    assert len(_op_rows(every)) == ops and not _REST.search(every)
    with pytest.raises(
        ValueError, match=r"max_events must be 0 or more \(None: every op\), got -1"
    ):
        prof.display(max_events=-1)
