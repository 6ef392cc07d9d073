"""A transformer on nn.MultiheadAttention, compiled: every attention and MLP block gets time, and
a deliberate graph break (a `print` in one block) is reported with its file and line while its
layers' rows stay complete. Dynamo's counters are compared with the same calls on a fresh copy of
the model without hybridprof."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import hybridprof
from hybridprof.datamodel import FindingKind
from tests.compiled_models import FILE, break_line, counters, delta, fresh

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module", autouse=True)
def dynamo_garbage_collected() -> Iterator[None]:
    """Dynamo's compile state is cyclic garbage once these models go, and frees more as it is
    freed: collected here until none is left, not in a later test's measured block."""
    yield
    while gc.collect():
        pass


WARMUP, ITERS = 1, 2


def _model(brk_block: int | None, style: str) -> torch.nn.Module:
    torch.manual_seed(0)
    model = fresh().Transformer(brk_block=brk_block).eval()
    if style == "model.compile":
        model.compile()
        return model
    return torch.compile(model)


def _calls_without_hybridprof(brk_block: int | None, style: str) -> tuple[int, ...]:
    """What dynamo does over as many calls as a profile makes, on a fresh copy, unprofiled."""
    model, x = _model(brk_block, style), _inputs()
    before = counters()
    for _ in range(WARMUP + 2 * ITERS + 1):  # each measured iteration runs a warm step first
        model(x)
    return delta(before, counters())


def _inputs() -> torch.Tensor:
    return torch.randint(0, 100, (2, 16))


@pytest.fixture(scope="module", params=[(None, "torch.compile"), (1, "model.compile")])
def profiled(request: pytest.FixtureRequest) -> dict[str, Any]:
    brk_block, style = request.param
    # The baseline first: frames of torch's own modules (shared by every copy of the model) are
    # then seen by it, not first by the profiled run.
    without = _calls_without_hybridprof(brk_block, style)
    model, x = _model(brk_block, style), _inputs()
    before = counters()
    session = hybridprof.profile(model, x, warmup=WARMUP, iters=ITERS)
    after = counters()
    model(x)
    return {
        "session": session,
        "during": delta(before, after),
        "next": delta(after, counters()),
        "without": without,
        "breaks": brk_block is not None,
    }


def test_every_attention_and_mlp_block_has_time(profiled: dict[str, Any]) -> None:
    records = {r.path: r for r in profiled["session"].records}
    for path in ("blocks.0", "blocks.1", "blocks.0.attn", "blocks.1.attn", "blocks.0.mlp",
                 "blocks.1.mlp", "head"):  # fmt: skip
        assert records[path].total_cpu_us.median > 0, path


def test_dynamo_counts_the_same_with_and_without_hybridprof(profiled: dict[str, Any]) -> None:
    # Graphs, graph breaks and recompiles the same; frames no more: frames of torch's own module
    # code (Linear.forward, ...) are shared by every copy of the model and seen first by whichever
    # run comes first.
    assert profiled["during"][1:] == profiled["without"][1:]
    assert profiled["during"][0] <= profiled["without"][0]
    assert profiled["next"] == (0, 0, 0, 0)


def test_the_graph_break_is_reported_with_file_and_line(profiled: dict[str, Any]) -> None:
    section = profiled["session"].compiled
    if not profiled["breaks"]:
        assert section.graph_breaks == ()
        return
    (found,) = section.graph_breaks
    assert (found.file, found.line) == (str(FILE), break_line())
    assert "print" in found.code and found.frame == "forward"
    assert set(found.modules) == {"blocks.0", "blocks.1"}  # the modules of the class with it
    findings = [f for f in profiled["session"].plan.findings if f.kind == FindingKind.GRAPH_BREAK]
    assert findings and f"compiled_models.py:{break_line()}" in findings[0].message


def test_the_layers_around_a_break_keep_their_rows(profiled: dict[str, Any]) -> None:
    session = profiled["session"]
    records = {r.path: r for r in session.records}
    if profiled["breaks"]:  # eager code inside compiled code: ranges from the profile function
        assert session.compiled.eager_islands > 0
        for path in ("emb", "blocks.1.ln_1", "ln_f"):
            assert records[path].self_cpu_us.median > 0, path
    assert session.compiled.unmatched_events == 0
    assert session.outside_cpu_us is not None
    for i in range(session.iterations):
        rows = sum(r.per_iteration.self_cpu_us.values[i] for r in session.records)
        assert rows < session.iteration_cpu_us[i]  # outside holds the rest, never negative


def test_fused_kernels_name_what_they_fused(profiled: dict[str, Any]) -> None:
    from hybridprof.analysis.layer_table import layer_table

    section = profiled["session"].compiled
    table = layer_table(profiled["session"])
    fused = {row.path: row.fused for row in table.rows if row.fused}
    assert fused == {
        layer.path: tuple(
            f.removeprefix(layer.path + ".") if layer.path else f for f in layer.fused
        )
        for layer in section.layers
    }
    if not profiled["breaks"]:
        assert fused  # layer norms fuse into the next layer's kernels


def test_every_format_shows_what_fused(profiled: dict[str, Any]) -> None:
    from hybridprof.reporting.dataframe import session_frame
    from hybridprof.reporting.text.text_report import render_text_report

    session = profiled["session"]
    frame = session_frame(session)
    fused = dict(zip(frame["path"], frame["fused"], strict=True))
    text = render_text_report(session)
    assert "Fused" in text and "kernels mapped to layers" in text
    for layer in session.compiled.layers:
        assert fused[layer.path]
        assert fused[layer.path].split(", ")[0] in text


def test_modules_fused_away_are_not_said_to_be_never_called(profiled: dict[str, Any]) -> None:
    session = profiled["session"]
    without_kernels = {r.path for r in session.records} ^ {t.path for t in session.plan.targets}
    fused_away = [p for p in without_kernels if session.plan.target(p).has_forward]
    assert session.never_called == ()
    if fused_away:
        (note,) = [n for n in session.compiled.notes if n.startswith("no kernel of their own")]
        assert all(path in note for path in fused_away[:8])
