"""Between-run shifts and knock-on layers in `hybridprof diff` (`hybridprof.diff.shift`), on
hand-made sessions whose machine shift, changed layer and neighbour effects are known."""

from __future__ import annotations

import json
import math
import random
from dataclasses import replace

import pytest

from hybridprof.datamodel import (
    IterationSeries,
    ModuleRecord,
    ProfileSession,
    Series,
    Stability,
    Stat,
)
from hybridprof.diff import DiffResult, LayerDiff, diff_sessions
from hybridprof.diff.shift import MIN_SHIFT_LAYERS, estimate_shift, same_own_work
from hybridprof.reporting.diff_data import render_diff_csv
from hybridprof.reporting.page.diff_context import render_diff_html
from hybridprof.reporting.text.diff_text import render_diff_text
from tests.sessions import _plan, _session, op, target

ITERS = 30
# Eight layers of different sizes, like a small network: (path, class, self time in us).
LAYERS = tuple(
    (f"blocks.{i}.{kind}", cls, us)
    for i in range(4)
    for kind, cls, us in (("fc", "Linear", 400.0 + 50 * i), ("act", "ReLU", 40.0 + 5 * i))
)
STABLE = Stability("stable", 0.02, 0.3, 1, "")
NOISY = Stability("noisy", 0.25, 2.5, 1, "load 2.5 on 2 cores")


def _layer(
    path: str, cls: str, center: float, rng: random.Random, op_calls: int = 1
) -> ModuleRecord:
    values = [center * (1 + rng.uniform(-0.02, 0.02)) for _ in range(ITERS)]
    name = "aten::addmm" if cls == "Linear" else "aten::relu"
    return ModuleRecord(
        path=path,
        class_name=cls,
        calls=ITERS,
        self_cpu_us=Stat.of(values),
        total_cpu_us=Stat.of(values),
        per_iteration=IterationSeries(self_cpu_us=Series.of(values)),
        ops=(op(name, op_calls, center, center),),
        input_shapes=("8x64",),
        output_shapes=("8x64",),
        param_count=4160 if cls == "Linear" else 0,
    )


def _run(
    seed: int,
    machine: float = 1.0,
    scale: dict[str, float] | None = None,
    op_calls: dict[str, int] | None = None,
    stability: Stability = STABLE,
    layers: tuple[tuple[str, str, float], ...] = LAYERS,
) -> ProfileSession:
    """A run on a machine `machine` times slower, with some layers' own time scaled (`scale`) and
    some doing more ops (`op_calls`: their own work changed)."""
    rng = random.Random(seed)
    scale, op_calls = scale or {}, op_calls or {}
    records = tuple(
        _layer(p, c, us * machine * scale.get(p, 1.0), rng, op_calls.get(p, 1))
        for p, c, us in layers
    )
    iteration = [
        sum(r.per_iteration.self_cpu_us.values[i] for r in records)  # type: ignore[union-attr]
        for i in range(ITERS)
    ]
    return _session(
        _plan("Net", tuple(target(r.path, r.class_name) for r in records)),
        records,
        iterations=ITERS,
        requested_iterations=ITERS,
        iteration_cpu_us=tuple(iteration),
        model_hash="abc",
        stability=stability,
    )


def test_shift_is_the_median_ratio_with_an_interval_over_layers() -> None:
    pairs = [(100.0, 120.0)] * 6 + [(100.0, 400.0)]  # one layer really changed
    shift = estimate_shift("self_cpu_us", pairs)
    assert shift is not None and shift.layers == 7
    assert shift.factor == pytest.approx(1.2)
    assert shift.low <= shift.factor <= shift.high
    assert estimate_shift("self_cpu_us", [(100.0, 120.0)] * (MIN_SHIFT_LAYERS - 1)) is None
    assert estimate_shift("self_cpu_us", [(0.0, 10.0)] * 10) is None  # no ratio to take


