"""The one driver and the strategy registry: capability flags that hold, plans trusted or
checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

import hybridprof.planner.plan_check
from hybridprof.api import profile
from hybridprof.cli import main
from hybridprof.errors import UsageError
from hybridprof.planner.module_tree import tree_plan
from hybridprof.runtime.runs.driver import Driver
from hybridprof.runtime.strategies import SPECS, StrategySpec, check_backward
from hybridprof.runtime.strategies.base import MeasuredIteration
from tests.paths import ROOT

SMALL = ROOT / "tests" / "fixtures" / "run_small.py"


def small_net() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 2))


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_lazy_results_flag_says_what_stop_iteration_gives(spec: StrategySpec) -> None:
    model = small_net()
    plan = tree_plan(model, strategy=spec.name)
    driver = Driver(model, plan, spec.name, Driver.config_for(plan, None))
    driver.begin()
    driver.strategy.begin_iteration()
    driver.patch()
    try:
        with torch.no_grad():
            model(torch.ones(3, 6))
    finally:
        driver.restore()
        result = driver.stop()
        driver.end()
    assert result is not None
    assert isinstance(result, MeasuredIteration) is not spec.lazy_results
    assert result.measure().path("0").calls == 1  # every result gives the full measure


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_backward_flag_says_which_strategies_attribute_backward(spec: StrategySpec) -> None:
    model, x = small_net(), torch.ones(3, 6)
    if not spec.backward:
        with pytest.raises(UsageError, match="--backward needs a strategy"):
            check_backward(spec.name)
        with pytest.raises(UsageError, match="--backward needs a strategy"):
            profile(model, x, strategy=spec.name, backward=True, warmup=0, iters=1)
        return
    session = profile(model, x, strategy=spec.name, backward=True, warmup=0, iters=1)
    record = session.record("0")
    assert record is not None and record.backward_self_cpu_us is not None
    assert record.backward_self_cpu_us.median > 0


def test_registry_and_protocol_load_without_torch() -> None:
    code = (
        "import sys\n"
        "import hybridprof.runtime.strategies, hybridprof.runtime.strategies.base\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_cli_trusts_the_plan_it_made_and_checks_a_plan_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    checked: list[str] = []
    real = hybridprof.planner.plan_check.checked_plan

    def counting(*args: object, **kwargs: object) -> object:
        checked.append("plan")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(hybridprof.planner.plan_check, "checked_plan", counting)
    quick = ["--warmup", "0", "--iters", "1"]
    assert main(["run", str(SMALL), *quick, "-o", str(tmp_path / "a.json")]) == 0
    assert checked == []  # planned in this run: not walked or probed again
    plan_file = tmp_path / "plan.json"
    assert main(["analyze", str(SMALL), "-o", str(plan_file)]) == 0
    out = tmp_path / "b.json"
    assert main(["run", str(SMALL), *quick, "--plan", str(plan_file), "-o", str(out)]) == 0
    assert checked == ["plan"]


def test_a_run_leaves_the_gc_freeze_as_it_found_it() -> None:
    """The run keeps long-lived objects out of the GC's scans during its iterations only, and
    never unfreezes what the process froze itself."""
    import gc

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    x = torch.randn(2, 4)
    before = gc.get_freeze_count()
    profile(model, x, iters=2, warmup=1)
    assert gc.get_freeze_count() == before
    sentinel: list[object] = []  # a container the GC tracks, frozen with the rest below

    def still_frozen() -> bool:  # get_objects() lists generations 0-2, never the frozen ones
        return not any(o is sentinel for o in gc.get_objects())

    gc.freeze()
    try:
        assert gc.get_freeze_count() > 0 and still_frozen()
        profile(model, x, iters=2, warmup=1)
        # The count itself may drop: frozen objects that die during the run are freed as usual.
        assert still_frozen(), "the run unfroze the objects the process had frozen"
    finally:
        gc.unfreeze()
