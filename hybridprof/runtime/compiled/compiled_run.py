"""A profiled run of a model with compiled code: what a run asks of the compiled parts.

`CompiledRun` holds the run's kernel map and facts. A run (its lane: `runtime/runs/lanes.py`)
- keeps it out of compiled code: `layout.inside` is never patched, a `module.compile()`d module is
  ranged through its `_compiled_call_impl` (basics/patching.py);
- runs warm-up and the measured iterations inside `instrumented()` (hybridprof's compile, hooked),
  and warm-up until an iteration compiles nothing (`compiled_last`, at most `EXTRA_WARMUP` more);
- brackets every measured iteration (`begin_iteration` / `recompiled`): an iteration in which
  dynamo compiled is left out of the medians and said in a warning with the guard that failed;
- lets the session strategy attribute each iteration through `attribute` (kernel_events.py);
- adds `section()` (the session's compile section), the graph-break findings and its notes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace

from torch import nn

from hybridprof.analysis.stats import median_int
from hybridprof.datamodel import (
    CompiledLayer,
    CompiledWhere,
    CompileSection,
    ExcludedIteration,
    Finding,
    FindingKind,
    GraphBreak,
    ProfilePlan,
    ProfileSession,
    SourceSpan,
)
from hybridprof.datamodel.compiled import KernelMapState
from hybridprof.errors import UsageError
from hybridprof.runtime.compiled import compiled_step, dynamo_facts
from hybridprof.runtime.compiled.cached_maps import CacheUse, cache_notes, mapped_caches
from hybridprof.runtime.compiled.compile_again import compiled_again, own_recompile
from hybridprof.runtime.compiled.compiled_step import CompiledStep, step_layout
from hybridprof.runtime.compiled.detect import CompiledLayout, find_compiled
from hybridprof.runtime.compiled.instrument import SiteRecorder, instrumented, probe
from hybridprof.runtime.compiled.islands import IslandRanges
from hybridprof.runtime.compiled.kernel_events import (
    OUTSIDE,
    OUTSIDE_RANGE,
    Rewriter,
    Rewritten,
    settle,
)
from hybridprof.runtime.compiled.kernel_map import STEP_CODE, KernelMap
from hybridprof.runtime.events.attribution import Attribution, attribute
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.training_names import OPTIMIZER_STEP_PREFIX

EXTRA_WARMUP = 8  # warm-up iterations added while each still compiles something
MAX_EXCLUDED = 20  # recompiling measured iterations tolerated before the run gives up


def compiled_run(
    model: nn.Module,
    strategy: str,
    *,
    compiled_by: str = "user",
    step: CompiledStep | None = None,
) -> CompiledRun | None:
    """The run's compiled parts (None: the model has none), or those of the compiled `step` that
    calls the model; a strategy that cannot see inside compiled code is refused in one line."""
    layout = step_layout(model, step) if step is not None else find_compiled(model)
    if layout is None:
        return None
    if strategy != "session":
        where = layout.parts[0].path or "the model"
        raise UsageError(
            f"{where} is torch.compile'd and strategy '{strategy}' cannot see inside compiled "
            "code (it times patched forwards, and compiled code runs none): use --strategy session "
            "(the default)"
        )
    return CompiledRun(model, layout, compiled_by, step)


class CompiledRun:
    def __init__(
        self,
        model: nn.Module,
        layout: CompiledLayout,
        compiled_by: str,
        step: CompiledStep | None = None,
    ) -> None:
        self.model = model
        self.layout = layout
        self.compiled_by = compiled_by
        self.step = step  # a compiled function calling the model: its frame is no module's
        self.hook = probe() if layout.inductor else None
        self.recorder = SiteRecorder(layout.paths)
        self.cache = CacheUse()
        self._kmap_changes = self.recorder.changes
        self.kmap = self._new_map()
        self.start = dynamo_facts.snapshot()
        self.warmup = dynamo_facts.Delta(0, 0, 0, 0.0, 0.0, (), ())
        self.compiled_last = False
        self.islands: IslandRanges | None = None
        self.excluded: list[ExcludedIteration] = []
        self.iterations = 0  # measured iterations begun
        self._before = self.start
        self._found: list[Rewritten] = []
        self._rewriter: Rewriter | None = None
        self.grad_enabled = False
        self.again: tuple[str, ...] = ()  # warm parts compiled again for the profile

    @property
    def mapping(self) -> bool:
        """Kernels are split by layer (inductor, with the hook point there)."""
        return self.hook is not None and self.hook.usable

    # -- the run

    @contextlib.contextmanager
    def instrumented(self) -> Iterator[None]:
        if not self.mapping:
            yield
            return
        with contextlib.ExitStack() as stack:
            stack.enter_context(instrumented(self.recorder))
            stack.enter_context(mapped_caches(self.recorder, self.cache))
            again = stack.enter_context(compiled_again(self.model))
            if self.step is not None:
                again += stack.enter_context(compiled_step.compiled_again(self.step))
            self.again = again
            yield

    def step_context(self) -> contextlib.AbstractContextManager[None]:
        """What each step runs in: the island ranges, once warm-up found eager code inside."""
        return self.islands.active() if self.islands is not None else contextlib.nullcontext()

    def snapshot(self) -> dynamo_facts.Snapshot:
        return dynamo_facts.snapshot()

    def warm_iteration_done(self, before: dynamo_facts.Snapshot) -> None:
        self.compiled_last = dynamo_facts.since(before).compiled

    def warmup_done(self, selected: Iterable[str]) -> None:
        """After warm-up: the map from the sites compiled so far, dynamo's facts, the islands."""
        self.warmup = dynamo_facts.since(self.start)
        self._rebuild_map()
        # Eager code inside: after a graph break, in a frame dynamo gave up on (its recompile
        # limit, a suppressed error), or everywhere when it compiled no graph at all (it skips
        # torch.nn containers' own forward: `nn.Sequential().compile()` compiles nothing).
        eager_inside = (
            self.warmup.graph_breaks
            or self.warmup.frames > self.warmup.graphs
            or self.warmup.graphs == 0
        )
        if eager_inside:
            parts = {part.path for part in self.layout.parts}
            chosen = set(selected)
            paths = {
                id(module): path
                for path, module in _named(self.model, self.layout)
                if id(module) in self.layout.inside and path in chosen and path not in parts
            }
            self.islands = IslandRanges(paths) if paths else None
        self._rewriter = None  # rebuilt with the new map on first use

    def keep_only(self, model: nn.Module) -> None:
        """Once the block has ended, hold the inner model instead of the caller's compiled
        wrapper of it (the same modules, the same paths): a wrapper the caller deletes is then
        neither kept alive by the profile nor found by the next block."""
        self.model = model

    def begin_iteration(self) -> None:
        self.iterations += 1
        self._before = dynamo_facts.snapshot()

    def recompiled(self) -> str | None:
        """Why the iteration just run compiled again (None: it did not); it is then excluded."""
        delta = dynamo_facts.since(self._before)
        if not delta.compiled:
            return None
        self._map_new_sites()  # a recompile is mapped for later iterations
        reason = "; ".join(delta.recompile_reasons) or "dynamo compiled a new frame"
        self.excluded.append(ExcludedIteration(self.iterations, reason))
        if self._found:
            self._found.pop()
        if len(self.excluded) > MAX_EXCLUDED:
            raise UsageError(
                f"the compiled model recompiled in {len(self.excluded)} measured iterations "
                f"({reason}): its inputs or state change between calls; give it inputs of one "
                "shape, or mark the dimension dynamic (torch._dynamo.mark_dynamic)"
            )
        return reason

    # -- attribution (called by the session strategy for each measured iteration)

    def attribute(
        self,
        events: list[Event],
        names: Mapping[str, str],
        *,
        backward: bool = False,
        keep_raw: bool = False,
    ) -> Attribution:
        self._map_new_sites()  # a with-block's steps: the first ones may have compiled
        rewriter = self._rewriter
        if rewriter is None or rewriter.names is not names:
            rewriter = self._rewriter = Rewriter(
                self.kmap,
                names,
                self._opaque_owner(),
                self._optimizer_range(),
                step=self.step is not None,
            )
        rewritten, found = rewriter.rewrite(events)
        all_names = {**names, OUTSIDE_RANGE: OUTSIDE}
        result = attribute(rewritten, all_names, backward=backward, keep_raw=keep_raw)
        settle(result.measure, found, names.values())
        self._found.append(found)
        return result

    def _map_new_sites(self) -> None:
        """The map rebuilt when inductor generated code since it was built."""
        if self.recorder.changes != self._kmap_changes:
            self._rebuild_map()
            self._rewriter = None

    def _rebuild_map(self) -> None:
        self._kmap_changes = self.recorder.changes
        self.kmap = self._new_map()

    def _new_map(self) -> KernelMap:
        """The map of every site recorded so far; a compiled step's own code (its loss) is
        outside every layer, a compiled model's frame code is the model's."""
        home = STEP_CODE if self.step is not None else ""
        return KernelMap(self.recorder.sites, self.layout.paths, home)

    def _optimizer_range(self) -> str:
        """The range a compiled step's optimizer kernels run in: torch's own name for a step of
        the optimizer class the step names."""
        optimizer = self.step.optimizer if self.step is not None else "compiled"
        return f"{OPTIMIZER_STEP_PREFIX}{optimizer}.step"

    def _opaque_owner(self) -> str | None:
        """Where a compiled region's whole time goes when no kernel can be split (another
        backend, no hook point); None: split them, graph by graph."""
        return None if self.mapping else self.layout.parts[0].path

    def _unmapped(self) -> bool:
        """Every compiled graph ran without a map (compiled before hybridprof saw it)."""
        return any(f.opaque for f in self._found) and not any(f.matched for f in self._found)

    # -- the session

    def finish(self, session: ProfileSession) -> ProfileSession:
        # A module inside compiled code with no kernel of its own was not skipped: its work ran
        # in other layers' kernels (fused), or compiled away. Said so, not "never called".
        fused_away = tuple(p for p in session.never_called if self.layout.part_at(p) is not None)
        section = self.section(session.plan)
        named = [p for p in fused_away if p]  # the root: the compiled model itself, not a layer
        if named:
            shown = ", ".join(named[:8]) + (" ..." if len(named) > 8 else "")
            section = replace(
                section,
                notes=(
                    *section.notes,
                    f"no kernel of their own (their work ran in other layers' kernels): {shown}",
                ),
            )
        findings = tuple(_break_finding(b) for b in section.graph_breaks)
        plan = replace(session.plan, findings=session.plan.findings + findings)
        return replace(
            session,
            plan=plan,
            never_called=tuple(p for p in session.never_called if p not in fused_away),
            compiled=section,
            warnings=session.warnings + self.warnings(section),
        )

    def section(self, plan: ProfilePlan) -> CompileSection:
        first = self.layout.parts[0]
        fused: dict[str, set[str]] = {}
        for found in self._found:
            for path, spanned in found.fused.items():
                fused.setdefault(path, set()).update(spanned)
        modules = sorted(_named(self.model, self.layout), key=lambda item: _order(plan, item[0]))
        breaks = tuple(_graph_break(b, modules) for b in _unique_breaks(self.warmup.graph_breaks))
        return CompileSection(
            backend=first.backend,
            mode=first.mode,
            where=tuple(
                CompiledWhere(p.path, p.kind, p.backend, p.mode) for p in self.layout.parts
            ),
            options=tuple(f"{k}={v}" for k, v in first.options),
            fullgraph=first.fullgraph,
            compiled_by="hybridprof" if self.compiled_by == "hybridprof" else "user",
            grad_mode="enabled" if self.grad_enabled else "disabled",
            compile_s=round(self.warmup.compile_s, 3),
            backward_compile_s=round(self.warmup.backward_compile_s, 3),
            frames=self.warmup.frames,
            graphs=self.warmup.graphs,
            graph_breaks=breaks,
            warmup_recompiles=tuple(
                r for r in self.warmup.recompile_reasons if not (self.again and own_recompile(r))
            ),
            excluded=tuple(self.excluded),
            kernel_map=self._state(),
            call_sites=sum({k: n for f in self._found for k, n in f.graphs.items()}.values()),
            matched_events=median_int([f.matched for f in self._found]),
            unmatched_events=median_int([f.unmatched for f in self._found]),
            eager_islands=len(self.islands.paths) if self.islands is not None else 0,
            cache_hits=len(self.cache.hit),
            cache_rebuilt=len(self.cache.rebuilt),
            layers=tuple(CompiledLayer(p, tuple(sorted(m))) for p, m in sorted(fused.items())),
            notes=self.notes(),
        )

    def ran_eager(self) -> bool:
        """No compiled graph ran in any measured iteration: what ran was eager code."""
        return bool(self._found) and not any(
            f.graphs or f.graph_calls or f.matched or f.opaque for f in self._found
        )

    def _state(self) -> KernelMapState:
        if self.ran_eager():
            return "eager"
        if self._opaque_owner() is not None or self._unmapped():
            return "opaque"
        opaque = any(f.opaque for f in self._found)
        unmatched = any(f.unmatched for f in self._found)
        return "partial" if opaque or unmatched or self.recorder.errors else "mapped"

    def notes(self) -> tuple[str, ...]:
        notes: list[str] = [self._again_note()] if self.again else []
        if self.step is not None and self.mapping:
            notes.append(self._step_note())
        notes.extend(cache_notes(self.cache))
        part = self.layout.parts[0]
        if not self.layout.inductor:
            backends = sorted({p.backend for p in self.layout.parts if p.backend != "inductor"})
            notes.append(
                f"compiled with backend '{', '.join(backends)}': hybridprof splits compiled code "
                "by layer only for backend 'inductor' (the default); its time is shown as one "
                "layer"
            )
        elif self.hook is not None and not self.hook.usable:
            notes.append(
                f"this torch lacks the inductor hook hybridprof reads ({self.hook.reason}): each "
                "compiled module's time is shown as one layer"
            )
        elif self._unmapped():
            notes.append(
                f"{part.path or 'the model'} was compiled before hybridprof saw it (it was called "
                "already), so its kernels cannot be split by layer and its time is shown as one "
                "layer: profile it before its first call, or let hybridprof compile it "
                "(--compile, profile(compile=True))"
            )
        elif any(f.opaque for f in self._found):
            notes.append("some compiled graphs ran without a kernel map: shown as one layer each")
        return tuple(notes)

    def _step_note(self) -> str:
        """What of a compiled step was mapped to what, and what was not (one line)."""
        optimizer = median_int([f.optimizer for f in self._found]) or 0
        step_code = median_int([f.step_code for f in self._found]) or 0
        unmatched = median_int([f.unmatched for f in self._found]) or 0
        name = self.step.name if self.step is not None else "the step"
        return (
            f"{name}() is a torch.compile'd function calling the model: its kernels of the "
            "model's forward and backward are the layers', and per iteration "
            f"{optimizer} of the optimizer's code are in (optimizer), {step_code} of the step's "
            "own code (the loss) in (outside modules); what it runs eagerly (dynamo breaks the "
            "graph at backward(): the gradients' accumulation, and zero_grad, which dynamo "
            "skips) is timed as eager code, in no layer"
            + (f"; {unmatched} kernel events matched no kernel of the map" if unmatched else "")
        )

    def _again_note(self) -> str:
        """What was compiled again for the profile, and what it cost (one line)."""
        where = ", ".join(path or "the model" for path in self.again)
        part = self.layout.parts[0]
        mode = f", mode {part.mode}" if part.mode else ""
        took = (
            f"its compile took {round(self.warmup.compile_s, 3):.2f} s"
            if self.warmup.compile_s
            else "0 s: its compile for an earlier profile in this process was cached"
        )
        return (
            f"{where} ran compiled before the profile, so hybridprof compiled it again under its "
            f"hooks ({part.backend}{mode}, the user's own backend): {took}; into a cache entry "
            "of its own: the user's compiled code stays cached and its next call compiles nothing"
        )

    def warnings(self, section: CompileSection) -> tuple[str, ...]:
        said = [
            f"iteration {e.iteration} recompiled ({e.reason}); it is left out of the medians"
            for e in section.excluded
        ]
        if section.kernel_map == "eager":
            said.append(self._eager_warning())
        compile_s = max((f.compile_ns for f in self._found), default=0) / 1e9
        if compile_s:
            said.append(
                f"{compile_s:.2f} s of compiling ran inside the profiled block: it is in "
                "(outside modules), in no layer; hybridprof.profile() compiles in its warm-up"
            )
        if section.unmatched_events:
            said.append(
                f"{section.unmatched_events} compiled kernel events per iteration matched no "
                "kernel of the map; their time is in (outside modules)"
            )
        return tuple(said)

    def _eager_warning(self) -> str:
        where = ", ".join(p.path or "the model" for p in self.layout.parts)
        return (
            f"{where} is torch.compile'd, but no compiled code ran in the measured iterations: "
            f"{_why_eager(self.warmup)}; the rows are its eager code's times, measured as eager"
        )