def test_a_busier_machine_makes_no_layer_slower_and_no_regression_when_a_run_was_noisy() -> None:
    diff = diff_sessions(_run(1, stability=NOISY), _run(2, machine=1.25, stability=NOISY))
    shift = diff.shift("self_cpu_us")
    assert shift is not None and shift.factor == pytest.approx(1.25, rel=0.02)
    assert {layer.verdict for layer in diff.layers} == {"within noise"}
    assert diff.total.verdict == "within noise" and not diff.has_regression()
    assert any("every layer moved together" in w and "noisy" in w for w in diff.warnings)
    change = diff.layers[0].change("self_cpu_us")
    assert change is not None and change.shift == pytest.approx(shift.factor)
    beyond = change.beyond_shift_pct()
    assert beyond is not None and abs(beyond) < 5 and change.delta_pct() > 20  # type: ignore[operator]


def test_layers_of_two_kinds_moving_unalike_on_a_busy_machine_stay_within_noise() -> None:
    # Measured under load: small layers moved -30%, the Linears -14%; neither is the code.
    acts = {p: 0.7 / 0.86 for p, c, _ in LAYERS if c == "ReLU"}
    new = _run(2, machine=0.86, scale=acts, stability=NOISY)
    diff = diff_sessions(_run(1, stability=NOISY), new)
    shift = diff.shift("self_cpu_us")
    assert shift is not None and shift.band_pct() > 15
    assert {layer.verdict for layer in diff.layers} == {"within noise"}
    assert not diff.has_regression()


def test_a_uniform_slowdown_of_stable_runs_is_a_regression_of_the_whole_iteration() -> None:
    # Both runs stable: every layer 25% slower is taken as real (a dtype or threads change).
    diff = diff_sessions(_run(1), _run(2, machine=1.25))
    assert {layer.verdict for layer in diff.layers} == {"within noise"}
    assert diff.total.verdict == "slower" and diff.total.shift is None
    assert diff.has_regression()
    assert any("every layer moved together" in w for w in diff.warnings)


def test_the_changed_layer_stands_out_beyond_the_shift() -> None:
    base = _run(1, stability=NOISY)
    new = _run(2, machine=0.8, scale={"blocks.2.fc": 3.0}, op_calls={"blocks.2.fc": 3})
    diff = diff_sessions(base, new)
    assert diff.layers[0].path == "blocks.2.fc" and diff.layers[0].verdict == "slower"
    assert {layer.verdict for layer in diff.layers[1:]} == {"within noise"}  # not "faster"
    assert [layer.path for layer in diff.regressions()] == ["blocks.2.fc"]


def test_a_neighbour_with_unchanged_work_is_knock_on_not_a_regression() -> None:
    new = _run(
        2,
        scale={"blocks.1.fc": 4.0, "blocks.1.act": 1.2},
        op_calls={"blocks.1.fc": 4},  # its own work changed; the ReLU after it did not
    )
    diff = diff_sessions(_run(1), new)
    act = next(layer for layer in diff.layers if layer.path == "blocks.1.act")
    assert act.verdict == "slower" and act.knock_on
    assert [layer.path for layer in diff.regressions()] == ["blocks.1.fc"]
    assert [layer.path for layer in diff.knock_ons()] == ["blocks.1.act"]
    assert diff.layers[0].path == "blocks.1.fc"  # regressions first, knock-on after them
    text = render_diff_text(diff, verbose=True)
    assert "SLOWER (knock-on): blocks.1.act" in text and "1 knock-on" in text
    brief = render_diff_text(diff)  # the one-screen answer counts it among the rest
    assert "slower: blocks.1.fc [Linear]" in brief and "1 slower (knock-on)" in brief
    assert "knock-on" in render_diff_html(diff)
    row = next(line for line in render_diff_csv(diff).splitlines() if "blocks.1.act" in line)
    assert ",slower,yes," in row


def test_a_slower_layer_is_its_own_regression_when_nothing_else_changed() -> None:
    diff = diff_sessions(_run(1), _run(2, scale={"blocks.1.act": 1.3}))
    act = next(layer for layer in diff.layers if layer.path == "blocks.1.act")
    assert act.verdict == "slower" and not act.knock_on and diff.has_regression()


