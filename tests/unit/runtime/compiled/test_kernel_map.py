"""Where a fused kernel's time goes: the deepest module holding every module it computed."""

from __future__ import annotations

import pytest

from hybridprof.runtime.compiled.kernel_map import common_ancestor


@pytest.mark.parametrize(
    ("paths", "owner"),
    [
        (["blocks.1.ln_1", "blocks.1.attn.c_attn"], "blocks.1"),
        (["blocks.1.ln_1", "blocks.1.ln_1"], "blocks.1.ln_1"),
        (["emb.tok", "emb.pos", "emb.ln"], "emb"),
        # the paths part at the first differing level, whatever follows: a kernel of blocks.0's
        # and blocks.1's ln is the blocks list's, never "blocks.ln" (no such module)
        (["blocks.0.ln", "blocks.1.ln"], "blocks"),
        (["a.x.lin", "b.x.lin"], ""),
        (["emb", "blocks.0.ln_1"], ""),
        (["", "head"], ""),  # the frame's own code is the root's
        (["blocks.1.attn"], "blocks.1.attn"),
    ],
)
def test_a_fused_kernel_goes_to_the_deepest_module_holding_all_it_computed(
    paths: list[str], owner: str
) -> None:
    assert common_ancestor(paths) == owner
