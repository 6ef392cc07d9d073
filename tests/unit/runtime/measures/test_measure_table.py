"""The measured iterations kept as arrays: the session's numbers are those of a plain reading of
the per-iteration objects, and the table holds far less than the objects did."""

from __future__ import annotations

import random
import statistics
import tracemalloc

import pytest

from hybridprof.datamodel import ModuleTarget, ProfilePlan, Stat
from hybridprof.runtime.measures.aggregate import aggregate, as_table, build_session
from hybridprof.runtime.measures.iteration import IterationMeasure, OpMeasure, op_key
from hybridprof.runtime.measures.measure_table import MeasureTable

PATHS = [f"blocks.{i}" for i in range(120)]
OPS = ["aten::addmm", "aten::relu", "aten::t", "aten::mul"]


def _random_measure(rng: random.Random, paths: list[str]) -> IterationMeasure:
    measure = IterationMeasure(total_cpu_us=rng.uniform(1e3, 1e4))
    for path in paths:
        if rng.random() < 0.15:
            continue  # not called in this iteration: counts as 0 there
        layer = measure.path(path)
        layer.calls = rng.randint(0, 3)
        layer.self_cpu_us = rng.uniform(0, 100)
        layer.total_cpu_us = layer.self_cpu_us + rng.uniform(0, 50)
        layer.backward_self_cpu_us = rng.choice([0.0, rng.uniform(0, 30)])
        layer.self_cpu_mem = rng.choice([0, rng.randint(-500, 500)])
        for name in rng.sample(OPS, rng.randint(0, len(OPS))):
            backward = rng.random() < 0.3
            layer.ops[op_key(name, backward)] = OpMeasure(
                name,
                calls=rng.randint(1, 4),
                self_cpu_us=rng.choice([1.0, rng.uniform(0, 5)]),
                total_cpu_us=rng.uniform(0, 9),
                cpu_mem=rng.choice([0, rng.randint(0, 99)]),
                backward=backward,
            )
    return measure


def _targets(paths: list[str]) -> list[ModuleTarget]:
    return [
        ModuleTarget(path, "Linear", "torch.nn.Linear", 1, True, i % 9 != 0, "leaf")
        for i, path in enumerate(paths)
    ]


@pytest.mark.parametrize("iterations", [1, 2, 5])
def test_records_are_the_plain_medians_of_the_iterations(iterations: int) -> None:
    rng = random.Random(iterations)
    measures = [_random_measure(rng, PATHS) for _ in range(iterations)]
    records = {r.path: r for r in aggregate(_targets(PATHS), measures, backward=True)}

    for target in _targets(PATHS):
        layers = [m.paths.get(target.path) for m in measures]
        calls = sum(layer.calls for layer in layers if layer is not None)
        if not target.selected or calls == 0:
            assert target.path not in records
            continue
        record = records[target.path]
        assert record.calls == calls
        self_times = [layer.self_cpu_us if layer else 0.0 for layer in layers]
        assert record.self_cpu_us == Stat(
            statistics.median(self_times), min(self_times), max(self_times)
        )
        backward = [layer.backward_self_cpu_us if layer else 0.0 for layer in layers]
        assert record.backward_self_cpu_us is not None
        assert record.backward_self_cpu_us.median == statistics.median(backward)
        memory = [layer.self_cpu_mem if layer else 0 for layer in layers]
        assert record.self_cpu_mem == round(statistics.median(memory))
        if iterations > 1:
            assert record.per_iteration is not None
            assert record.per_iteration.self_cpu_us.values == tuple(round(v, 1) for v in self_times)
        keys = dict.fromkeys(k for layer in layers if layer for k in layer.ops)
        assert len(record.ops) == len(keys)
        for op in record.ops:
            key = op_key(op.name, op.backward)
            found = [layer.ops.get(key) if layer else None for layer in layers]
            assert op.self_cpu_us == statistics.median(o.self_cpu_us if o else 0.0 for o in found)
            assert op.calls == round(statistics.median(o.calls if o else 0 for o in found))
            assert op.cpu_mem == round(statistics.median(o.cpu_mem if o else 0 for o in found))
        weights = [(-op.self_cpu_us, op.name) for op in record.ops]
        assert weights == sorted(weights)  # heaviest first


def test_a_table_gives_the_same_session_as_the_list_it_was_built_from() -> None:
    rng = random.Random(7)
    measures = [_random_measure(rng, PATHS) for _ in range(4)]
    plan = ProfilePlan("Net", tuple(_targets(PATHS)))
    table = MeasureTable()
    for measure in measures:
        table.add(measure)
    assert build_session(plan, table, "session") == build_session(plan, measures, "session")
    assert as_table(table) is table
    assert table.total_cpu_us == [m.total_cpu_us for m in measures]


def test_each_iteration_adds_a_fraction_of_its_objects_to_the_table() -> None:
    """What keeps a run's memory flat in its iterations: once a layer's ops have been seen, each
    added iteration costs the table a small part of what its objects took."""
    paths = [f"layers.{i}" for i in range(2000)]
    first = _random_measure(random.Random(2), paths)
    measures = [_random_measure(random.Random(3), paths) for _ in range(3)]
    table = MeasureTable.of([first, *measures])  # every (layer, op) pair numbered once

    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    objects = [_random_measure(random.Random(3), paths) for _ in range(3)]
    object_bytes = tracemalloc.get_traced_memory()[0] - before
    del objects
    before = tracemalloc.get_traced_memory()[0]
    for measure in measures:
        table.add(measure)
    table_bytes = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(table) == 7
    assert table_bytes < object_bytes / 4, (table_bytes, object_bytes)


def test_the_op_fields_are_those_an_op_stat_holds_in_its_order() -> None:
    """aggregate builds each OpStat from the OP_FIELDS medians by position."""
    from dataclasses import fields

    from hybridprof.datamodel import OpStat
    from hybridprof.runtime.measures.measure_table import OP_FIELDS

    assert tuple(f.name for f in fields(OpStat))[1:-1] == OP_FIELDS
