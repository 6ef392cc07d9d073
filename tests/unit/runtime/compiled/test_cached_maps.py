"""The kernel map stored beside inductor's cache: written atomically, read back only when it is
exactly what was written for that key and torch, its modules named as this process knows them;
and the map finds a cached graph by its key, never by a graph id of another process."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from hybridprof.runtime.compiled.cached_maps import map_path, read_map, write_map
from hybridprof.runtime.compiled.instrument import CallSite
from hybridprof.runtime.compiled.kernel_map import KernelMap

KEY = "fabc123def456ghi789jkl0mnopqrstuvwxyz234567abcdefghij"


@pytest.fixture(autouse=True)
def _own_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _sites(graph_id: int = 3) -> list[CallSite]:
    return [
        CallSite(
            graph_id=graph_id,
            compile_id="0/0",
            backward=False,
            kernel="cpp_fused_add_native_layer_norm_0",
            extern=False,
            event=f"graph_{graph_id}_cpp_fused_add_native_layer_norm_0",
            written=(("111", "L['self'].norm"),),
            origins=(("111", "L['self'].norm"), ("222", "L['self'].emb"), None),
        ),
        CallSite(
            graph_id=graph_id,
            compile_id="0/0",
            backward=False,
            kernel="extern_kernels.addmm",
            extern=True,
            event="aten::addmm",
            written=(("333", "L['self'].head"),),
        ),
    ]


PATHS_THEN = {"111": "norm", "222": "emb", "333": "head"}  # the compiling process's ids
PATHS_NOW = {"901": "norm", "902": "emb", "903": "head"}  # the same modules, another process


def test_a_map_reads_back_with_this_processs_module_ids() -> None:
    write_map(KEY, _sites(), PATHS_THEN)
    read = read_map(KEY, PATHS_NOW)
    assert read is not None and len(read) == 2
    assert [s.kernel for s in read] == [s.kernel for s in _sites()]
    assert [s.event for s in read] == [s.event for s in _sites()]  # the cached code's names
    assert read[0].written == (("901", "L['self'].norm"),)
    assert read[0].origins == (("901", "L['self'].norm"), ("902", "L['self'].emb"), None)
    assert all(s.cache_key == KEY and s.cached for s in read)
    # a module the model being profiled does not have is never given another module's id
    (elsewhere,) = read_map(KEY, {"901": "norm", "903": "head"})[0].origins[1:2]  # type: ignore[index]
    assert elsewhere == ("unknown:emb", "L['self'].emb")
    assert not list(map_path(KEY).parent.glob("*.tmp"))  # written through a temp file


@pytest.mark.parametrize(
    "damage",
    ["{not json", "[]", "null", "half", "key", "torch", "version", "format", "site", "module"],
)
def test_a_damaged_or_foreign_map_is_not_trusted(damage: str) -> None:
    write_map(KEY, _sites(), PATHS_THEN)
    path = map_path(KEY)
    document = json.loads(path.read_text())
    if damage == "half":
        path.write_text(path.read_text()[: len(path.read_text()) // 2])
    elif damage in ("key", "torch", "version", "format"):
        document[damage] = "other" if damage != "version" else 99
        path.write_text(json.dumps(document))
    elif damage == "site":
        document["sites"][1]["extern"] = "yes"
        path.write_text(json.dumps(document))
    elif damage == "module":
        document["sites"][0]["written"] = [["norm"]]
        path.write_text(json.dumps(document))
    else:
        path.write_text(damage)
    assert read_map(KEY, PATHS_NOW) is None  # the hit is then compiled again, and the map stored
    write_map(KEY, _sites(), PATHS_THEN)  # ... over the damaged file
    assert read_map(KEY, PATHS_NOW) is not None


def test_no_file_outside_the_folder_for_a_key_that_is_no_digest() -> None:
    for key in ("../escape", "", "A" * 52, "x/y"):
        write_map(key, _sites(), PATHS_THEN)
        assert read_map(key, PATHS_NOW) is None
    folder = map_path(KEY).parent
    assert not folder.exists() or not list(folder.iterdir())


def test_a_cached_graph_is_found_by_its_key_only() -> None:
    """Its graph id is the compiling process's: here graph 3 is another, freshly compiled graph."""
    write_map(KEY, _sites(), PATHS_THEN)
    cached = read_map(KEY, PATHS_NOW) or []
    fresh = [
        CallSite(3, "1/0", False, "cpp_fused_relu_0", False, "graph_3_cpp_fused_relu_0", (None,))
    ]
    kmap = KernelMap([*fresh, *cached], PATHS_NOW)
    names = ["graph_3_cpp_fused_add_native_layer_norm_0", "aten::addmm"]
    by_key = kmap.graph_of(names, None, False, KEY)
    assert [s.kernel for s in by_key] == [s.kernel for s in _sites()]
    by_id = kmap.graph_of(["graph_3_cpp_fused_relu_0"], None, False, None)
    assert [s.kernel for s in by_id] == ["cpp_fused_relu_0"]  # not mixed with the cached sites
    assert kmap.graph_of(names, None, False, "another" + KEY[7:]) == by_id  # by its id: graph 3


def test_one_key_compiled_twice_in_a_process_is_two_graphs() -> None:
    """A map that could not be stored makes the next hit compile again: a new graph id."""
    first = [CallSite(**{**_field_values(s), "cache_key": KEY}) for s in _sites(3)]
    second = [CallSite(**{**_field_values(s), "cache_key": KEY}) for s in _sites(8)]
    kmap = KernelMap([*first, *second], PATHS_THEN)
    later = kmap.graph_of(["graph_8_cpp_fused_add_native_layer_norm_0"], None, False, KEY)
    assert later[0].event == "graph_8_cpp_fused_add_native_layer_norm_0"
    earlier = kmap.graph_of(["graph_3_cpp_fused_add_native_layer_norm_0"], None, False, KEY)
    assert earlier[0].event == "graph_3_cpp_fused_add_native_layer_norm_0"


def _field_values(site: CallSite) -> dict[str, object]:
    return {name: getattr(site, name) for name in CallSite.__slots__}  # type: ignore[attr-defined]


def test_the_map_names_the_torch_it_was_made_with() -> None:
    write_map(KEY, _sites(), PATHS_THEN)
    assert json.loads(map_path(KEY).read_text())["torch"] == torch.__version__


def test_one_cached_key_read_by_two_compiles_is_told_apart_by_the_region() -> None:
    """Two models from the same code: each compile reads the map with its own modules."""
    write_map(KEY, _sites(), PATHS_THEN)
    first = [
        CallSite(**{**_field_values(s), "compile_id": "0/0"})
        for s in read_map(KEY, PATHS_THEN) or []
    ]
    second = [
        CallSite(**{**_field_values(s), "compile_id": "1/0"})
        for s in read_map(KEY, PATHS_NOW) or []
    ]
    kmap = KernelMap([*first, *second], {**PATHS_THEN, **PATHS_NOW})
    names = ["graph_3_cpp_fused_add_native_layer_norm_0", "aten::addmm"]
    for region in ("0/0", "1/0"):
        sites = kmap.graph_of(names, region, False, KEY)
        assert sites[0].absolute == ("norm",) and len(sites) == 2, region
        assert sites is kmap.by_key[KEY][(region, 3, False)]
