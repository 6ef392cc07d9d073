"""Kernel maps kept beside inductor's FX-graph cache, so a profile compiles at torch's speed.

The map is built while inductor generates code (instrument.py), and a cache hit generates none:
inductor's FX-graph cache (and AOTAutograd's, which answers through it) loads the compiled graph
from disk. What identifies a compiled graph across processes is its FX-graph cache key: a hash of
the graph, its inputs' metadata, inductor's settings (`cpp.enable_kernel_profile` among them, so
hybridprof's compiles never share entries with the user's plain ones) and the torch version. The
profiler names it too: the generated wrapper runs as `## Call CompiledFxGraph <key> ##`. The
generated code is part of the entry, kernel event names included (`graph_<id>_<kernel>` carries
the graph id of the process that compiled it), so the call sites recorded when a key was compiled
describe every later load of that key exactly.

So, with the user's caches as they are (on by default), two of `FxGraphCache`'s static methods
are wrapped while hybridprof's compile runs:

- `_save_graph(key, graph, ...)`, called on a cache miss right after codegen: the call sites the
  hook recorded for that graph (its graph id and direction) get the key, and are written to
  `<cache folder>/kernel-maps/<key>.json` (`$XDG_CACHE_HOME/hybridprof`, else
  `~/.cache/hybridprof`), atomically, with each module named by its path in the model rather
  than by `id(module)` (which is only valid in one process);
- `_lookup_graph(key, ...)`, the one place every local or remote hit goes through (the
  FX-graph cache's own lookup and AOTAutograd's): a hit keeps its graph when the map file for the
  key reads back valid (format, version, the key itself, the torch version, every field), and its
  sites join the run's map under that key. A hit without a valid map (a first profile with this
  cache, a corrupt or foreign file) is turned into a miss for that graph: inductor generates its
  code again under the hook, and the map is stored for the next run. Nothing else changes.

Not chosen: reading kernel names back from the loaded graph's source file (`__file__` of its
module) gives the kernels but not the FX nodes each one wrote, which is what puts a kernel in a
layer; and hashing the generated code needs the loaded graph's source at hand, which the cache
key already identifies. A stored module path is used only where it names a module of the model
being profiled; otherwise the site's name relative to the compiled frame's `self` is used, as for
any compile.

When AOTAutograd bundles its compiled graphs itself (`torch._functorch.config.
bundled_autograd_cache`), they carry no FX-graph key and bypass the FX-graph cache; then, and
where these methods are not there, both caches are off for the run, as before this module.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybridprof.errors import OutputError
from hybridprof.files.outputs import write_atomic
from hybridprof.files.user_cache import cache_dir
from hybridprof.runtime.compiled.instrument import CACHES_OFF, CallSite, SiteRecorder, Stack

FORMAT = "hybridprof-kernel-map"
VERSION = 1
FOLDER = "kernel-maps"
_KEY = re.compile(r"[a-z0-9]{16,128}")  # inductor's keys are base32 digests: a safe file name
# FxGraphCache's static methods wrapped, and the parameters they must begin with
METHODS = {"_save_graph": ("key", "compiled_graph"), "_lookup_graph": ("key",)}


@dataclass(slots=True)
class CacheUse:
    """What the caches did for one run's compiles."""

    # the keys of graphs inductor's cache answered, with their maps read back
    hit: set[str] = field(default_factory=set)
    # of cached graphs with no valid map beside them: compiled again, their maps stored (each
    # once: AOTAutograd asks again for the forward it compiles after such a miss)
    rebuilt: set[str] = field(default_factory=set)
    off: str | None = None  # why both caches were off for the run (None: they were as set)


def usable() -> str | None:
    """Why a cache hit cannot be mapped in this process now (None: it can)."""
    missing = _methods_missing()
    if missing is not None:
        return missing
    from torch._functorch import config as functorch_config

    if getattr(functorch_config, "bundled_autograd_cache", False):  # the user's setting, now
        return "AOTAutograd bundles its compiled graphs (bundled_autograd_cache)"
    return None


