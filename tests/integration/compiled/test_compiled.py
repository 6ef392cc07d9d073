"""Compiled models profiled layer by layer (torch.compile(model) and model.compile(), inductor on
the CPU, compiled for real): kernels in their layers, rows that add up, dynamo left as it was.

Each model is compiled once for the module (a compile takes seconds) from a fresh import of the
fixture file (tests/compiled_models.py), so no test reuses another's compiled code."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
import torch

import hybridprof
from hybridprof.datamodel import ProfileSession
from hybridprof.errors import UsageError
from tests.compiled_models import counters, delta, fresh

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


@pytest.fixture(scope="module", autouse=True)
def dynamo_garbage_collected() -> Iterator[None]:
    """Dynamo's compile state is cyclic garbage once these models go, and frees more as it is
    freed: collected here until none is left, not in a later test's measured block."""
    yield
    while gc.collect():
        pass


def _profile(model: torch.nn.Module, x: torch.Tensor, **options: Any) -> dict[str, Any]:
    """Profile, with dynamo's counters over the profile and over the model's next call."""
    before = counters()
    session = hybridprof.profile(model, x, warmup=1, iters=1, **options)
    during = delta(before, counters())
    before = counters()
    model(x)
    return {"session": session, "during": during, "next": delta(before, counters())}


@pytest.fixture(scope="module", params=["torch.compile", "model.compile"])
def compiled_mlp(request: pytest.FixtureRequest) -> dict[str, Any]:
    torch.manual_seed(0)
    eager = fresh().MLP().eval()
    x = torch.randn(4, 32)
    if request.param == "torch.compile":
        model: torch.nn.Module = torch.compile(eager)
    else:
        eager.compile()
        model = eager
    return {"style": request.param, "eager": eager, "model": model, "x": x, **_profile(model, x)}


def _adds_up(session: ProfileSession) -> float:
    """|rows' self times + outside - the iteration| / the iteration (one iteration: exact)."""
    assert session.outside_cpu_us is not None
    rows = sum(r.self_cpu_us.median for r in session.records) + session.outside_cpu_us.median
    iteration = session.iteration_cpu_us[0]
    return abs(rows - iteration) / iteration


def test_the_compiled_part_is_detected(compiled_mlp: dict[str, Any]) -> None:
    section = compiled_mlp["session"].compiled
    assert section is not None
    kind = (
        "torch.compile(module)" if compiled_mlp["style"] == "torch.compile" else "module.compile()"
    )
    assert [(w.path, w.kind, w.backend, w.mode) for w in section.where] == [
        ("", kind, "inductor", "default")
    ]
    assert section.kernel_map == "mapped" and section.call_sites > 0
    assert section.unmatched_events == 0


def test_every_layer_gets_its_kernels(compiled_mlp: dict[str, Any]) -> None:
    session = compiled_mlp["session"]
    records = {r.path: r for r in session.records}
    assert set(records) == {p for p, _ in compiled_mlp["eager"].named_modules()}
    for path in ("layers.0.0", "layers.0.2", "layers.1.0", "layers.1.2", "head"):
        assert records[path].self_cpu_us.median > 0
        assert any(op.name == "aten::addmm" for op in records[path].ops)
    relu = records["layers.0.1"]  # inductor's own C++ kernel, by its kernel name
    assert [op.name for op in relu.ops] and relu.ops[0].name.startswith("cpp_fused_relu")
    for parent in ("layers", "layers.0", "layers.1"):  # no ops of their own, totals all the same
        assert records[parent].total_cpu_us.median > 0
    assert records["layers"].total_cpu_us.median == pytest.approx(
        records["layers.0"].total_cpu_us.median + records["layers.1"].total_cpu_us.median, abs=0.01
    )


def test_rows_add_up_to_the_iteration(compiled_mlp: dict[str, Any]) -> None:
    assert _adds_up(compiled_mlp["session"]) < 0.001


def test_dynamo_compiles_nothing_more_for_hybridprof(compiled_mlp: dict[str, Any]) -> None:
    # What the same calls compile without hybridprof: one frame, one graph, no break, no
    # recompile (the first call compiles; every later one hits).
    assert compiled_mlp["during"] == (1, 1, 0, 0)
    assert compiled_mlp["next"] == (0, 0, 0, 0)  # the next call in the caller's grad mode


