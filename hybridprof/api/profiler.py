"""`hybridprof.Profile`: torchprof's context manager, on PyTorch 2.x, and around a training loop.

    with hybridprof.Profile(model, use_cuda=False, profile_memory=True) as prof:
        model(x)
    print(prof)                      # the torchprof-style tree table
    traces, events = prof.raw()      # torchprof's raw shapes

The whole with-block is one measured iteration. Code written for torchprof runs unchanged; the
keyword-only extras choose the strategy and select by glob or depth. One Profile records one
with-block: entering it again raises RuntimeError, as torchprof did.

Whatever the block runs is attributed: forward ops to the innermost layer, and, when the block
trains, backward ops to the layer whose forward made them, the optimizer's step, zero_grad,
clipping and GradScaler calls to an `(optimizer)` row, the loss and other code to `(outside
modules)`; the events decide, so a forward-only block keeps torchprof's table and its cost (an
FSDP2 model's forward is walked as a training step is: its units' hooks' time moves to their rows).
`prof.step()` ends one step of a loop (as torch.profiler's does), so a block over N steps is N
iterations; `schedule=hybridprof.schedule(wait=, warmup=, active=)` measures only the active steps
and leaves the others untouched (`runtime/runs/user_steps.py`).

Results are worked out when first read, and only as far as the reader needs (the `session`
strategy; the others measure as they go). Leaving a block without steps only stops the profiler.
The table of `str(prof)` / `display()` without memory or CUDA columns needs each layer's calls and
self/total CPU time, which the layer ranges alone give; the ops are attributed the first time
something shows them: `display(show_events=True)`, `session()`, `to_dataframe()` or `raw()`.
On the 400-leaf MLP that halves what `with Profile(...)` plus the first `str(prof)` costs on top
of the forwards (benchmarks/bench_overhead.py), and the numbers are the same either way. A
block's steps are worked out as each window of them ends.

The block's run itself (its driver, steps, compiled parts and session) is `BlockRun`
(`runtime/runs/with_block.py`); this class is the torchprof-shaped face over it.
"""

from __future__ import annotations

import warnings
from collections import defaultdict, namedtuple
from collections.abc import Iterator, Sequence
from dataclasses import replace
from types import TracebackType
from typing import Any

from torch import nn

from hybridprof.analysis.op_list import MAX_EVENTS, check_max_events
from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.errors import BadValueError
from hybridprof.planner.module_tree import Selector, is_scripted, tree_plan
from hybridprof.runtime.measures.aggregate import never_ran_warning
from hybridprof.runtime.runs.block_notes import converged
from hybridprof.runtime.runs.user_steps import STEPS_PER_SESSION, UserSteps
from hybridprof.runtime.runs.with_block import BlockOptions, BlockRun
from hybridprof.runtime.strategies import DEFAULT_STRATEGY
from hybridprof.runtime.training.schedule import Schedule

# torchprof's trace record: path is a tuple from the root class name, e.g. ("AlexNet", "features",
# "0").
Trace = namedtuple("Trace", ["path", "leaf", "module"])


