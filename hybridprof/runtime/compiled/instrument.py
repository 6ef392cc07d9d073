"""hybridprof's own compile: inductor's codegen hooked, so every kernel is known by its layer.

Inductor calls `set_kernel_post_grad_provenance_tracing(node_schedule, kernel_name, is_extern)`
once per call site of the code it generates, in the order the generated wrapper calls them,
whatever `trace.provenance_tracking_level` is (at level 0 the function returns at once): for a
fused C++ or Triton kernel `node_schedule` is its scheduler nodes, for an extern call (`mm`,
`addmm`, convolution, attention) the `ExternKernel`. `codegen.cpp` and `codegen.triton` import it
by name, so it is replaced in those two namespaces as well as in `debug` (where `ir.py` and
`scheduler.py` import it from when they call it). The hook records, per call site, the graph,
the event name the profiler will show, the module of each FX node the site writes
(`nn_module_stack`, or `fwd_nn_module_stack` on a backward graph's nodes), and of each node it
computes (its buffers' origins: what it fused); it never raises into a compile.

The map exists only if codegen runs while the hook is in: hybridprof must own the compile (its
warm-up). A cache hit skips codegen: cached_maps.py keeps each compiled graph's sites beside
inductor's cache, keyed by its FX-graph cache key, so a hit reads its map back (or, without one,
is compiled again). `cpp.enable_kernel_profile` makes each C++ kernel an event of its own
(`graph_<id>_<kernel>`); without it their time is the graph call's own. `instrumented()` sets it
for the run and puts it back.

The hook point is private: `probe()` checks it once, and without it compiled code is measured as
one opaque layer per compiled module, with a note.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

HOOK_NAME = "set_kernel_post_grad_provenance_tracing"
HOOK_NAMESPACES = (
    "torch._inductor.debug",
    "torch._inductor.codegen.cpp",
    "torch._inductor.codegen.triton",
)
HOOK_PARAMETERS = ("node_schedule", "kernel_name", "is_extern")
# (module, config key, value for hybridprof's compile)
CONFIG = (("torch._inductor.config", "cpp.enable_kernel_profile", True),)
# Both caches off for the run: where a cache hit cannot be mapped (cached_maps.py).
CACHES_OFF = (
    ("torch._inductor.config", "fx_graph_cache", False),
    ("torch._functorch.config", "enable_autograd_cache", False),
)
Stack = tuple[str, str] | None  # a node's innermost (nn_module_stack key, qualified name)
# The stack of a node of no module whose code is torch's optimizers' (a compiled step's
# `optimizer.step()`): its stack trace runs through `torch/optim/`.
OPTIMIZER_STACK: Stack = ("(optimizer)", "torch.optim")


@dataclass(frozen=True, slots=True)
class CallSite:
    """One call of generated code: a fused kernel or an extern call, in wrapper order."""

    graph_id: int | None  # inductor's graph number (kernel events are `graph_<id>_<kernel>`)
    compile_id: str  # dynamo's "frame/compile" (the region event is "Torch-Compiled Region: f/c")
    backward: bool
    kernel: str  # cpp_fused_..., triton_..., extern_kernels.addmm, ...
    extern: bool
    event: str  # the profiler event name this call produces
    written: tuple[Stack, ...]  # per FX node the site writes: its module
    # per FX node the site computes (inductor's origins: also producers inlined into it, such as
    # embedding lookups, which write nothing): its module. They name what a kernel fused, never
    # where its time goes.
    origins: tuple[Stack, ...] = ()
    cache_key: str | None = None  # its graph's FX-graph cache key (None: not cached)
    # read back from hybridprof's map of a cache hit: its graph id is the compiling process's
    cached: bool = False


@dataclass(frozen=True, slots=True)
class HookProbe:
    usable: bool
    reason: str


@functools.cache
def probe() -> HookProbe:
    """Whether this torch has the codegen hook point and settings hybridprof relies on (once)."""
    try:
        for name in HOOK_NAMESPACES:
            function = getattr(importlib.import_module(name), HOOK_NAME, None)
            if function is None:
                return HookProbe(False, f"{name}.{HOOK_NAME} is missing")
            parameters = tuple(inspect.signature(function).parameters)
            if parameters[: len(HOOK_PARAMETERS)] != HOOK_PARAMETERS:
                return HookProbe(False, f"{name}.{HOOK_NAME} takes {parameters}")
        for module_name, key, _ in CONFIG + CACHES_OFF:
            config = importlib.import_module(module_name)
            with config.patch({key: getattr_dotted(config, key)}):
                pass
        utils = importlib.import_module("torch._dynamo.utils")
        for name in ("counters", "graph_break_reasons", "get_compilation_metrics"):
            if not hasattr(utils, name):
                return HookProbe(False, f"torch._dynamo.utils.{name} is missing")
    except Exception as exc:  # an import or a setting that moved: fall back, say why
        return HookProbe(False, f"{type(exc).__name__}: {exc}")
    return HookProbe(True, f"inductor's {HOOK_NAME} hooked (one call per kernel call site)")


def getattr_dotted(obj: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        obj = getattr(obj, part)
    return obj


# Every call site hybridprof's hook saw in this process. Dynamo keeps compiled code for the
# process's life and never compiles it again, so a second profile of the same compiled model (or
# of another instance of its classes) finds its kernels here. Graph ids are unique per process.
_RECORDED: list[CallSite] = []


_READ: set[tuple[str, str]] = set()  # (cache key, compile) whose map was read back
_CHANGES = [0]  # how often _RECORDED changed: a map built before is rebuilt
_CACHED_COMPILES: set[str] = set()  # compiles that read a graph's map back from the cache


class SiteRecorder:
    """The call sites inductor generated while `instrumented()` was in, in order; and those of
    cached graphs, read back (cached_maps.py). `paths`: `str(id(module))` -> the module's path in
    the profiled model, to store a site's modules in a form another process can read."""

    def __init__(self, paths: dict[str, str] | None = None) -> None:
        self.errors = 0  # call sites the hook could not read (their kernels stay unmatched)
        self.paths = paths or {}

    @property
    def sites(self) -> list[CallSite]:
        """The sites recorded in this process so far (this run's and earlier runs')."""
        return _RECORDED

    @property
    def changes(self) -> int:
        return _CHANGES[0]

    def record(self, node_schedule: Any, kernel_name: str, is_extern: bool) -> None:
        try:
            _RECORDED.append(_site(node_schedule, kernel_name, is_extern))
            _CHANGES[0] += 1
        except Exception:  # never break the user's compile
            self.errors += 1

    @property
    def compiles(self) -> set[str]:
        """Dynamo's compiles ("frame/compile") whose graphs have a map: generated under the
        hook, or answered by inductor's cache with their map read back."""
        return {site.compile_id for site in _RECORDED} | _CACHED_COMPILES

    def add_cached(self, key: str, sites: list[CallSite]) -> None:
        """The sites of a graph inductor's cache answered, for the compile under way: read back
        for each compile, with the modules of the model being compiled (a model compiled earlier
        in this process from the same code has other modules, maybe gone, their ids reused)."""
        compile_id = _current_compile_id()
        _CACHED_COMPILES.add(compile_id)
        if (key, compile_id) not in _READ:
            _READ.add((key, compile_id))
            _RECORDED.extend(replace(site, compile_id=compile_id) for site in sites)
            _CHANGES[0] += 1

    def key_graph(self, graph_id: Any, backward: bool, key: str) -> list[CallSite]:
        """The sites just generated for one graph (its id and direction), given its cache key."""
        keyed: list[CallSite] = []
        for index, site in enumerate(_RECORDED):
            if site.graph_id == graph_id and site.backward == backward and not site.cached:
                _RECORDED[index] = site = replace(site, cache_key=key)
                keyed.append(site)
        _CHANGES[0] += 1
        return keyed