@functools.cache
def _methods_missing() -> str | None:
    """Why this torch lacks the two cache methods wrapped here (None: it has them), once."""
    try:
        from torch._inductor.codecache import FxGraphCache
    except Exception as exc:  # a module that moved: the caches are off for the run
        return f"{type(exc).__name__}: {exc}"
    for name, wanted in METHODS.items():
        method = inspect.getattr_static(FxGraphCache, name, None)
        if not isinstance(method, staticmethod):
            return f"FxGraphCache.{name} is missing"
        parameters = tuple(inspect.signature(method.__func__).parameters)
        if parameters[: len(wanted)] != wanted:
            return f"FxGraphCache.{name} takes {parameters}"
    return None


@contextlib.contextmanager
def mapped_caches(recorder: SiteRecorder, use: CacheUse) -> Iterator[None]:
    """While the block runs: hits keep their maps (or compile again), misses store theirs; or,
    where that cannot be done, both caches off. Everything is put back after."""
    reason = usable()
    with contextlib.ExitStack() as stack:
        if reason is not None:
            use.off = reason
            for module_name, key, value in CACHES_OFF:
                config = importlib.import_module(module_name)
                stack.enter_context(config.patch({key: value}))
        else:
            stack.enter_context(_wrapped(recorder, use))
        yield


@contextlib.contextmanager
def _wrapped(recorder: SiteRecorder, use: CacheUse) -> Iterator[None]:
    from torch._inductor.codecache import FxGraphCache

    saved = {name: inspect.getattr_static(FxGraphCache, name) for name in METHODS}
    wrappers = {
        "_lookup_graph": _lookup(saved["_lookup_graph"].__func__, recorder, use),
        "_save_graph": _save(saved["_save_graph"].__func__, recorder),
    }
    try:
        for name, wrapper in wrappers.items():
            setattr(FxGraphCache, name, staticmethod(wrapper))
        yield
    finally:
        for name, original in saved.items():
            setattr(FxGraphCache, name, original)


def _lookup(original: Any, recorder: SiteRecorder, use: CacheUse) -> Any:
    def lookup(key: str, *args: Any, **kwargs: Any) -> Any:
        graph, info = original(key, *args, **kwargs)
        if graph is None:
            return graph, info
        sites = read_map(key, recorder.paths)
        if sites is None:
            use.rebuilt.add(key)
            return None, info  # a miss: inductor generates the code again, under the hook
        use.hit.add(key)
        recorder.add_cached(key, sites)
        return graph, info

    return lookup


def _save(original: Any, recorder: SiteRecorder) -> Any:
    def save(key: str, compiled_graph: Any, *args: Any, **kwargs: Any) -> Any:
        result = original(key, compiled_graph, *args, **kwargs)
        fx_kwargs = getattr(compiled_graph, "fx_kwargs", None) or {}
        graph_id = fx_kwargs.get("graph_id")
        if not isinstance(graph_id, int):
            return result  # its sites cannot be told from others': no map, a hit compiles again
        sites = recorder.key_graph(graph_id, bool(fx_kwargs.get("is_backward", False)), key)
        with contextlib.suppress(OSError, ValueError, OutputError):
            write_map(key, sites, recorder.paths)
        return result

    return save


def cache_notes(use: CacheUse) -> list[str]:
    """What the caches did, for the compile section's notes."""
    notes: list[str] = []
    if use.hit:
        notes.append(
            f"inductor's cache answered {_graphs(len(use.hit))}: kernel maps read from "
            f"{cache_dir() / FOLDER}, stored when they were compiled"
        )
    if use.rebuilt:
        notes.append(
            f"inductor's cache held {_graphs(len(use.rebuilt))} without a kernel map beside "
            "them (a map file missing or damaged): compiled again under the hook, maps stored"
        )
    if use.off is not None:
        notes.append(
            f"inductor's FX-graph and AOTAutograd caches were off for the run ({use.off}): "
            "every graph was compiled from scratch, as a cache hit could not be mapped"
        )
    return notes