class Profile:
    """Profile the selected layers of `model` during one with-block.

    Without `paths`/`globs`/`depth` the leaves are profiled, as torchprof did (with the parents
    that do a child's work and every FSDP2 unit, `select_targets`); `leaves_only=False`
    selects every module that runs a forward, so parents get rows and the rows add up to the block.
    `schedule` (`hybridprof.schedule(...)`) picks the steps measured when the block calls
    `step()`; a profiler session covers at most `steps_per_session` measured steps.
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
        schedule: Schedule | None = None,
        steps_per_session: int = STEPS_PER_SESSION,
        optimizers: Sequence[Any] = (),
    ) -> None:
        _check_steps(schedule, steps_per_session)
        self._model = model
        self._optimizers = tuple(optimizers)  # their state is told apart with profile_memory
        self.enabled = enabled
        self.use_cuda = use_cuda
        self.profile_memory = profile_memory
        self.paths = paths  # as given, as torchprof kept them
        self.strategy_name = strategy
        self.schedule = schedule
        self.steps_per_session = steps_per_session
        # Planned now, so an unknown path fails where the Profile is made, with close matches.
        self.plan: ProfilePlan = tree_plan(
            model, paths, globs, depth, strategy=strategy, leaves_only=leaves_only
        )
        self.entered = False
        self.exited = False
        self._traces: tuple[Trace, ...] | None = None
        self._trace_events: defaultdict[tuple[str, ...], list[Any]] | None = None
        self._block: BlockRun | None = None  # the with-block's run, once entered
        self._raw: dict[str, list[Any]] | None = None
        self._session: ProfileSession | None = None
        self._layer_session: ProfileSession | None = None
        self._warned_never_ran = False

    @property
    def failed_path(self) -> str | None:
        """The innermost profiled path an exception passed through in the with-block, if any."""
        return self._block.driver.patcher.failed_path if self._block is not None else None

    def __enter__(self) -> Profile:
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError(
                "this hybridprof.Profile was already entered; a Profile records one with-block, "
                "so create a new Profile for the next one"
            )
        self.entered = True
        options = BlockOptions(
            self.strategy_name,
            self.use_cuda,
            self.profile_memory,
            self.schedule,
            self.steps_per_session,
            self._optimizers,
        )
        self._block = BlockRun(self._model, self.plan, options)
        self._block.begin()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._block is None:
            return
        try:
            said = self._block.end(failed=exc_type is not None)
        finally:
            self.exited = True
        for line in said:
            warnings.warn(line, RuntimeWarning, stacklevel=2)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the model, as torchprof's Profile did: `prof(x)` is `model(x)`."""
        return self._model(*args, **kwargs)

    # -- steps

    def step(self) -> None:
        """End one step of the loop and begin the next (torch.profiler's `step()`). Outside the
        schedule's windows it only counts (~1 us)."""
        loop = self._running("step")
        if loop is not None:
            loop.end_step()
            loop.begin_step()

    def begin_step(self) -> None:
        """Begin a step (for callbacks that bracket steps; a no-op while one is open). What runs
        between `end_step()` and the next `begin_step()` belongs to no step."""
        loop = self._running("begin_step")
        if loop is not None:
            loop.begin_step()

    def end_step(self) -> None:
        """End the open step (the steps are counted here)."""
        loop = self._running("end_step")
        if loop is not None:
            loop.end_step()

    @property
    def steps(self) -> int:
        """The steps ended so far (`step()` / `end_step()` calls)."""
        return self._block.steps.steps if self._block is not None else 0

    @property
    def iterations(self) -> int:
        """The steps measured so far (a block without steps: 1 once it ended)."""
        block = self._block
        if block is None:
            return 0
        return len(block.steps.measures) + (block.result is not None)

    @property
    def converged(self) -> bool:
        """`--iters auto`'s test on the measured steps' times: at least 5, and the median's 95%
        confidence interval within ±3% of it."""
        block = self._block
        return block is not None and converged(block.steps.step_walls_us)

    def _running(self, what: str) -> UserSteps | None:
        block = self._block
        if block is not None and not self.exited:
            return block.steps
        if not self.enabled:
            return None
        raise RuntimeError(
            f"prof.{what}() counts the steps of a with-block: call it inside "
            "`with hybridprof.Profile(...) as prof:`"
        )

    def _profiled(self) -> bool:
        return self._block is not None and self._block.measured()

    # -- results

    def session(self) -> ProfileSession:
        """The measured with-block as a ProfileSession (built once, then cached)."""
        if self._session is None:
            block = self._block
            if block is None or not self.exited:
                raise RuntimeError(
                    "nothing was profiled yet: use the Profile in a with-block (enabled=True) first"
                )
            self._session = self._build_session(block, block.measures())
        return self._session

    def _build_session(self, block: BlockRun, measures: Any) -> ProfileSession:
        return self._said_never_ran(block.session(measures))

    def _said_never_ran(self, session: ProfileSession) -> ProfileSession:
        """The session with the warning for selected layers that never ran (a fused fast path
        calls no leaf), which is also said once as a RuntimeWarning: the CLI prints it, and an
        empty table alone does not say why."""
        said = never_ran_warning(session, library=True)
        if said is None:
            return session
        if not self._warned_never_ran:
            self._warned_never_ran = True
            warnings.warn(said, RuntimeWarning, stacklevel=4)
        return replace(session, warnings=(*session.warnings, said))

    def _table_session(self, show_events: bool) -> ProfileSession:
        """What `display` renders: torchprof's table, as measured (raw), whether worked out from
        the layer ranges alone (no ops read: nothing to count events in) or from the full
        session; so `str(prof)` gives the same table before and after `session()`, and a layer's
        ops, listed under it, add up to its figure. The session, reports and frames are the
        compensated views (docs/trust.md). Only ever rendered, never handed out."""
        block = self._block
        result = block.result if block is not None else None
        if self._session is not None or show_events or block is None or result is None:
            return replace(self.session(), calibration=None)
        if not result.layers_suffice:
            return replace(self.session(), calibration=None)
        if self._layer_session is None:
            layers = self._build_session(block, [result.layer_measure()])
            self._layer_session = replace(layers, calibration=None)
        return self._layer_session

    def display(self, show_events: bool = False, max_events: int | None = MAX_EVENTS) -> str:
        """The torchprof-style tree table (with each layer's ops under it if show_events): a str
        that also shows as the table where a value's repr is shown (a notebook cell).

        A layer lists its `max_events` heaviest ops (8 by default) and one `... K more ops
        (time)` row per pass for the rest; `max_events=None` lists every op, as torchprof did.

        A block that trained adds the backward columns, the `(optimizer)` rows and the
        `(outside modules)` row, so the rows add up to the steps; a forward-only block prints
        torchprof's table, layer rows only."""
        from hybridprof.reporting.text.text_table import TableText, render_text

        check_max_events(max_events)
        if not self._profiled():
            why = "enabled=False" if not self.enabled else "not entered yet"
            if self.exited:
                why = f"no measured step in {self.steps} steps"
            return TableText(
                f"<hybridprof.Profile of {self.plan.root_class}: nothing profiled ({why})>"
            )
        session = self._table_session(show_events)
        trained = session.backward or session.optimizer is not None
        return render_text(
            session, show_events=show_events, outside_row=trained, max_events=max_events
        )

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
        """The block's calls, as `BlockRun.raw_events` gives them; kept once there are some."""
        if self._raw is None:
            found = self._block.raw_events() if self._block is not None else {}
            if not found:
                return {}
            self._raw = found
        return self._raw

    def to_dataframe(self) -> Any:
        """One row per profiled path (pandas), as the reports show it."""
        from hybridprof.reporting.dataframe import session_frame

        return session_frame(self.session())