def test_a_big_change_of_unchanged_work_is_not_called_knock_on() -> None:
    new = _run(2, scale={"blocks.1.fc": 4.0, "blocks.1.act": 2.0}, op_calls={"blocks.1.fc": 4})
    diff = diff_sessions(_run(1), new)
    assert {layer.path for layer in diff.regressions()} == {"blocks.1.fc", "blocks.1.act"}
    assert diff.knock_ons() == ()


def test_few_layers_are_judged_as_measured() -> None:
    few = LAYERS[:3]
    diff = diff_sessions(_run(1, layers=few), _run(2, machine=1.3, layers=few))
    assert diff.shifts == ()
    assert {layer.verdict for layer in diff.layers} == {"slower"}


def test_same_own_work_compares_ops_shapes_and_call_rates() -> None:
    rng = random.Random(0)
    a = _layer("fc", "Linear", 100.0, rng)
    assert same_own_work(a, _layer("fc", "Linear", 300.0, rng), ITERS, ITERS)
    assert not same_own_work(a, _layer("fc", "Linear", 100.0, rng, op_calls=2), ITERS, ITERS)
    assert same_own_work(a, a, ITERS, ITERS)
    assert not same_own_work(a, a, ITERS, 2 * ITERS)  # as many calls in twice the iterations


def test_shifts_round_trip_and_a_version_1_diff_still_loads() -> None:
    diff = diff_sessions(_run(1), _run(2, machine=1.1))
    again = DiffResult.from_json(diff.to_json())
    assert again == diff and again.shifts
    old = json.loads(diff.to_json())
    old["schema_version"] = 1
    old.pop("shifts")
    for layer in old["layers"]:
        layer.pop("knock_on")
        for change in layer["times"]:
            change.pop("shift")
    old["total"].pop("shift")
    loaded = DiffResult.from_json(json.dumps(old))
    assert loaded.shifts == () and not any(layer.knock_on for layer in loaded.layers)
    assert math.isclose(loaded.total.delta, diff.total.delta)


# Issue 37's scenario: one block's MLP made 4x wider. Its GELU runs the same code on a 4x input;
# its Block's own work (two adds) is the same; profiled at a depth that stops at the Block, the
# Block's self time holds the wider MLP's matmuls.
BLOCK = ("blocks.1", "Block", 20.0)


def _widened(seed: int, scale: dict[str, float]) -> tuple[ProfileSession, ProfileSession]:
    """Base and new runs of LAYERS plus the Block (two adds), new with blocks.1.fc's own work
    changed (4x the calls of its op) and the times of `scale`."""
    layers = (*LAYERS, BLOCK)
    new = _run(seed + 1, layers=layers, scale=scale, op_calls={"blocks.1.fc": 4})
    return _adds(_run(seed, layers=layers)), _adds(new)


def _adds(session: ProfileSession) -> ProfileSession:
    records = tuple(
        replace(r, ops=(op("aten::add", 2, r.self_cpu_us.median, r.self_cpu_us.median),))
        if r.class_name == "Block"
        else r
        for r in session.records
    )
    return replace(session, records=records)


def _layer_of(diff: DiffResult, path: str) -> LayerDiff:
    return next(layer for layer in diff.layers if layer.path == path)


def test_an_activation_whose_input_grew_is_slower_and_says_why() -> None:
    base, new = _widened(1, {"blocks.1.fc": 4.0, "blocks.1.act": 1.4, "blocks.2.fc": 1.2})
    grown = tuple(
        replace(r, input_shapes=("8x256",), output_shapes=("8x256",))
        if r.path == "blocks.1.act"
        else r
        for r in new.records
    )
    diff = diff_sessions(base, replace(new, records=grown))
    act = _layer_of(diff, "blocks.1.act")
    assert act.verdict == "slower" and not act.knock_on  # more work: its own change
    assert act.own_work == ("input 8x64 -> 8x256", "output 8x64 -> 8x256")
    line = next(x for x in render_diff_text(diff).splitlines() if "blocks.1.act" in x)
    assert line.endswith("own work changed: input 8x64 -> 8x256; output 8x64 -> 8x256"), line
    assert "own work changed: input 8x64 -> 8x256" in render_diff_text(diff, verbose=True)
    page = render_diff_html(diff)  # in the summary's list and under the layer in the table
    assert page.count("own work changed: input 8x64 -&gt; 8x256") == 2
    neighbour = _layer_of(diff, "blocks.2.fc")  # its work the same: knock-on, as before
    assert neighbour.knock_on and neighbour.own_work == ()


