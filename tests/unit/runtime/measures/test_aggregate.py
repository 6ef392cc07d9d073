"""Folding per-iteration measures into records: medians, summed calls, op medians, never-called."""

from __future__ import annotations

import random
import statistics

from hybridprof.datamodel import ModuleTarget, ProfilePlan, Series, Stat
from hybridprof.runtime.measures.aggregate import RunFacts, build_session, environment
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure, PathMeasure


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


def _measures(iterations: int, seed: int) -> list[IterationMeasure]:
    """Layers with varied figures over `iterations`; `c` missing from every third iteration;
    ops of equal weight (ties) and one op name in both passes."""
    rng = random.Random(seed)
    found = []
    for i in range(iterations):
        measure = IterationMeasure(total_cpu_us=1000.0)
        for path in ("a", "b", "c"):
            if path == "c" and i % 3 == 1:
                continue
            p = measure.path(path)
            p.calls = rng.randint(1, 3)
            p.self_cpu_us = round(rng.uniform(1, 50), 3)
            p.total_cpu_us = p.self_cpu_us + rng.choice((0.0, 7.25))
            p.cpu_mem = rng.randint(0, 9) * 512 + (i % 2)
            p.backward_self_cpu_us = rng.uniform(0, 5)
            tie = float(rng.choice((2, 3)))
            for name, backward, self_us in (
                ("aten::relu", False, tie),
                ("aten::add", False, tie),
                ("aten::add", True, tie),
                ("aten::mm", False, rng.uniform(0, 9)),
            ):
                op = OpMeasure(name, p.calls, self_us, self_us + 1, backward=backward)
                p.ops[f"{name}{' [bwd]' if backward else ''}"] = op
        found.append(measure)
    return found


def test_records_are_each_layers_own_medians_and_op_order() -> None:
    # The records are worked out for all layers at once (one sort per field); each must be what
    # the figures of that layer alone give: Stat.of, statistics.median rounded, Series.of, and
    # its ops by weight, then name, then first appearance.
    plan = ProfilePlan("Net", tuple(_target(p) for p in ("a", "b", "c", "d")))
    for iterations in (1, 2, 3, 4, 7):
        measures = _measures(iterations, seed=iterations)
        facts = RunFacts(environment=environment(), backward=True)
        session = build_session(plan, measures, "session", facts)
        assert [r.path for r in session.records] == ["a", "b", "c"]
        assert session.never_called == ("d",)
        for record in session.records:
            rows = [m.paths.get(record.path) for m in measures]

            def values(field: str, rows: list[PathMeasure | None] = rows) -> list[float]:
                return [float(getattr(r, field)) if r is not None else 0.0 for r in rows]

            assert record.calls == sum(values("calls"))
            assert record.self_cpu_us == Stat.of(values("self_cpu_us"))
            assert record.total_cpu_us == Stat.of(values("total_cpu_us"))
            assert record.backward_self_cpu_us == Stat.of(values("backward_self_cpu_us"))
            assert record.cpu_mem == round(statistics.median(values("cpu_mem")))
            series = record.per_iteration
            if iterations == 1:
                assert series is None
            else:
                assert series is not None
                assert series.self_cpu_us == Series.of(values("self_cpu_us"))
                assert series.total_cpu() == Series.of(values("total_cpu_us"))
            weights = [(-op.self_cpu_us, op.name) for op in record.ops]
            assert weights == sorted(weights)
            names = [(op.name, op.backward) for op in record.ops]
            assert len(set(names)) == 4
            adds = [op.backward for op in record.ops if op.name == "aten::add"]
            assert adds == [False, True]  # a tie keeps the order the ops first came in