def test_compile_time_is_reported_and_in_no_row(compiled_mlp: dict[str, Any]) -> None:
    session = compiled_mlp["session"]
    assert session.compiled.compile_s > 0.05 and session.compiled.frames == 1
    assert session.compiled.excluded == () and session.iterations == 1
    # A row holding the compile would take at least the compile's time (a busy machine can make
    # a row slow, never seconds slow).
    slowest = max(r.total_cpu_us.median for r in session.records)
    assert slowest < session.compiled.compile_s * 1e6 / 4


def test_the_model_is_left_unpatched(compiled_mlp: dict[str, Any]) -> None:
    for module in compiled_mlp["eager"].modules():
        assert "forward" not in module.__dict__
    assert hybridprof.Profile  # imported: the autouse fixture checks no live patch is left


def test_the_session_round_trips_with_its_compile_section(compiled_mlp: dict[str, Any]) -> None:
    session = compiled_mlp["session"]
    again = ProfileSession.from_json(session.to_json())
    assert again.compiled == session.compiled


def test_strategies_that_cannot_see_kernels_are_refused(compiled_mlp: dict[str, Any]) -> None:
    model = compiled_mlp["eager"] if compiled_mlp["style"] == "model.compile" else None
    if model is None:
        model = torch.compile(compiled_mlp["eager"])
    with pytest.raises(UsageError, match="strategy 'timer' cannot see inside compiled code"):
        hybridprof.profile(model, compiled_mlp["x"], iters=1, warmup=0, strategy="timer")


def test_another_backend_is_one_opaque_layer() -> None:
    torch.manual_seed(0)
    eager = fresh().MLP().eval()
    x = torch.randn(4, 32)
    run = _profile(torch.compile(eager, backend="aot_eager"), x)
    session = run["session"]
    assert session.compiled.kernel_map == "opaque"
    assert "backend 'aot_eager'" in session.compiled.notes[0]
    assert session.record("").self_cpu_us.median > 0  # the compiled region, as one layer
    assert _adds_up(session) < 0.001
    assert run["next"] == (0, 0, 0, 0)


def test_a_model_compiled_before_profiling_is_compiled_again_and_mapped() -> None:
    torch.manual_seed(0)
    model = torch.compile(fresh().MLP().eval())
    x = torch.randn(4, 32)
    model(x)  # the user's first call compiled it, without hybridprof's hooks
    run = _profile(model, x)
    session = run["session"]
    assert session.compiled.kernel_map == "mapped"
    assert "compiled it again under its hooks" in session.compiled.notes[0]
    assert session.record("head").self_cpu_us.median > 0
    assert _adds_up(session) < 0.001
    assert run["during"][:3] == (1, 1, 0) and run["next"] == (0, 0, 0, 0)


def test_compile_true_leaves_the_model_eager_and_compare_eager_lists_every_layer() -> None:
    torch.manual_seed(0)
    eager = fresh().MLP().eval()
    x = torch.randn(4, 32)
    comparison = hybridprof.profile(eager, x, warmup=1, iters=1, compile=True, compare_eager=True)
    assert comparison.compiled.compiled.compiled_by == "hybridprof"
    rows = {row.path: row for row in comparison.rows()}
    for path in ("", "layers.0.0", "layers.1.2", "head"):
        assert rows[path].eager_us > 0 and rows[path].compiled_us > 0
        assert rows[path].speedup == pytest.approx(rows[path].eager_us / rows[path].compiled_us)
    for side in (comparison.eager, comparison.compiled):
        assert _adds_up(side) < 0.001
    assert comparison.diff.base.label == "eager" and comparison.diff.new.label == "compiled"
    assert all("forward" not in m.__dict__ for m in eager.modules())
    assert (
        "_compiled_call_impl" not in eager.__dict__
    )  # still eager: its next call compiles nothing
    before = counters()
    eager(x)
    assert delta(before, counters()) == (0, 0, 0, 0)


