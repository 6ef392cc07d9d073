"""What a history snapshot is made of, from a loaded session or straight from a session file.

`history add` keeps a few figures per layer of a session file. Building the whole session first
(`ProfileSession.from_json`: every record's dataclasses, checked) and then its layer rows was
most of a 1,000-layer add (benchmarks/README.md). `read_figures` parses the JSON once and takes
only what a snapshot keeps, one column per figure, checked as the full reader checks those values
(the fields' names, types and bounds, the series' length). A file it does not take as it stands
(an older schema's layout, a value that does not check out) gives None: the caller then reads it
with the full reader, which reads every older layout and names what is wrong in one line, so this
reader never has to. What the history does not keep (op lists, shapes, the plan's targets, the
other per-iteration series) is not read, so not checked either, as with
`load_session(ops=False)`.

`figures_of` takes the same columns from a loaded session (`run --history`, `diff --run
--history`, and the files the fast reader passes on), so both give one snapshot
(`history.snapshot`), figure for figure.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from hybridprof.analysis.layer_table import optimizer_rows, total_is_self
from hybridprof.datamodel import (
    SCHEMA_VERSION,
    Environment,
    ModuleRecord,
    ProfilePlan,
    ProfileSession,
    Stat,
)
from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.datamodel.jsonbounds import (
    MAX_NUMBER,
    MAX_PATH_PARTS,
    MAX_TEXT,
    may_hold_lone_surrogate,
    no_constant,
)
from hybridprof.datamodel.jsonio import from_plain
from hybridprof.datamodel.measures import IterationSeries, series_values
from hybridprof.datamodel.memory import MemoryProfile
from hybridprof.datamodel.schema import SESSION_KIND
from hybridprof.datamodel.session import Stability
from hybridprof.datamodel.training import OptimizerRecord
from hybridprof.datamodel.work import WorkProfile


@dataclass(frozen=True, slots=True)
class LayerMeasures:
    """A session's records as the history reads them: one tuple per figure, in record order
    (medians, in us per iteration; None where not measured)."""

    paths: tuple[str, ...]
    class_names: tuple[str, ...]  # the record's class, else its plan target's
    calls: tuple[int, ...]
    self_cpu: tuple[float, ...]
    total_cpu: tuple[float, ...]
    # a layer with no layer inside: its total is its self time, figure and series
    total_is_self: tuple[bool, ...]
    backward_self_cpu: tuple[float | None, ...]
    self_device: tuple[float | None, ...]
    self_series: tuple[tuple[float, ...] | None, ...]  # the self CPU time of each iteration


@dataclass(frozen=True, slots=True)
class SessionFigures:
    """Everything of a session that its history snapshot is worked out from."""

    started_at: str
    command: tuple[str, ...]
    model_file: str | None  # the session's (what its identity hashes)
    plan_model_file: str | None
    root: str  # the plan's root class
    model_hash: str | None
    environment: Environment
    iterations: int
    iteration_cpu_us: tuple[float, ...]
    use_device: bool
    stability: str  # "stable", "noisy" or "unknown" (a file before schema 3)
    outside_us: float | None  # the outside row's median (None: not measured)
    optimizer_own_us: tuple[float, ...]  # the optimizer's rows' own times (a training loop)
    layers: LayerMeasures
    flops: Mapping[str, int]  # per path with --flops: the forward FLOPs of its own ops
    memory_peaks: Mapping[str, int]  # per path with --profile-memory: its forward peak


def figures_of(session: ProfileSession) -> SessionFigures:
    """The figures of a loaded session."""
    records = session.records
    paths = [r.path for r in records]
    series = [r.per_iteration.self_cpu_us.values if r.per_iteration else None for r in records]
    layers = LayerMeasures(
        paths=tuple(paths),
        class_names=_class_names([r.class_name for r in records], paths, lambda: session.plan),
        calls=tuple(r.calls for r in records),
        self_cpu=tuple(r.self_cpu_us.median for r in records),
        total_cpu=tuple(r.total_cpu_us.median for r in records),
        total_is_self=tuple(map(total_is_self, records)),
        backward_self_cpu=tuple(_median(r.backward_self_cpu_us) for r in records),
        self_device=tuple(_median(r.self_device_us) for r in records),
        self_series=tuple(series),
    )
    optimizer = optimizer_rows(session.optimizer, session.iterations)
    device = session.memory.primary if session.memory is not None else None
    return SessionFigures(
        started_at=session.started_at,
        command=session.command,
        model_file=session.model_file,
        plan_model_file=session.plan.model_file,
        root=session.plan.root_class,
        model_hash=session.model_hash,
        environment=session.environment,
        iterations=session.iterations,
        iteration_cpu_us=session.iteration_cpu_us,
        use_device=session.use_device,
        stability=session.stability.verdict if session.stability is not None else "unknown",
        outside_us=_median(session.outside_cpu_us),
        optimizer_own_us=tuple(row.own_us for row in optimizer),
        layers=layers,
        flops={w.path: w.flops for w in session.flops.layers} if session.flops else {},
        memory_peaks={m.path: m.peak for m in device.layers} if device is not None else {},
    )


def _median(stat: Stat | None) -> float | None:
    return None if stat is None else stat.median


def _class_names(
    names: Sequence[str], paths: Sequence[str], plan: Callable[[], ProfilePlan]
) -> tuple[str, ...]:
    """Each record's class, else (a record that names none) its plan target's, as the layer
    table names it; the plan is read only then (a file's plan costs as much as its records)."""
    if all(names):
        return tuple(names)
    targets = {t.path: t.class_name for t in plan().targets}
    return tuple(name or targets.get(path, "") for name, path in zip(names, paths, strict=True))


# --------------------------------------------------------------------------- the fast reader

_SESSION_FIELDS = frozenset(f.name for f in fields(ProfileSession)) | {"kind"}
_SESSION_REQUIRED = ("plan", "environment", "records", "strategy")
_RECORD_FIELDS = frozenset(f.name for f in fields(ModuleRecord))
_RECORD_REQUIRED = ("path", "class_name", "calls", "self_cpu_us", "total_cpu_us")
_SERIES_FIELDS = frozenset(f.name for f in fields(IterationSeries))


class _NotPlain(Exception):
    """The file is not in the form the fast reader takes: the full reader reads it."""


def read_figures(text: str) -> SessionFigures | None:
    """The figures of a session file's text, or None where the full reader must read it (see
    the module docstring)."""
    with gc_paused():  # the parsed JSON is thousands of containers, none in a cycle
        try:
            return _read(text)
        except _NotPlain:
            return None


def _read(text: str) -> SessionFigures:
    try:
        data = json.loads(text, parse_constant=no_constant)
    except (ValueError, RecursionError):
        raise _NotPlain from None
    _check(type(data) is dict and data.get("kind") == SESSION_KIND)
    _check(data.get("schema_version") == SCHEMA_VERSION and not may_hold_lone_surrogate(text))
    _check(_SESSION_FIELDS.issuperset(data) and all(k in data for k in _SESSION_REQUIRED))
    iterations = _section(int, data.get("iterations", 1))
    _check(iterations >= 0)
    plan = data["plan"]
    _check(type(plan) is dict)
    layers = _layers(data["records"], iterations, lambda: _section(ProfilePlan, plan))
    optimizer = _section(OptimizerRecord | None, data.get("optimizer"))
    _check(optimizer is None or optimizer.series_lengths() <= {iterations})
    flops = _section(WorkProfile | None, data.get("flops"))
    memory = _section(MemoryProfile | None, data.get("memory"))
    device = memory.primary if memory is not None else None
    stability = _section(Stability | None, data.get("stability"))
    return SessionFigures(
        started_at=_section(str, data.get("started_at", "")),
        command=_section(tuple[str, ...], data.get("command", [])),
        model_file=_section(str | None, data.get("model_file")),
        plan_model_file=_section(str | None, plan.get("model_file")),
        root=_section(str, plan.get("root_class")),
        model_hash=_section(str | None, data.get("model_hash")),
        environment=_section(Environment, data["environment"]),
        iterations=iterations,
        iteration_cpu_us=_section(tuple[float, ...], data.get("iteration_cpu_us", [])),
        use_device=_section(bool, data.get("use_device", False)),
        stability=stability.verdict if stability is not None else "unknown",
        outside_us=_median(_section(Stat | None, data.get("outside_cpu_us"))),
        optimizer_own_us=tuple(row.own_us for row in optimizer_rows(optimizer, iterations)),
        layers=layers,
        flops={w.path: w.flops for w in flops.layers} if flops is not None else {},
        memory_peaks={m.path: m.peak for m in device.layers} if device is not None else {},
    )


def _check(condition: bool) -> None:
    if not condition:
        raise _NotPlain


def _section(tp: Any, value: Any) -> Any:
    """A small part of the file read (and checked) by the full reader's own code for its type."""
    try:
        return from_plain(tp, value)
    except (ValueError, TypeError, KeyError, IndexError):
        raise _NotPlain from None


def _layers(records: Any, iterations: int, plan: Any) -> LayerMeasures:
    """The records' columns, each checked at once (a record at a time would be the full
    reader's cost again)."""
    _check(type(records) is list and all(type(r) is dict for r in records))
    _check(all(_RECORD_FIELDS.issuperset(r) for r in records))
    try:
        paths, names, calls, selfs, totals = (
            [r[name] for r in records] for name in _RECORD_REQUIRED
        )
    except KeyError:
        raise _NotPlain from None
    _check(_texts(paths) and _texts(names) and _whole_numbers(calls))
    _check(not paths or max(p.count(".") for p in paths) < MAX_PATH_PARTS)
    series = [r.get("per_iteration") for r in records]
    own, total = _stats(selfs), _stats(totals)  # [median, min, max, median, ...]
    return LayerMeasures(
        paths=tuple(paths),
        class_names=_class_names(names, paths, plan),
        calls=tuple(calls),
        self_cpu=tuple(own[0::3]),
        total_cpu=tuple(total[0::3]),
        total_is_self=tuple(
            (s is None or "total_cpu_us" not in s) and own[i : i + 3] == total[i : i + 3]
            for s, i in zip(series, range(0, len(own), 3), strict=True)
        ),
        backward_self_cpu=_optional_medians([r.get("backward_self_cpu_us") for r in records]),
        self_device=_optional_medians([r.get("self_device_us") for r in records]),
        self_series=_self_series(series, iterations),
    )


def _texts(values: list[Any]) -> bool:
    return set(map(type, values)) <= {str} and (not values or max(map(len, values)) <= MAX_TEXT)


def _whole_numbers(values: list[Any]) -> bool:
    if not set(map(type, values)) <= {int}:
        return False
    return not values or (min(values) >= -MAX_NUMBER and max(values) <= MAX_NUMBER)


def _numbers(values: list[Any]) -> list[float]:
    """JSON numbers as the full reader reads them (an int as its float), checked."""
    kinds = set(map(type, values))
    _check(kinds <= {float, int})
    _check(not values or (min(values) >= -MAX_NUMBER and max(values) <= MAX_NUMBER))
    return list(map(float, values)) if int in kinds else values


def _stats(stats: list[Any]) -> list[float]:
    """`Stat`s as the file holds them ([median, min, max] each), checked and read as floats, one
    list of them all: median, min, max, median, min, max..."""
    _check(set(map(type, stats)) <= {list})
    _check(set(map(len, stats)) <= {3})
    return _numbers(list(itertools.chain.from_iterable(stats)))


def _optional_medians(stats: list[Any]) -> tuple[float | None, ...]:
    present = [s for s in stats if s is not None]
    if not present:
        return (None,) * len(stats)
    found = iter(_stats(present)[0::3])
    return tuple(None if s is None else next(found) for s in stats)


def _self_series(series: list[Any], iterations: int) -> tuple[tuple[float, ...] | None, ...]:
    """Each record's per-iteration self CPU times (as `Series.decode` reads them), each of
    `iterations` values."""
    present = [s for s in series if s is not None]
    _check(all(type(s) is dict and _SERIES_FIELDS.issuperset(s) for s in present))
    try:
        texts = [s["self_cpu_us"] for s in present]
    except KeyError:
        raise _NotPlain from None
    values = series_values(texts)
    _check(values is not None and set(map(len, values)) <= {iterations})
    assert values is not None
    found = iter(values)
    return tuple(None if s is None else next(found) for s in series)


__all__ = ["LayerMeasures", "SessionFigures", "figures_of", "read_figures"]
