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
of the forwards (scripts/bench_overhead.py), and the numbers are the same either way.
"""

from __future__ import annotations

import time
from collections import namedtuple
from collections.abc import Sequence
from datetime import datetime, timezone
from types import TracebackType
from typing import Any

from torch import nn

from hybridprof.datamodel import ProfilePlan, ProfileSession
from hybridprof.errors import DeviceError
from hybridprof.planner.compat import probe
from hybridprof.planner.module_tree import Selector, tree_plan, walk
from hybridprof.reporting.format import format_time_us
from hybridprof.runtime.aggregate import build_session, environment
from hybridprof.runtime.measure import IterationMeasure
from hybridprof.runtime.patching import ForwardPatcher, live_patches
from hybridprof.runtime.quiet import quiet_fd2
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, make_strategy
from hybridprof.runtime.strategies.base import Strategy, StrategyConfig
from hybridprof.runtime.strategies.session import SessionStrategy, StoppedIteration, no_gc

# torchprof's trace record: path is a tuple from the root class name, e.g. ("AlexNet", "features", "0").
Trace = namedtuple("Trace", ["path", "leaf", "module"])


class Profile:
    """Profile the selected layers of `model` during one with-block (leaves when `paths` is None)."""

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
    ) -> None:
        self._model = model
        self.enabled = enabled
        self.use_cuda = use_cuda
        self.profile_memory = profile_memory
        self.strategy_name = strategy
        # Planned now, so an unknown path fails where the Profile is made, with close matches.
        self.plan: ProfilePlan = tree_plan(model, paths, globs, depth, strategy=strategy)
        self.entered = False
        self._patcher: ForwardPatcher | None = None
        self._strategy: Strategy | None = None
        self._measure: IterationMeasure | None = None
        self._stopped: StoppedIteration | None = None  # `session`: events not worked out yet
        self._raw: dict[str, list[Any]] | None = None
        self._session: ProfileSession | None = None
        self._layer_session: ProfileSession | None = None
        self._started_at = ""
        self._seconds = 0.0

    @property
    def failed_path(self) -> str | None:
        """The innermost profiled path an exception passed through in the with-block, if any."""
        return self._patcher.failed_path if self._patcher is not None else None

    def __enter__(self) -> Profile:
        if not self.enabled:
            return self
        if self.entered:
            raise RuntimeError(
                "this hybridprof.Profile was already entered; a Profile records one with-block, "
                "so create a new Profile for the next one"
            )
        self.entered = True
        if live_patches():
            # torch's profiler cannot nest sessions: the inner one would end the outer one's.
            raise RuntimeError(
                "another hybridprof profile is active in this process (patched: "
                f"{', '.join(live_patches()[:3])}); exit it before entering this one"
            )
        if self.use_cuda and not probe().cuda_available:
            raise DeviceError("use_cuda=True but CUDA is not available; use use_cuda=False")
        self._strategy = make_strategy(self.strategy_name, self._config())
        self._started_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
        self._seconds = time.perf_counter()
        with quiet_fd2():
            self._strategy.begin()
            self._strategy.begin_iteration()
        self._patcher = ForwardPatcher(self._model, self.plan.selected_paths(), self._strategy.call)
        try:
            self._patcher.patch()
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
        if self._patcher is None:
            return
        try:
            self._patcher.restore()
        finally:
            self._finish(failed=exc_type is not None)

    def _finish(self, failed: bool) -> None:
        """Stop the strategy; after a failed block keep what was measured but never mask the error."""
        strategy = self._strategy
        if strategy is None:
            return
        self._seconds = time.perf_counter() - self._seconds
        with quiet_fd2():
            try:
                if isinstance(strategy, SessionStrategy):
                    self._stopped = strategy.stop_iteration()  # worked out when first read
                else:
                    self._measure = strategy.end_iteration()
                    self._raw = strategy.raw_events()
            except Exception:
                if not failed:
                    raise
            finally:
                strategy.end()

    def _profiled(self) -> bool:
        return self._measure is not None or self._stopped is not None

    def _full_measure(self) -> IterationMeasure:
        """The measure with every op attributed (the full pass runs here on first use)."""
        if self._measure is None:
            if self._stopped is None:
                raise RuntimeError(
                    "nothing was profiled yet: use the Profile in a with-block (enabled=True) first"
                )
            self._measure = self._stopped.attribution().measure
        return self._measure

    def _config(self) -> StrategyConfig:
        return StrategyConfig(
            paths=self.plan.selected_paths(),
            compat=probe(),
            profile_memory=self.profile_memory,
            use_device=self.use_cuda,
            keep_raw_events=True,
        )

    # -- results

    def session(self) -> ProfileSession:
        """The measured with-block as a ProfileSession (built once, then cached)."""
        if self._session is None:
            self._session = self._build_session(self._full_measure())
        return self._session

    def _build_session(self, measure: IterationMeasure) -> ProfileSession:
        return build_session(
            self.plan,
            [measure],
            self.strategy_name,
            environment=environment("cuda" if self.use_cuda else None),
            profile_memory=self.profile_memory,
            use_device=self.use_cuda,
            started_at=self._started_at,
            duration_s=round(self._seconds, 3),
        )

    def _table_session(self, show_events: bool) -> ProfileSession:
        """What `display` renders: the full session once built or needed, else one built from the
        layer ranges alone (no ops: only ever rendered, never handed out)."""
        stopped = self._stopped
        if self._session is not None or show_events or stopped is None:
            return self.session()
        if not stopped.layers_suffice:
            return self.session()
        if self._layer_session is None:
            self._layer_session = self._build_session(stopped.layer_measure())
        return self._layer_session

    def display(self, show_events: bool = False) -> str:
        """The torchprof-style tree table (with one row per op under each layer if show_events)."""
        from hybridprof.reporting.text import render_text

        if not self._profiled():
            why = "enabled=False" if not self.enabled else "not entered yet"
            return f"<hybridprof.Profile of {self.plan.root_class}: nothing profiled ({why})>"
        return render_text(self._table_session(show_events), show_events=show_events)

    def __str__(self) -> str:
        return self.display()

    def __repr__(self) -> str:
        return str(self)

    def raw(self) -> tuple[list[Trace], dict[tuple[str, ...], list[Any]]]:
        """torchprof's `(traces, events)`: every module as a Trace, and for every module's path
        one event list per call (an empty list for a module not profiled, as torchprof had; the
        timer strategy records each call as a single event)."""
        root = self.plan.root_class
        leaf = {t.path: t.is_leaf for t in self.plan.targets}
        traces = [
            Trace(_tuple_path(root, node.path), leaf.get(node.path, True), node.module)
            for node in walk(self._model)
        ]
        events: dict[tuple[str, ...], list[Any]] = {trace.path: [] for trace in traces}
        for path, calls in self._raw_events().items():
            events[_tuple_path(root, path)] = [_printable(call) for call in calls]
        return traces, events

    def _raw_events(self) -> dict[str, list[Any]]:
        if self._raw is None:
            stopped = self._stopped
            if stopped is None:
                return {}
            with no_gc():
                self._raw = dict(stopped.attribution().raw_events())
        return self._raw

    def to_dataframe(self) -> Any:
        """One row per profiled path (pandas), as the reports show it."""
        from hybridprof.frames import session_frame

        return session_frame(self.session())


class CallEvents(list[Any]):
    """One call's op events; printing it gives a table, as torchprof's EventList did."""

    def table(self) -> str:
        rows = [("Name", "Self CPU", "CPU total")]
        rows += [
            (e.name, format_time_us(e.self_us), format_time_us(e.end_us - e.start_us)) for e in self
        ]
        widths = [max(len(row[i]) for row in rows) for i in range(3)]
        lines = [
            "  ".join(cell.rjust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
        ]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _printable(call: Any) -> Any:
    """torch's EventList (per-call strategy) prints itself; a plain list of RawEvents gets a table."""
    return CallEvents(call) if type(call) is list else call


def _tuple_path(root: str, path: str) -> tuple[str, ...]:
    return (root,) if path == "" else (root, *path.split("."))


__all__ = ["Profile", "Trace"]