def _check_steps(schedule: object, steps_per_session: object) -> None:
    """BadValueError for a schedule or a session size `Profile` cannot take."""
    if schedule is not None and not isinstance(schedule, Schedule):
        raise BadValueError(
            f"schedule= takes hybridprof.schedule(wait=..., warmup=..., active=...), "
            f"got {type(schedule).__name__}"
        )
    per_session = steps_per_session
    if isinstance(per_session, bool) or not isinstance(per_session, int) or per_session < 1:
        raise BadValueError(
            f"steps_per_session must be a whole number, 1 or more; got {per_session!r}"
        )


def module_traces(
    module: nn.Module,
    name: str = "",
    path: tuple[str, ...] = (),
    above: frozenset[int] = frozenset(),
) -> Iterator[Trace]:
    """torchprof's `walk_modules` (each parent's distinct children, depth first; a module shared
    by two parents appears under both), except that a TorchScript module is a leaf: its
    children never run a Python forward, and it is profiled whole. A module that is its own
    ancestor (a cycle: `self.child.root = self`) appears there without its children again."""
    path = (*path, name or type(module).__name__)
    walked = is_scripted(module) or id(module) in above
    children = [] if walked else list(module.named_children())
    yield Trace(path, not children, module)
    for child_name, child in children:
        yield from module_traces(child, child_name, path, above | {id(module)})


def _tuple_path(root: str, path: str) -> tuple[str, ...]:
    return (root,) if path == "" else (root, *path.split("."))


__all__ = ["Profile", "Trace", "module_traces"]
