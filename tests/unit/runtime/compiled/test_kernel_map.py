"""Where a fused kernel's time goes: the deepest module holding every module it computed."""

from __future__ import annotations

import pytest

from hybridprof.runtime.compiled.instrument import OPTIMIZER_STACK, CallSite, Stack
from hybridprof.runtime.compiled.kernel_map import (
    OPTIMIZER,
    STEP_CODE,
    KernelMap,
    SiteTargets,
    Target,
    common_ancestor,
)


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


KNOWN = frozenset({"", "emb", "emb.tok", "emb.pos", "emb.ln", "blocks", "blocks.0", "blocks.0.ln"})


@pytest.mark.parametrize(
    ("written", "computed", "target"),
    [
        # the lookups inlined into the layer norm's kernel: named, the time stays the norm's
        (("emb.ln",), ("emb.tok", "emb.pos", "emb.ln"), Target("emb.ln", ("emb.pos", "emb.tok"))),
        (("emb.ln",), ("emb.ln",), Target("emb.ln")),
        # the frame code around a layer (its ancestor) is no layer's work the kernel took
        (("blocks.0.ln",), ("blocks.0", "blocks.0.ln"), Target("blocks.0.ln")),
        (
            ("emb.tok", "emb.ln"),
            ("emb.tok", "emb.pos"),
            Target("emb", ("emb.ln", "emb.pos", "emb.tok")),
        ),
    ],
)
def test_a_kernel_names_every_module_it_computed_but_its_time_follows_what_it_writes(
    written: tuple[str, ...], computed: tuple[str, ...], target: Target
) -> None:
    site = SiteTargets("k", "k", False, written, None, computed=(computed, None))
    assert site.target(None, KNOWN) == target


def _site(*written: Stack) -> CallSite:
    return CallSite(0, "0/0", False, "cpp_fused_0", False, "graph_0_cpp_fused_0", written)


PATHS = {"1": "", "2": "head"}  # str(id(module)) -> path, as dynamo keys nn_module_stack
HEAD: Stack = ("2", "G['model'].head")


@pytest.mark.parametrize(
    ("written", "home", "path"),
    [
        # a compiled step: optimizer code is the optimizer's, the step's own code (the loss) is
        # no module's, and a kernel that also writes a layer's nodes is that layer's
        ((OPTIMIZER_STACK,), STEP_CODE, OPTIMIZER),
        ((None,), STEP_CODE, STEP_CODE),
        ((None, HEAD), STEP_CODE, "head"),
        ((OPTIMIZER_STACK, HEAD), STEP_CODE, "head"),
        # a compiled model: its frame's own code is the model's
        ((None,), "", ""),
    ],
)
def test_a_compiled_steps_kernels_of_no_layer_go_to_the_optimizer_or_outside(
    written: tuple[Stack, ...], home: str, path: str
) -> None:
    kmap = KernelMap([_site(*written)], PATHS, home)
    (site,) = kmap.by_graph[(0, False)]
    assert site.target(None, kmap.known).path == path
