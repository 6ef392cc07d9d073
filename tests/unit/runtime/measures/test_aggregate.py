"""Folding per-iteration measures into records: medians, summed calls, op medians, never-called."""

from __future__ import annotations

from hybridprof.datamodel import ModuleTarget, ProfilePlan
from hybridprof.runtime.measures.aggregate import build_session, environment
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure


def _target(path: str, selected: bool = True) -> ModuleTarget:
    return ModuleTarget(path, "Linear", "torch.nn.Linear", 1, True, selected, "leaf", aliases=())


def _iteration(us: float, calls: int = 1) -> IterationMeasure:
    measure = IterationMeasure(total_cpu_us=us)
    p = measure.path("a")
    p.calls, p.self_cpu_us, p.total_cpu_us, p.cpu_mem = calls, us / 2, us, int(us)
    p.ops["aten::addmm"] = OpMeasure("aten::addmm", calls, us / 2, us)
    p.ops["aten::mm [bwd]"] = OpMeasure("aten::mm", 1, 1.0, 1.0, backward=True)
    return measure


def test_medians_sums_and_never_called() -> None:
    plan = ProfilePlan("Net", (_target("a"), _target("b"), _target("c", selected=False)))
    session = build_session(plan, [_iteration(10), _iteration(30), _iteration(20, 2)], "per-call")
    (record,) = session.records
    assert record.calls == 4
    assert (record.total_cpu_us.median, record.total_cpu_us.min, record.total_cpu_us.max) == (
        20,
        10,
        30,
    )
    assert record.self_cpu_us.median == 10 and record.cpu_mem == 20
    assert record.self_device_us is None and record.backward_self_cpu_us is None
    addmm, mm = record.ops
    assert (addmm.name, addmm.calls, addmm.total_cpu_us) == ("aten::addmm", 1, 20)
    assert mm.name == "aten::mm" and mm.backward
    assert session.never_called == ("b",) and session.iterations == 3
    assert session.iteration_cpu_us == (10, 30, 20)


def test_path_missing_from_an_iteration_counts_as_zero() -> None:
    plan = ProfilePlan("Net", (_target("a"),))
    session = build_session(plan, [_iteration(10), IterationMeasure(), _iteration(30)], "timer")
    assert session.records[0].total_cpu_us.median == 10 and session.records[0].calls == 2


def test_environment_describes_this_process() -> None:
    env = environment()
    assert (
        env.device == "cpu" and env.threads >= 1 and env.cpu and env.python_version.startswith("3.")
    )