@contextlib.contextmanager
def instrumented(recorder: SiteRecorder) -> Iterator[None]:
    """The codegen hook in and the three settings set while the block runs; all put back."""
    with contextlib.ExitStack() as stack:
        for module_name, key, value in CONFIG:
            config = importlib.import_module(module_name)
            stack.enter_context(config.patch({key: value}))
        stack.enter_context(_hooked(recorder))
        yield


@contextlib.contextmanager
def _hooked(recorder: SiteRecorder) -> Iterator[None]:
    saved: list[tuple[Any, Any]] = []
    try:
        for name in HOOK_NAMESPACES:
            module = importlib.import_module(name)
            original = getattr(module, HOOK_NAME)
            saved.append((module, original))
            setattr(module, HOOK_NAME, _hook(original, recorder))
        yield
    finally:
        for module, original in reversed(saved):
            setattr(module, HOOK_NAME, original)


def _hook(original: Any, recorder: SiteRecorder) -> Any:
    def hooked(node_schedule: Any, kernel_name: str, is_extern: bool = False) -> Any:
        recorder.record(node_schedule, kernel_name, is_extern)
        return original(node_schedule, kernel_name, is_extern)

    hooked.__wrapped__ = original  # type: ignore[attr-defined]
    return hooked


def _site(node_schedule: Any, kernel_name: str, is_extern: bool) -> CallSite:
    from torch._inductor.virtualized import V

    graph = V.graph
    graph_id = getattr(graph, "graph_id", None)
    written = _written(node_schedule, is_extern)
    return CallSite(
        graph_id=graph_id if isinstance(graph_id, int) else None,
        compile_id=_current_compile_id(),
        backward=bool(getattr(graph, "is_backward", False)),
        kernel=kernel_name,
        extern=is_extern,
        event=expected_event(node_schedule, kernel_name, is_extern, graph_id),
        written=tuple(dict.fromkeys(_stack(node) for node in written)),
        origins=tuple(dict.fromkeys(_stack(node) for node in _origins(node_schedule, is_extern))),
    )


