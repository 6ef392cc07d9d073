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
    from hybridprof.reporting.page.speedup_page import render_speedup_html
    from hybridprof.reporting.text.speedup_text import headline_text, render_speedup

    x = torch.randint(0, 1000, (2, 32))
    before = counters()
    comparison = hybridprof.profile(
        gpt2(), x, warmup=1, iters=6, compile=True, compare_eager=True, threads=1
    )
    assert delta(before, counters())[1:] == (1, 0, 0)  # one graph, no break, no recompile
    summary = comparison.summary()
    rows = {row.path: row for row in summary.rows}
    for block in ("transformer.h.0", "transformer.h.1"):
        for path in (block, f"{block}.attn", f"{block}.mlp"):
            row = rows[path]
            assert row.eager_us and row.compiled_us, path
            assert row.speedup is not None and row.interval is not None, path  # 6 pairs
            assert row.interval[0] <= row.speedup <= row.interval[1], path
            assert row.verdict in ("faster", "slower", "within noise", "inconclusive"), path
    # one headline: the terminal's table and the report's page state the same figures
    headline = headline_text(summary)
    assert headline in render_speedup(summary)
    assert headline.removeprefix("iteration (median): ") in render_speedup_html(summary)
    for side in (comparison.eager, comparison.compiled):
        rows_us = [
            sum(r.per_iteration.self_cpu_us.values[i] for r in side.records if r.per_iteration)
            for i in range(side.iterations)
        ]
        assert side.outside_cpu_us is not None
        assert sum(rows_us) <= sum(side.iteration_cpu_us) * 1.001  # rows within each iteration
    assert comparison.compiled.compiled.unmatched_events == 0
