"""Steps of a loop inside `with hybridprof.Profile(...)`: `prof.step()`, `hybridprof.schedule`,
windows that install everything only while they are open, and what is measured in them."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import hybridprof
from hybridprof.analysis.layer_table import layer_table
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.runs.guards import open_blocks
from hybridprof.runtime.training.hooks import live_hooks
from tests.paths import ROOT
from tests.training_loops import Loop, bitwise_equal, mlp, train


def scheduled(**counts: int) -> object:
    def make(model: nn.Module) -> hybridprof.Profile:
        return hybridprof.Profile(model, leaves_only=False, schedule=hybridprof.schedule(**counts))

    return make


def test_twenty_steps_with_a_schedule_give_its_ten_active_steps() -> None:
    loop = Loop(groups=True)
    bare = train("mlp", loop, steps=20)
    run = train(
        "mlp", loop, steps=20, profile=scheduled(wait=2, warmup=3, active=10), step_calls=True
    )
    assert bitwise_equal(bare, run)
    assert run.prof is not None
    session = run.prof.session()
    assert session.iterations == len(session.iteration_cpu_us) == 10 == run.prof.iterations
    assert session.steps == 20 and session.warmup == 3
    assert session.schedule is not None and (session.schedule.wait, session.schedule.active) == (
        2,
        10,
    )
    assert session.stability is not None and session.stability.verdict in ("stable", "noisy")
    table = layer_table(session)
    for row in table.layers():
        assert row.self_cpu is not None and row.self_cpu.interval is not None, row.path
    optimizer = session.optimizer
    assert optimizer is not None and optimizer.calls == 10
    assert optimizer.per_iteration is not None and len(optimizer.per_iteration.values) == 10
    step = next(r for r in table.optimizer() if r.name == "step")
    # its own time has an interval; its total is its rows' sum (its own and its param groups')
    assert step.self_cpu is not None and step.self_cpu.interval is not None
    groups = [r for r in table.optimizer() if r.parent == step.path]
    assert step.total_cpu is not None and groups
    assert step.total_cpu.median == pytest.approx(step.own_us + sum(g.own_us for g in groups))
    assert isinstance(run.prof.converged, bool)
    # each measured step's rows add up to its step range
    for i, whole in enumerate(session.iteration_cpu_us):
        own = sum(
            s.self_cpu_us.values[i] + s.backward_self_cpu_us.values[i]
            for s in (r.per_iteration for r in session.records)
            if s is not None and s.backward_self_cpu_us is not None
        )
        assert session.outside_cpu_us is not None
        assert own + optimizer.per_iteration.values[i] <= whole * (1 + 1e-6)


class Watch:
    """What is installed at each `prof.step()` of a loop."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.seen: list[tuple[bool, bool, bool]] = []

    def look(self) -> None:
        patched = any("forward" in m.__dict__ for m in self.model.modules())
        self.seen.append((patched, bool(live_hooks()), torch.autograd._profiler_enabled()))


def test_steps_outside_windows_run_the_model_untouched() -> None:
    model = mlp()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    watch = Watch(model)
    x, y = torch.randn(8, 32), torch.randint(0, 5, (8,))
    schedule = hybridprof.schedule(wait=2, warmup=1, active=2, repeat=2)
    with hybridprof.Profile(model, schedule=schedule) as prof:
        for _ in range(12):
            watch.look()  # before the step: what it runs with
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
        assert open_blocks()
    installed = [all(s) for s in watch.seen]
    nothing = [not any(s) for s in watch.seen]
    # two cycles of wait 2, warm-up 1, active 2: steps 2-4 and 7-9 run in windows
    assert installed == [i in (2, 3, 4, 7, 8, 9) for i in range(12)]
    assert nothing == [not x for x in installed]
    assert prof.session().iterations == 4 and prof.steps == 12
    assert not live_patches() and not live_hooks() and not open_blocks()


def test_a_window_longer_than_a_session_restarts_its_profiler() -> None:
    def make(model: nn.Module) -> hybridprof.Profile:
        plan = hybridprof.schedule(wait=0, warmup=1, active=7)
        return hybridprof.Profile(model, schedule=plan, steps_per_session=3)

    run = train("mlp", Loop(), steps=8, profile=make, step_calls=True)
    assert run.prof is not None
    session = run.prof.session()
    assert session.iterations == 7 and session.optimizer is not None
    assert session.optimizer.calls == 7


def test_steps_without_a_schedule_are_all_measured_and_an_empty_tail_is_not() -> None:
    run = train("mlp", Loop(), steps=4, profile=lambda m: hybridprof.Profile(m), step_calls=True)
    assert run.prof is not None
    assert run.prof.session().iterations == 4  # the loop's exit after the 4th step() is no step