def _current_compile_id() -> str:
    """Dynamo's compile under way, as "frame/compile" (the region event's name ends with it)."""
    from torch._guards import CompileContext

    compile_id = CompileContext.current_compile_id()
    return f"{compile_id.frame_id}/{compile_id.frame_compile_id}" if compile_id else "?"


def _origins(node_schedule: Any, is_extern: bool) -> list[Any]:
    """Every FX node a generated kernel computes: its buffers' origins (pointwise producers are
    inlined and recomputed in it). None for an extern call: it runs its one op, and its
    buffer's origins also list the producers of its inputs' views, which it does not compute."""
    if is_extern:
        return []
    found: dict[Any, None] = {}
    for scheduled in node_schedule:
        for sub in scheduled.get_nodes() if hasattr(scheduled, "get_nodes") else ():
            for origin in getattr(getattr(sub, "node", None), "origins", ()) or ():
                # a view is no work (a view of another layer's output is that layer's)
                if origin.op == "call_function" and not getattr(origin.target, "is_view", False):
                    found.setdefault(origin)
    return list(found)


def _written(node_schedule: Any, is_extern: bool) -> list[Any]:
    """The FX nodes whose values the site produces.

    Per output buffer its exact origin node; where inductor has none (a buffer fused from several
    nodes), for an extern the origin that is the extern's op, else the topologically last origin
    (what the buffer finally computes). Not every origin: fused kernels recompute cheap producers
    (a layer norm kernel recomputes the embedding add), and those are not the kernel's work."""
    written: list[Any] = []
    if is_extern:
        origin = getattr(node_schedule, "origin_node", None)
        if origin is not None:
            return [origin]
        op = getattr(node_schedule, "op_overload", None)
        origins = list(getattr(node_schedule, "origins", ()))
        same = [n for n in origins if op is not None and n.target is op]
        last = _last(origins)
        return same or ([last] if last is not None else [])
    for scheduled in node_schedule:
        for sub in scheduled.get_nodes() if hasattr(scheduled, "get_nodes") else ():
            node = getattr(sub, "node", None)
            if node is None:
                continue
            origin = node.get_origin_node() if hasattr(node, "get_origin_node") else None
            if origin is None:
                origin = _last(getattr(node, "origins", ()))
            if origin is not None and origin not in written:
                written.append(origin)
    return written


def _last(nodes: Any) -> Any:
    """The topologically last of some FX nodes of one graph."""
    calls = [n for n in nodes if getattr(n, "op", None) == "call_function"]
    if not calls:
        return None
    order = {n: i for i, n in enumerate(calls[0].graph.nodes)}
    return max(calls, key=lambda n: order.get(n, -1))


def _stack(node: Any) -> Stack:
    """A node's innermost module: (dynamo's key, the qualified name), or None (frame code)."""
    stack = node.meta.get("nn_module_stack") or node.meta.get("fwd_nn_module_stack")
    if not stack:
        trace = str(node.meta.get("stack_trace") or "").replace("\\", "/")
        return OPTIMIZER_STACK if "/torch/optim/" in trace else None
    key, value = list(stack.items())[-1]
    qualified = value[0] if isinstance(value, tuple) else str(value)
    return str(key), str(qualified)


def expected_event(node_schedule: Any, kernel_name: str, is_extern: bool, graph_id: Any) -> str:
    """The profiler event a call site makes: a generated kernel is `graph_<id>_<kernel>` (C++
    with `cpp.enable_kernel_profile`), an extern call is the aten op it runs (`aten::mm`)."""
    if not is_extern:
        return f"graph_{graph_id}_{kernel_name}" if graph_id is not None else kernel_name
    schema = getattr(getattr(node_schedule, "op_overload", None), "_schema", None)
    if schema is not None:
        return str(schema.name)
    name = kernel_name
    for prefix in ("extern_kernels.", "torch.ops.", "aten."):
        name = name.removeprefix(prefix)
    return f"aten::{name.split('.')[0]}"


__all__ = [
    "CACHES_OFF",
    "OPTIMIZER_STACK",
    "CallSite",
    "HookProbe",
    "SiteRecorder",
    "expected_event",
    "instrumented",
    "probe",
]
