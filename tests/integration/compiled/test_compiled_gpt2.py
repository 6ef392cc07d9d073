"""Hugging Face GPT-2 from a config, compiled (third-party code: needs transformers, skipped
without it; slow): every block's attention and MLP get time, dynamo compiles nothing more, and
`compare_eager` lists every block with both times and a speed-up, each side adding up."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest
import torch

import hybridprof
from tests.compiled_models import counters, delta

transformers = pytest.importorskip("transformers")
pytestmark = [pytest.mark.slow, pytest.mark.filterwarnings("ignore::UserWarning")]


@pytest.fixture(scope="module", autouse=True)
def dynamo_garbage_collected() -> Iterator[None]:
    """Dynamo's compile state is cyclic garbage once these models go, and frees more as it is
    freed: collected here until none is left, not in a later test's measured block."""
    yield
    while gc.collect():
        pass


def gpt2() -> torch.nn.Module:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=64, n_head=2, vocab_size=1000, bos_token_id=0, eos_token_id=0,
        use_cache=False,
    )  # fmt: skip
    return transformers.GPT2LMHeadModel(config).eval()


def test_gpt2_compare_eager() -> None:
    x = torch.randint(0, 1000, (2, 32))
    before = counters()
    comparison = hybridprof.profile(gpt2(), x, warmup=1, iters=1, compile=True, compare_eager=True)
    assert delta(before, counters())[1:] == (1, 0, 0)  # one graph, no break, no recompile
    rows = {row.path: row for row in comparison.rows()}
    for block in ("transformer.h.0", "transformer.h.1"):
        for path in (block, f"{block}.attn", f"{block}.mlp"):
            assert rows[path].eager_us > 0 and rows[path].compiled_us > 0, path
            assert rows[path].speedup is not None
    for side in (comparison.eager, comparison.compiled):
        rows_us = sum(r.self_cpu_us.median for r in side.records) + side.outside_cpu_us.median
        assert rows_us == pytest.approx(side.iteration_cpu_us[0], rel=0.001)
    assert comparison.compiled.compiled.unmatched_events == 0
