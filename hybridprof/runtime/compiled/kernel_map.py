"""From inductor's call sites to module paths: which layer each kernel's time belongs to.

A site's modules come from the FX nodes it writes, twice: by module identity (the key of a
`nn_module_stack` entry is `str(id(module))`, which names the instance dynamo traced) and
relative to the compiled frame's `self` (`L['self'].attn` -> `attn`). Dynamo does not specialise
a frame on the module instance, so `Block.forward` compiled for `blocks.0` also runs for
`blocks.1`: when the region runs inside a layer's range, the relative names rooted there name the
right instance. A site writing nodes of one module is that module's; nodes of several modules (a
fused kernel) go to their lowest common ancestor; nodes outside every module (the frame's own
code) go to the frame's module. The modules it fused are those of every node it computes
(inductor's origins, producers it inlined included) below or beside that owner.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from hybridprof.runtime.compiled.instrument import OPTIMIZER_STACK, CallSite, Stack

SELF = "L['self']"
# Where kernels go that are no layer's work, in a compiled step (compiled_step.py): paths no
# module can have (module names hold no NUL). The optimizer's kernels, and the step's own code
# (the loss) when the frame has no module of its own.
OPTIMIZER = "\x00(optimizer)"
STEP_CODE = "\x00(step code)"


@dataclass(frozen=True, slots=True)
class Target:
    path: str
    fused: tuple[str, ...] = ()  # the modules a fused kernel spans (below `path`)


def common_ancestor(paths: Iterable[str]) -> str:
    split = [p.split(".") if p else [] for p in paths]
    common: list[str] = []
    for level in zip(*split, strict=False):
        if len(set(level)) != 1:
            break
        common.append(level[0])
    return ".".join(common)


def _join(root: str, rel: str) -> str:
    return f"{root}.{rel}" if root and rel else (root or rel)


@dataclass(slots=True)
class SiteTargets:
    """One call site as the profiler shows it, with its modules in both forms."""

    event: str
    kernel: str
    extern: bool
    absolute: tuple[str, ...]  # paths by module identity ("" for the frame's own code)
    relative: tuple[str, ...] | None  # paths relative to the frame's self; None: not all are
    shim: str | None = None  # with cpp_wrapper an extern runs as `aoti_torch_cpu_<op>...`
    # the modules of every node it computes (inductor's origins), in both forms: what it fused
    computed: tuple[tuple[str, ...], tuple[str, ...] | None] = ((), None)
    optimizer: bool = False  # every node it writes is optimizer code (a compiled step's)
    frame_home: str = ""  # where the frame's own code goes when no module holds it
    _cache: dict[str, Target] = field(default_factory=dict)

    def matches(self, name: str) -> bool:
        if name == self.event or name == self.kernel:
            return True
        shim = self.shim
        return shim is not None and name.startswith("aoti_torch_") and shim in name

    def target(self, owner: str | None, known: frozenset[str]) -> Target:
        """Where this site's time goes when its region runs inside `owner`'s range."""
        key = "\0" if owner is None else owner
        found = self._cache.get(key)
        if found is None and self.optimizer:
            found = self._cache[key] = Target(OPTIMIZER)
        if found is None:
            paths = _rooted(self.absolute, self.relative, owner, known)
            path = common_ancestor(paths) if paths else (owner or self.frame_home)
            # What it fused: the modules of the nodes it writes, and of every node it computes
            # (a producer inlined into it writes nothing, but its work is in this kernel); not
            # the owner's ancestors (the frame code around a layer is no layer's work it took).
            computed = _rooted(*self.computed, owner, known)
            spanned = {p for p in (*paths, *computed) if not _within(path, p)}
            fused = tuple(sorted(spanned))
            found = self._cache[key] = Target(path, fused)
        return found


def _rooted(
    absolute: tuple[str, ...],
    relative: tuple[str, ...] | None,
    owner: str | None,
    known: frozenset[str],
) -> list[str]:
    """A site's modules: relative to the frame's self rooted at `owner` where all are known
    there (the instance the region ran for), else by module identity."""
    if owner is not None and relative is not None:
        rooted = [_join(owner, rel) for rel in relative]
        if all(p in known for p in rooted):
            return rooted
    return list(absolute)


def _within(path: str, ancestor: str) -> bool:
    """`path` is `ancestor` or below it."""
    return not ancestor or path == ancestor or path.startswith(ancestor + ".")


class KernelMap:
    """Per inductor graph (graph id, backward), its call sites in wrapper order; and per FX-graph
    cache key, for graphs that have one (a cached graph's sites are found by key only: their
    graph id is that of the process that compiled them, and may be another graph's here)."""

    def __init__(
        self, sites: Iterable[CallSite], paths: dict[str, str], frame_home: str = ""
    ) -> None:
        """frame_home: where a kernel of the compiled frame's own code goes when no module's
        range is around it: the model ("", a compiled model's frame is its forward) or
        `STEP_CODE` (a compiled step's frame is no module's)."""
        self.by_graph: dict[tuple[int | None, bool], list[SiteTargets]] = defaultdict(list)
        # key -> (compile, graph id, backward) -> sites: one key in several compiles of a process
        # (several models from the same code; a map that could not be stored, so compiled
        # again), told apart by the region the graph runs in, else by its kernels' graph ids
        self.by_key: dict[str, dict[tuple[str, int | None, bool], list[SiteTargets]]] = defaultdict(
            lambda: defaultdict(list)
        )
        self.graphs_of_compile: dict[tuple[str, bool], set[int | None]] = defaultdict(set)
        self.known = frozenset(paths.values())
        count = 0
        for site in sites:
            absolute, relative = _paths(site.written, paths)
            shim = (
                f"_{site.event.split('::', 1)[1]}" if site.extern and "::" in site.event else None
            )
            computed = _paths(site.origins, paths)
            optimizer = bool(site.written) and all(w == OPTIMIZER_STACK for w in site.written)
            targets = SiteTargets(
                site.event,
                site.kernel,
                site.extern,
                absolute,
                relative,
                shim,
                computed,
                optimizer,
                frame_home,
            )
            if site.cache_key is not None:
                group = (site.compile_id, site.graph_id, site.backward)
                self.by_key[site.cache_key][group].append(targets)
            if not site.cached:
                self.by_graph[(site.graph_id, site.backward)].append(targets)
                self.graphs_of_compile[(site.compile_id, site.backward)].add(site.graph_id)
            count += 1
        self.sites = count

    def __len__(self) -> int:
        return self.sites

    def graph_of(
        self,
        child_names: Iterable[str],
        region: str | None,
        backward: bool,
        cache_key: str | None = None,
    ) -> list[SiteTargets]:
        """The sites of the graph a `## Call CompiledFxGraph <key>` event ran: by its cache key,
        else named by its kernels' `graph_<id>_` prefix, else the one graph compiled under the
        enclosing region's id."""
        names = list(child_names)
        keyed = self._keyed(cache_key, region, names)
        if keyed is not None:
            return keyed
        for name in names:
            if name.startswith("graph_"):
                number = name.split("_", 2)[1]
                if number.isdigit() and (int(number), backward) in self.by_graph:
                    return self.by_graph[(int(number), backward)]
        if region is not None:
            graphs = self.graphs_of_compile.get((region, backward), set())
            if len(graphs) == 1:
                return self.by_graph[(next(iter(graphs)), backward)]
        return []

    def _keyed(
        self, cache_key: str | None, region: str | None, names: list[str]
    ) -> list[SiteTargets] | None:
        groups = self.by_key.get(cache_key) if cache_key is not None else None
        if not groups:
            return None
        here = [sites for (compile_id, _, _), sites in groups.items() if compile_id == region]
        if len(here) == 1:
            return here[0]
        if len(groups) == 1:
            return next(iter(groups.values()))
        # a backward runs in no region: the newest compile with these kernels (this profile's)
        prefixes = {name.split("_", 2)[1] for name in names if name.startswith("graph_")}
        found = [sites for (_, g, _), sites in groups.items() if str(g) in prefixes]
        return found[-1] if found else None


def _paths(
    written: tuple[Stack, ...], paths: dict[str, str]
) -> tuple[tuple[str, ...], tuple[str, ...] | None]:
    """A site's modules by identity and relative to the frame's self (None when some module is
    not reached from self); the frame's own code counts as the frame's module."""
    absolute: list[str] = []
    relative: list[str] = []
    all_relative = True
    frame_root: str | None = None
    frame_code = False
    for stack in written:
        if stack is None or stack == OPTIMIZER_STACK:  # no module's: the frame's own code
            frame_code = True
            relative.append("")
            continue
        key, qualified = stack
        path = paths.get(key.split("@")[0])
        if path is None:
            path = qualified.replace(SELF + ".", "").replace(SELF, "")
        absolute.append(path)
        if qualified == SELF or qualified.startswith(SELF + "."):
            rel = qualified[len(SELF) + 1 :] if qualified != SELF else ""
            relative.append(rel)
            if frame_root is None and (not rel or path == rel or path.endswith("." + rel)):
                frame_root = path[: len(path) - len(rel)].rstrip(".") if rel else path
        else:
            all_relative = False
    if frame_code and frame_root is not None:
        absolute.append(frame_root)
    rel_paths = tuple(dict.fromkeys(relative)) if all_relative else None
    return tuple(dict.fromkeys(absolute)), rel_paths


__all__ = ["OPTIMIZER", "STEP_CODE", "KernelMap", "SiteTargets", "Target", "common_ancestor"]