@pytest.mark.usefixtures("waits_unknown")  # an excluded pair would add its steps to the log
def test_compare_eager_is_a_paired_run_in_abba_order_judged_pair_by_pair() -> None:
    from hybridprof.planner.module_tree import tree_plan
    from hybridprof.runtime.runs.options import RunOptions
    from hybridprof.runtime.runs.speedup_run import measure_speedup

    torch.manual_seed(0)
    eager = fresh().MLP().eval()
    compiled = torch.compile(eager)
    x = torch.randn(4, 32)
    ran: list[str] = []

    def step(model: torch.nn.Module, inputs: Any) -> Any:
        ran.append("B" if model is compiled else "A")  # eager is the base lane (A)
        with torch.no_grad():
            return model(*inputs.args, **inputs.kwargs)

    plan = tree_plan(eager, None, (), None, leaves_only=False)
    opts = RunOptions(warmup=1, iters=4, threads=1)
    comparison = measure_speedup(eager, compiled, x, plan, opts, step)
    # each measured iteration runs its step twice (the warm step, then the measured one)
    assert "".join(ran[-16:]) == "AABBBBAAAABBBBAA"
    pairing = comparison.diff.pairing
    assert pairing is not None and (pairing.order, pairing.pairs) == ("ABBA", 4)
    assert comparison.eager.iterations == comparison.compiled.iterations == 4
    assert all("forward" not in m.__dict__ for m in eager.modules())


def test_compare_eager_takes_auto_counts_and_judges_each_layer_on_its_pairs() -> None:
    from hybridprof.diff.pair_ratios import PAIRED_METHOD
    from hybridprof.reporting.text.speedup_text import render_speedup

    torch.manual_seed(0)
    eager = fresh().MLP().eval()
    x = torch.randn(4, 32)
    comparison = hybridprof.profile(
        eager, x, compile=True, compare_eager=True, warmup="auto", iters="auto", threads=1
    )
    eager_session, compiled_session = comparison.eager, comparison.compiled
    assert eager_session.requested_iterations == compiled_session.requested_iterations == "auto"
    assert eager_session.iterations == compiled_session.iterations >= 10  # settled is asked at 10
    assert compiled_session.stop_reason in ("converged", "max_time", "max_iterations")
    diff = comparison.diff
    assert diff.pairing is not None and diff.pairing.pairs == compiled_session.iterations
    assert diff.method == PAIRED_METHOD
    assert diff.total.paired is not None and diff.total.paired.pairs == diff.pairing.pairs
    # a layer with a time in both runs is judged on its per-pair ratios (a layer fused away in the
    # compiled run has no series there: its change is shown, not judged)
    paired = {
        layer.new_path: change.paired
        for layer in diff.layers
        for change in layer.times
        if change.quantity == "self_cpu_us" and change.paired is not None
    }
    assert "head" in paired and paired["head"].pairs == diff.pairing.pairs
    # the speed-ups carry intervals from the same pairs; the printed table shows them
    head = next(row for row in comparison.rows() if row.path == "head")
    assert head.interval is not None and head.interval[0] <= head.speedup <= head.interval[1]
    assert comparison.iteration_interval() is not None
    assert "95% interval" in render_speedup(comparison)


def test_a_training_step_attributes_backward_kernels() -> None:
    torch.manual_seed(0)
    eager = fresh().MLP()
    x = torch.randn(4, 32)
    session = hybridprof.profile(torch.compile(eager), x, warmup=1, iters=1, backward=True)
    records = {r.path: r for r in session.records}
    for path in ("layers.0.0", "layers.1.2", "head"):
        assert records[path].backward_self_cpu_us.median > 0
    assert session.compiled.kernel_map in ("mapped", "partial")


def test_a_fullgraph_training_step_says_no_empty_list_of_layers_without_kernels() -> None:
    """The compiled model itself has no kernel of its own (all its work is its layers'): no note
    names it, and a note never ends in an empty list."""
    torch.manual_seed(0)
    flat = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    session = hybridprof.profile(
        torch.compile(flat, fullgraph=True), torch.randn(16, 32), warmup=1, iters=1, backward=True
    )
    assert session.compiled is not None
    for note in session.compiled.notes:
        assert not note.rstrip().endswith(":"), note
    assert "" not in session.never_called