def test_a_tail_that_trained_is_a_step() -> None:
    model = mlp()
    x = torch.randn(4, 32)
    with hybridprof.Profile(model) as prof:
        model(x).sum().backward()
        prof.step()
        model(x).sum().backward()  # no step() after it: still a step
    assert prof.session().iterations == 2


def test_step_outside_the_block_is_refused_in_one_line() -> None:
    prof = hybridprof.Profile(mlp())
    with pytest.raises(RuntimeError, match=r"inside `with hybridprof.Profile"):
        prof.step()
    disabled = hybridprof.Profile(mlp(), enabled=False)
    with disabled:
        disabled.step()  # a disabled Profile counts nothing and says nothing
    assert disabled.steps == 0


def test_a_schedule_the_loop_never_reaches_says_so() -> None:
    run = train("mlp", Loop(), steps=3, profile=scheduled(wait=5, active=2), step_calls=True)
    assert run.prof is not None
    assert "nothing profiled (no measured step in 3 steps)" in str(run.prof)
    with pytest.raises(RuntimeError, match="before its schedule's first active step"):
        run.prof.session()


@pytest.mark.parametrize(
    "counts",
    [{"active": 0}, {"active": 2, "wait": -1}, {"active": 2, "repeat": 1.5}, {"active": True}],
)
def test_bad_schedules_are_value_errors(counts: dict[str, object]) -> None:
    with pytest.raises(ValueError, match=r"^hybridprof.schedule\(") as caught:
        hybridprof.schedule(**counts)  # type: ignore[arg-type]
    assert "\n" not in str(caught.value)
    torch_schedule = torch.profiler.schedule(wait=1, warmup=1, active=1)
    with pytest.raises(ValueError, match=r"schedule= takes hybridprof\.schedule"):
        hybridprof.Profile(mlp(), schedule=torch_schedule)  # type: ignore[arg-type]


def test_a_closure_run_by_the_optimizer_is_not_the_optimizers() -> None:
    """Lightning runs the forward, loss and backward inside `optimizer.step(closure)`."""
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(8, 32), torch.randint(0, 5, (8,))

    def closure() -> torch.Tensor:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        return loss

    with hybridprof.Profile(model, leaves_only=False) as prof:
        optimizer.step(closure)
    session = prof.session()
    assert session.optimizer is not None
    optimizer_ops = {op.name for op in session.optimizer.ops}
    assert "aten::addmm" not in optimizer_ops and "aten::nll_loss_forward" not in optimizer_ops
    first = session.record("0")
    assert first is not None and first.backward_self_cpu_us is not None
    assert first.self_cpu_us.median > 0 and first.backward_self_cpu_us.median > 0
    assert "aten::lerp_" in optimizer_ops or "aten::_foreach_lerp_" in optimizer_ops


def test_an_optimizer_stepped_in_backward_is_the_optimizers() -> None:
    def run(profiled: bool) -> tuple[dict[str, torch.Tensor], hybridprof.Profile | None]:
        model = mlp()
        steps = {p: torch.optim.SGD([p], lr=0.1) for p in model.parameters()}

        def step_now(parameter: torch.Tensor) -> None:
            steps[parameter].step()
            steps[parameter].zero_grad()

        for parameter in model.parameters():
            parameter.register_post_accumulate_grad_hook(step_now)
        prof = hybridprof.Profile(model) if profiled else None
        torch.manual_seed(3)
        x = torch.randn(8, 32)
        if prof is not None:
            with prof:
                model(x).square().mean().backward()
        else:
            model(x).square().mean().backward()
        return {k: v.clone() for k, v in model.state_dict().items()}, prof

    bare, _ = run(False)
    weights, prof = run(True)
    assert all(torch.equal(bare[k], weights[k]) for k in bare)
    assert prof is not None
    session = prof.session()
    assert session.optimizer is not None and session.optimizer.calls == 10  # one per parameter
    step = session.iteration_cpu_us[0]
    layers = sum(
        r.self_cpu_us.median + (r.backward_self_cpu_us.median if r.backward_self_cpu_us else 0)
        for r in session.records
    )
    assert session.outside_cpu_us is not None
    total = layers + session.optimizer.self_cpu_us.median + session.outside_cpu_us.median
    assert total == pytest.approx(step, rel=1e-6)