def test_a_block_whose_own_adds_did_not_change_is_knock_on_and_a_big_move_says_so() -> None:
    base, new = _widened(1, {"blocks.1.fc": 4.0, "blocks.1": 1.25})
    block = _layer_of(diff_sessions(base, new), "blocks.1")
    assert block.verdict == "slower" and block.knock_on and block.own_work == ()
    # +751%: over KNOCK_ON_MAX_PCT a move is the layer's own, and the line says its work is
    # the same, so the reader knows it is not a change of its code or its input.
    base, new = _widened(1, {"blocks.1.fc": 4.0, "blocks.1": 8.51})
    diff = diff_sessions(base, new)
    block = _layer_of(diff, "blocks.1")
    assert block.verdict == "slower" and not block.knock_on
    line = next(x for x in render_diff_text(diff).splitlines() if "blocks.1 [Block]" in x)
    assert line.endswith("; own work unchanged (same ops, calls and shapes)"), line


def test_a_block_holding_its_unprofiled_mlp_is_not_knock_on_when_the_mlp_widened() -> None:
    """At --depth 2 the Block is profiled and its MLP is not: the wider MLP's matmuls are in the
    Block's self time. Its own ops, calls and shapes are the same, so it read as knock-on of
    another change and the regression was hidden; the parameters of its children not profiled
    tell the change."""
    layers = (*LAYERS, BLOCK)
    scale = {"blocks.3.fc": 4.0, "blocks.1": 1.3}
    base = _run(1, layers=layers)
    new = _run(2, layers=layers, scale=scale, op_calls={"blocks.3.fc": 4})
    mlp = target("blocks.1.mlp.fc", "Linear", leaf=False)  # selected=False: not profiled
    base = replace(
        base, plan=replace(base.plan, targets=(*base.plan.targets, replace(mlp, param_count=4160)))
    )
    new = replace(
        new, plan=replace(new.plan, targets=(*new.plan.targets, replace(mlp, param_count=16640)))
    )
    diff = diff_sessions(base, new)
    block = _layer_of(diff, "blocks.1")
    assert block.verdict == "slower" and not block.knock_on
    assert block.own_work == ("parameters of its children not profiled 4,160 -> 16,640",)
    assert "blocks.1" in {layer.path for layer in diff.regressions()}


def test_a_version_3_diff_loads_with_own_work_not_compared() -> None:
    base, new = _widened(1, {"blocks.1.fc": 4.0})
    diff = diff_sessions(base, new)
    assert DiffResult.from_json(diff.to_json()) == diff
    old = json.loads(diff.to_json())
    old["schema_version"] = 3
    for layer in old["layers"]:
        layer.pop("own_work")
    loaded = DiffResult.from_json(json.dumps(old))
    assert all(layer.own_work is None for layer in loaded.layers)
    assert "own work" not in render_diff_text(loaded, verbose=True)


def test_a_parent_whose_own_op_works_on_a_grown_child_output_is_not_knock_on() -> None:
    """nanoGPT's MLP runs `F.gelu` on its `fc`'s output in its own forward: widened, the parent's
    ops, calls and shapes are the same, yet its own gelu works on a 4x tensor. The shapes its
    children take and give are its own work too."""
    base, new = _widened(1, {"blocks.1.fc": 4.0, "blocks.1": 1.3})
    grown = tuple(
        replace(r, output_shapes=("8x256",)) if r.path == "blocks.1.fc" else r for r in new.records
    )
    diff = diff_sessions(base, replace(new, records=grown))
    parent = _layer_of(diff, "blocks.1")
    assert parent.verdict == "slower" and not parent.knock_on
    assert parent.own_work == ("its children's shapes fc output 8x64 -> 8x256",)