def _graphs(count: int) -> str:
    return f"{count} compiled graph{'s' if count != 1 else ''}"


# -- the files


def map_path(key: str) -> Path:
    return cache_dir() / FOLDER / f"{key}.json"


def write_map(key: str, sites: list[CallSite], paths: dict[str, str]) -> None:
    """The map of one compiled graph, modules named by path (`paths`: id -> path)."""
    if not _KEY.fullmatch(key):
        return
    import torch

    document = {
        "format": FORMAT,
        "version": VERSION,
        "key": key,
        "torch": torch.__version__,
        "sites": [_site_json(site, paths) for site in sites],
    }
    folder = map_path(key).parent
    folder.mkdir(parents=True, exist_ok=True)
    write_atomic(map_path(key), json.dumps(document, separators=(",", ":")), True)


def read_map(key: str, paths: dict[str, str]) -> list[CallSite] | None:
    """The stored map of `key`, its modules as this process knows them; None when there is none
    or it is not exactly what `write_map` writes for this key and torch (it is then rebuilt)."""
    if not _KEY.fullmatch(key):
        return None
    try:
        document = json.loads(map_path(key).read_text(encoding="utf-8"))
        import torch

        if not isinstance(document, dict) or (
            document.get("format"),
            document.get("version"),
            document.get("key"),
            document.get("torch"),
        ) != (FORMAT, VERSION, key, torch.__version__):
            return None
        ids = {path: module_id for module_id, path in paths.items()}
        return [_site_from(item, key, ids) for item in document["sites"]]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _site_json(site: CallSite, paths: dict[str, str]) -> dict[str, Any]:
    return {
        "graph_id": site.graph_id,
        "backward": site.backward,
        "kernel": site.kernel,
        "extern": site.extern,
        "event": site.event,
        "written": [_stack_json(s, paths) for s in site.written],
        "origins": [_stack_json(s, paths) for s in site.origins],
    }


def _stack_json(stack: Stack, paths: dict[str, str]) -> list[str | None] | None:
    """A module as a path of the model (None: not one of its modules) and its name in the frame."""
    if stack is None:
        return None
    key, qualified = stack
    return [paths.get(key.split("@")[0]), qualified]


def _site_from(item: dict[str, Any], key: str, ids: dict[str, str]) -> CallSite:
    graph_id = item["graph_id"]
    fields = (item["kernel"], item["event"])
    if not (graph_id is None or type(graph_id) is int) or not all(
        isinstance(f, str) for f in fields
    ):
        raise ValueError("a malformed site")
    return CallSite(
        graph_id=graph_id,
        compile_id="?",
        backward=_bool(item["backward"]),
        kernel=item["kernel"],
        extern=_bool(item["extern"]),
        event=item["event"],
        written=tuple(_stack_from(s, ids) for s in item["written"]),
        origins=tuple(_stack_from(s, ids) for s in item["origins"]),
        cache_key=key,
        cached=True,
    )


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError("not a boolean")
    return value


def _stack_from(value: Any, ids: dict[str, str]) -> Stack:
    """A stored module as this process names it: the id of the module at that path, if the
    model has one there (else a key no module has: the frame-relative name is used)."""
    if value is None:
        return None
    path, qualified = value
    if not isinstance(qualified, str) or not (path is None or isinstance(path, str)):
        raise ValueError("a malformed module")
    found = ids.get(path) if path is not None else None
    return (found if found is not None else f"unknown:{path}", qualified)


__all__ = [
    "CacheUse",
    "cache_notes",
    "map_path",
    "mapped_caches",
    "read_map",
    "usable",
    "write_map",
]
