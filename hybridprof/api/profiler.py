"""`hybridprof.Profile`: torchprof's context manager, on PyTorch 2.x.

    with hybridprof.Profile(model, use_cuda=False, profile_memory=True) as prof:
        model(x)
    print(prof)                      # the torchprof-style tree table
    traces, events = prof.raw()      # torchprof's raw shapes

The whole with-block is one measured iteration. Code written for torchprof runs unchanged; the
keyword-only extras choose the strategy and select by glob or depth. One Profile records one
with-block: entering it again raises RuntimeError, as torchprof did.

Results are worked out when first read, and only as far as the reader needs (the `session`
strategy; the others measure as they go). Leaving the with-block only stops the profiler. The
table of `str(prof)` / `display()` without memory or CUDA columns needs each layer's calls and
self/total CPU time, which the layer ranges alone give; the ops are attributed the first time
something shows them: `display(show_events=True)`, `session()`, `to_dataframe()` or `raw()`.
On the 400-leaf MLP that halves what `with Profile(...)` plus the first `str(prof)` costs on top
of the forwards (benchmarks/bench_overhead.py), and the numbers are the same either way.
"""

from __future__ import annotations

import contextlib
import gc
import warnings
from collections import defaultdict, namedtuple
from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.planner.module_tree import Selector, is_scripted, tree_plan
from hybridprof.runtime.compiled import dynamo_facts
from hybridprof.runtime.compiled.run import CompiledRun, compiled_run
from hybridprof.runtime.driver import Driver
from hybridprof.runtime.measures.aggregate import RunFacts, environment
from hybridprof.runtime.measures.iteration import IterationMeasure
from hybridprof.runtime.quiet import quiet_fd2
from hybridprof.runtime.strategies import DEFAULT_STRATEGY
from hybridprof.runtime.strategies.base import IterationResult
from hybridprof.runtime.workload import resolve_device

# torchprof's trace record: path is a tuple from the root class name, e.g. ("AlexNet", "features",
# "0").
Trace = namedtuple("Trace", ["path", "leaf", "module"])