def test_a_backend_that_raises_is_named_with_what_it_raised() -> None:
    """Dynamo's message starts "backend='be' raised:" and says what on the next line: the
    one-line error keeps both (it once ended at the colon)."""

    def broken_backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        raise RuntimeError("no code generator for aten.addmm here")

    model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 8)), backend=broken_backend)
    with pytest.raises(Exception) as raised:
        hybridprof.profile(model, torch.randn(2, 8), warmup=1, iters=1)
    line = str(raised.value)
    assert "\n" not in line
    assert "raised: RuntimeError: no code generator for aten.addmm here" in line, line


class Counting(torch.nn.Module):
    """A new Python int attribute each call: dynamo recompiles each call, then gives up."""

    def __init__(self) -> None:
        super().__init__()
        self.a, self.b, self.calls = torch.nn.Linear(32, 64), torch.nn.Linear(64, 8), 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return self.b(self.a(x) * self.calls)


def _eager_profile(model: torch.nn.Module) -> ProfileSession:
    session = hybridprof.profile(model, torch.randn(16, 32), warmup=1, iters=2)
    assert session.compiled is not None and session.compiled.kernel_map == "eager"
    assert any("no compiled code ran in the measured iterations" in w for w in session.warnings)
    leaves = [r for r in session.records if r.path and not r.path.count(".")]
    assert leaves and all(r.self_cpu_us.median > 0 for r in leaves)  # measured as the eager code
    return session


def test_a_compiled_sequential_that_compiles_nothing_is_profiled_as_the_eager_code_it_is() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 8))
    model.compile()
    session = _eager_profile(model)
    assert any("compiled no graph" in w for w in session.warnings)


def test_a_model_past_dynamos_recompile_limit_is_said_to_run_eager() -> None:
    with torch._dynamo.config.patch(recompile_limit=2):
        session = _eager_profile(torch.compile(Counting()))
    assert any("recompile limit" in w for w in session.warnings)
    assert {"a", "b"} <= {r.path for r in session.records}


def test_a_model_dynamo_gave_up_on_with_suppressed_errors_is_said_to_run_eager() -> None:
    def broken_backend(gm: torch.fx.GraphModule, inputs: list[torch.Tensor]) -> Any:
        raise RuntimeError("no code generator here")

    class Flat(torch.nn.Module):  # a code object of its own: dynamo has seen no other call of it
        def __init__(self) -> None:
            super().__init__()
            self.a, self.act = torch.nn.Linear(32, 64), torch.nn.ReLU()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.act(self.a(x))

    with torch._dynamo.config.patch(suppress_errors=True):
        session = _eager_profile(torch.compile(Flat(), backend=broken_backend))
    assert any("suppress_errors" in w for w in session.warnings)


def test_refusals_are_one_line() -> None:
    eager = fresh().MLP().eval()
    x = torch.randn(4, 32)
    with pytest.raises(UsageError, match="add compile=True"):
        hybridprof.profile(eager, x, iters=1, compare_eager=True)
    with pytest.raises(UsageError, match="unknown compile mode 'fast'"):
        hybridprof.profile(eager, x, iters=1, compile=True, compile_mode="fast")
    with pytest.raises(UsageError, match=r"torch\.compile'd already"):
        hybridprof.profile(torch.compile(eager), x, iters=1, compile=True)


def test_profile_block_with_a_first_compile_inside_it() -> None:
    torch.manual_seed(0)
    eager = fresh().MLP().eval()
    model = torch.compile(eager)
    x = torch.randn(4, 32)
    before = counters()
    with torch.no_grad(), hybridprof.Profile(model, leaves_only=False) as prof:
        model(x)  # compiles here, inside the block, with hybridprof's hooks in
    assert delta(before, counters()) == (1, 1, 0, 0)
    session = prof.session()
    records = {r.path: r for r in session.records}
    assert records["head"].self_cpu_us.median > 0
    assert any(op.name == "aten::addmm" for op in records["layers.0.0"].ops)
    (said,) = [w for w in session.warnings if "compiling ran inside the profiled block" in w]
    assert _adds_up(session) < 0.001
    # The compile's own event is outside every layer: the outside row holds at least its time.
    compile_us = float(said.split(" s of compiling")[0]) * 1e6
    assert compile_us > 0 and session.outside_cpu_us.median >= compile_us - 10_000  # 0.01 s shown
    before = counters()
    with torch.no_grad():
        model(x)
    assert delta(before, counters()) == (0, 0, 0, 0)