def _why_eager(warmup: dynamo_facts.Delta) -> str:
    """Why dynamo ran the compiled code's frames eagerly, as far as its bookkeeping says."""
    from torch._dynamo import config

    if warmup.frames == 0:
        return (
            "dynamo compiled no graph of it: it skips the forward of torch.nn containers such as "
            "nn.Sequential (compile the module that holds the work, or the function calling it)"
        )
    if warmup.frames > warmup.graphs and warmup.recompile_reasons:
        return (
            f"dynamo stopped compiling it after {len(warmup.recompile_reasons)} recompiles (its "
            f"recompile limit, {getattr(config, 'recompile_limit', '?')}; last guard that failed: "
            f"{_short(warmup.recompile_reasons[-1])}): make its inputs and attributes steady"
        )
    if getattr(config, "suppress_errors", False):
        return (
            "dynamo gave up on it with an error that torch._dynamo.config.suppress_errors hid "
            "(set it to False to see the error)"
        )
    return "dynamo compiled no graph that ran" if warmup.graphs else "dynamo compiled no graph"


def _short(reason: str, limit: int = 160) -> str:
    """A guard as one short phrase: dynamo pads it with spaces and appends a long HINT."""
    text = " ".join(reason.split()).split(" (HINT:")[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _named(model: nn.Module, layout: CompiledLayout) -> list[tuple[str, nn.Module]]:
    seen: dict[int, tuple[str, nn.Module]] = {}
    for module in model.modules():  # each once (the paths come from the layout)
        path = layout.paths.get(str(id(module)))
        if path is not None:
            seen.setdefault(id(module), (path, module))
    return list(seen.values())


def _order(plan: ProfilePlan, path: str) -> int:
    return next((i for i, t in enumerate(plan.targets) if t.path == path), len(plan.targets))


def _unique_breaks(breaks: Iterable[dynamo_facts.Break]) -> list[dynamo_facts.Break]:
    seen: dict[tuple[str, str, int], dynamo_facts.Break] = {}
    for found in breaks:
        seen.setdefault((found.reason, found.file, found.line), found)
    return list(seen.values())


def _graph_break(found: dynamo_facts.Break, modules: list[tuple[str, nn.Module]]) -> GraphBreak:
    """The break with the modules whose class has the function it is in (same file, same name)."""
    paths = tuple(
        path for path, module in modules if _defines(module, found.file, found.frame, found.line)
    )
    return GraphBreak(found.reason, found.file, found.line, found.code, found.frame, paths)


def _defines(module: nn.Module, file: str, function: str, line: int) -> bool:
    code = getattr(getattr(type(module), function, None), "__code__", None)
    if code is None or code.co_filename != file:
        return False
    lines = [number for _, _, number in code.co_lines() if number is not None]
    return bool(lines) and code.co_firstlineno <= line <= max(lines)


def _break_finding(found: GraphBreak) -> Finding:
    where = _pattern(found.modules) if found.modules else "compiled code"
    code = f" `{found.code}`" if found.code else ""
    return Finding(
        FindingKind.GRAPH_BREAK,
        found.modules[0] if found.modules else "",
        f"graph break in {where}: {found.reason}{code} at {found.where()} (dynamo runs the code "
        "around it eagerly and compiles the rest as separate graphs)",
        SourceSpan(found.file, found.line) if found.file else None,
    )


def _pattern(paths: tuple[str, ...]) -> str:
    """`blocks.*.attn` for `blocks.0.attn, blocks.1.attn`; the path itself for one."""
    if len(paths) == 1:
        return paths[0] or "(root)"
    split = [p.split(".") for p in paths]
    if len({len(s) for s in split}) == 1:
        return ".".join(
            level[0] if len(set(level)) == 1 else "*" for level in zip(*split, strict=True)
        )
    return ", ".join(paths[:3]) + (" ..." if len(paths) > 3 else "")


__all__ = ["EXTRA_WARMUP", "CompiledRun", "compiled_run"]