class Profile:
    """Profile the selected layers of `model` during one with-block.

    Without `paths`/`globs`/`depth` the leaves are profiled, as torchprof did; `leaves_only=False`
    selects every module that runs a forward, so parents get rows and the rows add up to the block.
    """

    def __init__(
        self,
        model: nn.Module,
        enabled: bool = True,
        use_cuda: bool = False,
        profile_memory: bool = False,
        paths: Sequence[Selector] | None = None,
        strategy: str = DEFAULT_STRATEGY,
        *,
        globs: Sequence[str] = (),
        depth: int | None = None,
        leaves_only: bool = True,
    ) -> None:
        self._model = model
        self.enabled = enabled
        self.use_cuda = use_cuda
        self.profile_memory = profile_memory
        self.paths = paths  # as given, as torchprof kept them
        self.strategy_name = strategy
        # Planned now, so an unknown path fails where the Profile is made, with close matches.
        self.plan: ProfilePlan = tree_plan(
            model, paths, globs, depth, strategy=strategy, leaves_only=leaves_only
        )
        self.entered = False
        self._gc_paused = False  # this block disabled the cyclic GC and turns it back on
        self.exited = False
        self._traces: tuple[Trace, ...] | None = None
        self._trace_events: defaultdict[tuple[str, ...], list[Any]] | None = None
        self._driver: Driver | None = None
        self._result: IterationResult | None = None  # worked out when first read
        self._raw: dict[str, list[Any]] | None = None
        self._session: ProfileSession | None = None
        self._layer_session: ProfileSession | None = None
        self._compiled: CompiledRun | None = None  # the model's compiled parts, if any
        self._instrumented: contextlib.ExitStack | None = None
        self._dynamo = dynamo_facts.snapshot()  # a compiled caller is seen by what dynamo did

    @property
    def failed_path(self) -> str | None:
        """The innermost profiled path an exception passed through in the with-block, if any."""
        return self._driver.patcher.failed_path if self._driver is not None else None

    def __enter__(self) -> Profile:
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError(
                "this hybridprof.Profile was already entered; a Profile records one with-block, "
                "so create a new Profile for the next one"
            )
        self.entered = True
        device = None
        if self.use_cuda:
            device = resolve_device("cuda", asked_as="use_cuda=True", fix="use_cuda=False")
        config = Driver.config_for(
            self.plan, device, profile_memory=self.profile_memory, keep_raw_events=True
        )
        self._dynamo = dynamo_facts.snapshot()
        compiled = self._compiled = compiled_run(self._model, self.strategy_name)
        if compiled is not None:  # kernels of compiled code, mapped by a compile in the block
            config = replace(config, compiled=compiled)
            self._instrumented = contextlib.ExitStack()
            self._instrumented.enter_context(compiled.instrumented())
        driver = self._driver = Driver(
            self._model, self.plan, self.strategy_name, config, compiled=compiled
        )
        # The cyclic GC waits until the block ends: a collection inside it (tens of ms in a
        # process holding torch) would land in whichever layer was running.
        self._gc_paused = gc.isenabled()
        gc.disable()
        with quiet_fd2():
            driver.begin()
            driver.strategy.begin_iteration()
        try:
            driver.patch()
        except BaseException:
            self._finish(failed=True)
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._driver is None:
            return
        try:
            self._driver.restore()
        finally:
            if self._instrumented is not None:
                self._instrumented.close()
            if self._compiled is not None:
                self._compiled.warmup_done(self.plan.selected_paths())
            self.exited = True
            self._finish(failed=exc_type is not None)
        said = self._driver.thread_warning()
        if said:
            warnings.warn(said, RuntimeWarning, stacklevel=2)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model, as torchprof's Profile did: `prof(x)` is `model(x)`."""
        return self._model(*args, **kwargs)

    def _finish(self, failed: bool) -> None:
        """Stop the strategy; after a failed block keep what was measured but never mask the
        error."""
        driver = self._driver
        if driver is None:
            return
        if self._instrumented is not None:
            self._instrumented.close()  # the compile settings back as they were
        with quiet_fd2():
            try:
                self._result = driver.stop()  # worked out when first read
            except Exception:
                if not failed:
                    raise
            finally:
                driver.end()
                if self._gc_paused:
                    self._gc_paused = False
                    gc.enable()

    def _profiled(self) -> bool:
        return self._result is not None

    def _stopped(self) -> IterationResult:
        if self._result is None:
            raise RuntimeError(
                "nothing was profiled yet: use the Profile in a with-block (enabled=True) first"
            )
        return self._result

    # -- results

    def session(self) -> ProfileSession:
        """The measured with-block as a ProfileSession (built once, then cached)."""
        if self._session is None:
            self._session = self._build_session(self._stopped().measure())
        return self._session

    def _build_session(self, measure: IterationMeasure) -> ProfileSession:
        driver = self._driver
        assert driver is not None  # a result exists only after a with-block
        facts = RunFacts(
            environment=environment("cuda" if self.use_cuda else None),
            duration_s=round(driver.seconds, 3),
        )
        session = driver.build_session([measure], facts)
        if self._compiled is not None:
            return self._compiled.finish(session)
        said = dynamo_facts.compiled_caller_warning(self._dynamo)
        return replace(session, warnings=(*session.warnings, said)) if said else session

    def _table_session(self, show_events: bool) -> ProfileSession:
        """What `display` renders: the full session once built or needed, else one built from the
        layer ranges alone (no ops: only ever rendered, never handed out)."""
        result = self._result
        if self._session is not None or show_events or result is None:
            return self.session()
        if not result.layers_suffice:
            return self.session()
        if self._layer_session is None:
            self._layer_session = self._build_session(result.layer_measure())
        return self._layer_session

    def display(self, show_events: bool = False) -> str:
        """The torchprof-style tree table (with one row per op under each layer if show_events)."""
        from hybridprof.reporting.text_table import render_text

        if not self._profiled():
            why = "enabled=False" if not self.enabled else "not entered yet"
            return f"<hybridprof.Profile of {self.plan.root_class}: nothing profiled ({why})>"
        # torchprof's table: layer rows only (the session and its frame also carry the time in no
        # profiled module; the table from the layer ranges alone could not show it).
        session = self._table_session(show_events)
        return render_text(session, show_events=show_events, outside_row=False)

    def __str__(self) -> str:
        return self.display()

    def _repr_html_(self) -> str | None:
        """In a notebook, the profile shows as the report's interactive tree table (ops
        included: this works them out); before anything was profiled, as its text."""
        if not self._profiled():
            return None
        from hybridprof.reporting.notebook import session_html

        return session_html(self.session())

    def __repr__(self) -> str:
        return str(self)

    # -- torchprof's attributes

    @property
    def traces(self) -> tuple[Trace, ...]:
        """Every module path from the root, as torchprof's `walk_modules` gives them (a shared
        module under each of its paths); empty until the Profile is entered."""
        if not self.entered:
            return ()
        if self._traces is None:
            self._traces = tuple(module_traces(self._model))
        return self._traces

    @property
    def trace_profile_events(self) -> defaultdict[tuple[str, ...], list[Any]]:
        """Per profiled path (a torchprof tuple), one torch EventList per call; built on first
        use, and empty until the with-block has ended."""
        if self._trace_events is None:
            if not self.exited:
                return defaultdict(list)
            events: defaultdict[tuple[str, ...], list[Any]] = defaultdict(list)
            for path, calls in self._raw_events().items():
                events[_tuple_path(self.plan.root_class, path)] = list(calls)
            self._trace_events = events
        return self._trace_events

    def raw(self) -> tuple[tuple[Trace, ...], defaultdict[tuple[str, ...], list[Any]]]:
        """torchprof's `(traces, trace_profile_events)`: every module path as a Trace, and a
        `defaultdict(list)` holding, for each profiled path (in the order their first calls
        ended), one torch EventList of FunctionEvents per call. The timer strategy records each
        call as one event named by its path. The lists are built here, on the first call."""
        return self.traces, self.trace_profile_events

    def _raw_events(self) -> dict[str, list[Any]]:
        if self._result is None:
            return {}
        if self._raw is None:
            self._raw = self._result.raw_events()
        return self._raw

    def to_dataframe(self) -> Any:
        """One row per profiled path (pandas), as the reports show it."""
        from hybridprof.reporting.dataframe import session_frame

        return session_frame(self.session())


def module_traces(module: nn.Module, name: str = "", path: tuple[str, ...] = ()) -> Iterator[Trace]:
    """torchprof's `walk_modules` (each parent's distinct children, depth first; a module shared
    by two parents appears under both), except that a TorchScript module is a leaf: its
    children never run a Python forward, and it is profiled whole."""
    path = (*path, name or type(module).__name__)
    children = [] if is_scripted(module) else list(module.named_children())
    yield Trace(path, not children, module)
    for child_name, child in children:
        yield from module_traces(child, child_name, path)


def _tuple_path(root: str, path: str) -> tuple[str, ...]:
    return (root,) if path == "" else (root, *path.split("."))


__all__ = ["Profile", "Trace", "module_traces"]