def test_a_second_profile_of_the_same_model_is_still_split_by_layer(
    compiled_mlp: dict[str, Any],
) -> None:
    # Dynamo compiles a model once per process: the kernels the first profile's compile recorded
    # map the second profile's too.
    again = _profile(compiled_mlp["model"], compiled_mlp["x"])
    assert again["during"] == (0, 0, 0, 0)
    assert again["session"].compiled.kernel_map == "mapped"
    assert again["session"].record("head").self_cpu_us.median > 0


def test_flops_count_the_eager_ops_and_leave_dynamo_alone(compiled_mlp: dict[str, Any]) -> None:
    run = _profile(compiled_mlp["model"], compiled_mlp["x"], flops=True, peak_gflops=10.0,
                   peak_gbps=10.0)  # fmt: skip
    work = {layer.path: layer for layer in run["session"].flops.layers}
    assert work["layers.0.0"].flops == 2 * 4 * 32 * 64  # batch 4, 32 -> 64 features
    assert run["during"] == (0, 0, 0, 0) and run["next"] == (0, 0, 0, 0)


def test_an_iteration_that_recompiles_is_left_out_with_the_guard() -> None:
    torch.manual_seed(0)
    eager = fresh().Switch().eval()
    model = torch.compile(eager)
    calls = []

    def flip_after_the_fourth_call(module: Any, args: Any, output: Any) -> None:
        calls.append(1)
        if len(calls) == 4:  # warm-up 1 call, then 2 per measured iteration: the 3rd recompiles
            eager.double = True

    handle = model.register_forward_hook(flip_after_the_fourth_call)
    try:
        session = hybridprof.profile(model, torch.randn(2, 8), warmup=1, iters=3)
    finally:
        handle.remove()
    (excluded,) = session.compiled.excluded
    assert excluded.iteration == 2 and "double" in excluded.reason
    assert session.iterations == 3  # one more iteration ran in its place
    assert any("recompiled" in w and "left out of the medians" in w for w in session.warnings)


def test_a_compiled_function_calling_a_profiled_model_breaks_no_graph_and_is_mapped() -> None:
    torch.manual_seed(0)
    model = fresh().MLP().eval()
    x = torch.randn(4, 32)

    @torch.compile
    def step(inputs: torch.Tensor) -> torch.Tensor:
        return model(inputs).sum()

    before = counters()
    with torch.no_grad(), hybridprof.Profile(model, leaves_only=False) as prof:
        step(x)  # compiled here, under hybridprof's hooks: nothing it traces is patched
    _, graphs, breaks, _ = delta(before, counters())
    assert (graphs, breaks) == (1, 0)
    session = prof.session()
    assert session.compiled is not None and session.compiled.kernel_map == "mapped"
    assert session.record("head").self_cpu_us.median > 0
    assert any("of compiling ran inside the profiled block" in w for w in session.warnings)


class _Embeddings(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tok = torch.nn.Embedding(100, 32)
        self.pos = torch.nn.Embedding(16, 32)
        self.ln = torch.nn.LayerNorm(32)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.ln(self.tok(idx) + self.pos(torch.arange(idx.shape[1])))


def test_a_fused_row_names_the_lookups_inlined_into_its_kernel() -> None:
    # The layer norm's kernel also does both lookups (inductor inlines them; they write nothing):
    # its time stays the layer norm's, and its row names both embeddings.
    # (Under no_grad: with gradients on, the kernel also writes the sum the norm's backward
    # needs, the frame's own code, so the root holds it, and names ln, pos and tok.)
    torch.manual_seed(0)
    with torch.no_grad():
        session = hybridprof.profile(
            torch.compile(_Embeddings().eval()), torch.randint(0, 100, (2, 16)), warmup=1, iters=1
        )
    assert session.compiled.kernel_map == "mapped"
    assert session.compiled.fused_of("ln") == ("pos", "tok")
    assert session.record("ln").self_cpu_us.median > 0
    assert _adds_up(session) < 0.001