def test_a_copy_of_the_optimizer_made_in_a_window_steps_its_own_parameters() -> None:
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    with hybridprof.Profile(model) as prof:
        model(torch.randn(4, 32)).sum().backward()
        optimizer.step()
        clone = copy.deepcopy(optimizer)
        assert "_init_group" not in clone.__dict__ and "step" not in clone.__dict__
        before = [p.detach().clone() for p in model.parameters()]
        clone.step()  # steps the copied parameters, not the model's
        assert all(torch.equal(a, p) for a, p in zip(before, model.parameters(), strict=True))
    assert prof.session().optimizer is not None


def test_the_layers_forward_only_under_a_strategy_without_backward_says_so() -> None:
    with pytest.warns(RuntimeWarning, match="strategy 'timer' does not attribute"):
        run = train("mlp", Loop(), profile=lambda m: hybridprof.Profile(m, strategy="timer"))
    assert run.prof is not None
    session = run.prof.session()
    assert any("does not attribute" in w and "strategy 'timer'" in w for w in session.warnings)
    forward_only = mlp()
    with hybridprof.Profile(forward_only, strategy="timer") as prof:
        forward_only(torch.randn(2, 32))
    assert not any("does not attribute" in w for w in prof.session().warnings)


def test_a_window_is_skipped_while_torch_profiler_runs() -> None:
    model = mlp()
    x = torch.randn(4, 32)
    prof = hybridprof.Profile(model, schedule=hybridprof.schedule(wait=1, warmup=0, active=2))
    with pytest.warns(RuntimeWarning, match="torch.profiler was running"), prof:
        with torch.profiler.profile():
            model(x)
            prof.step()  # the window would begin here: torch's profiler is running
            model(x)
        prof.step()
        model(x)
        prof.step()
    session = prof.session()
    assert session.iterations == 1
    assert any("torch.profiler was running" in w for w in session.warnings)


def test_a_failure_in_a_window_restores_everything_and_propagates() -> None:
    model = mlp()
    schedule = hybridprof.schedule(wait=1, active=3)
    prof = hybridprof.Profile(model, schedule=schedule)
    with pytest.raises(ZeroDivisionError), prof:
        for step in range(4):
            model(torch.randn(2, 32)).sum().backward()
            if step == 2:
                raise ZeroDivisionError("in the user's loop")
            prof.step()
    assert not any("forward" in m.__dict__ for m in model.modules())
    assert not live_hooks() and not open_blocks()
    assert prof.iterations == 0  # step 2 (the first active one) never ended
    nested = hybridprof.Profile(model)
    with nested:  # nothing of the failed block is left to refuse it
        model(torch.randn(2, 32))


def test_a_profile_between_windows_is_refused() -> None:
    model = mlp()
    with hybridprof.Profile(model, schedule=hybridprof.schedule(wait=1, active=1)) as prof:
        inner = hybridprof.Profile(mlp())
        with pytest.raises(RuntimeError, match="counting the steps of Sequential"), inner:
            pass
        prof.step()


MEMORY_SCRIPT = textwrap.dedent(
    """
    import json, resource, sys
    import torch, torch.nn.functional as F
    import hybridprof
    from tests.training_loops import mlp
    torch.set_num_threads(1)
    model = mlp()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = torch.randn(16, 32), torch.randint(0, 5, (16,))
    schedule = hybridprof.schedule(wait=2, warmup=3, active=10)
    with hybridprof.Profile(model, leaves_only=False, schedule=schedule) as prof:
        for _ in range(int(sys.argv[1])):
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            optimizer.zero_grad()
            prof.step()
    session = prof.session()
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"iterations": session.iterations, "peak_kb": peak_kb}))
    """
)


def peak(steps: int) -> dict[str, int]:
    done = subprocess.run(
        [sys.executable, "-c", MEMORY_SCRIPT, str(steps)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    found: dict[str, int] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


@pytest.mark.slow
def test_memory_stays_flat_in_the_number_of_steps() -> None:
    short, long = peak(20), peak(2000)
    assert short["iterations"] == long["iterations"] == 10
    assert long["peak_kb"] <= short["peak_kb"] * 1.05, (short, long)


@pytest.mark.parametrize("memory", [False, True])
def test_raw_after_steps_holds_the_first_sessions_measured_calls(memory: bool) -> None:
    model = mlp()
    with hybridprof.Profile(model, profile_memory=memory, steps_per_session=2) as prof:
        for _ in range(3):
            model(torch.randn(4, 32)).sum().backward()
            prof.step()
    _, events = prof.raw()
    # The first session: 2 steps; with per-layer memory a session holds one measured step.
    assert {len(calls) for calls in events.values()} == {1 if memory else 2}
    assert len(events) == 9  # every leaf of the MLP (torchprof's selection)
