"""The layer rule, read from the source: every import points down, no modules import in a
circle, and the folders are the layers.

The packages of `hybridprof/`, top to bottom (each may import those below it):

    cli, api, torchprof   the command line and the library facade (torchprof: its API)
    integrations          trainer callbacks (HF, Lightning) over the facade
    runtime               measuring; it may use the planner
    planner, reporting    beside each other: neither imports the other, nor the runtime
    history               figures across commits: the store, change points, bisect's search
    files                 saved sessions, plans and diffs; the user's model file; atomic writes
    diff                  the comparison of two runs
    analysis              figures from sessions: tree, stats, stability, roofline, merge
    datamodel             the data model and its JSON
    errors                (a module)

The big packages have floors of their own inside (`INNER_FLOORS`), checked the same way: a part
(a folder, or a module standing directly in the package) imports its own part and the parts of
lower floors only, and the parts of one floor stand beside each other (neither imports the
other). `runtime/`, top to bottom:

    runs                  the ways a run is driven: fixed, paired, speedup, the user's steps
    compiled, memory, flops, distributed, training
                          the features
    strategies            the ways of measuring a layer call
    events                the profiler's events attributed to layers
    measures              what an iteration measured, and the iterations summarised
    basics                small modules that import nothing else of the runtime

Every `import` counts, wherever it stands (module level, inside a function, under TYPE_CHECKING),
and so does a "hybridprof.x" or "hybridprof.x:Name" string (the lazy registries load modules by
name). Only the cycle check leaves TYPE_CHECKING imports out: they never run.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    tomllib = pytest.importorskip("tomli")

PACKAGE = ROOT / "hybridprof"

# The layer of each top-level part of the package, and the layers each may import.
LAYER_OF = {
    "errors": "errors",
    "datamodel": "data",
    "analysis": "analysis",
    "diff": "diff",
    "files": "files",
    "history": "history",
    "examples": "examples",
    "_templates": "templates",  # reports/templates, installed as package data
    "planner": "planner",
    "reporting": "reporting",
    "runtime": "runtime",
    "api": "api",
    "torchprof": "api",  # torchprof's API (`import hybridprof.torchprof as torchprof`): a facade
    "cli": "cli",
    "integrations": "integrations",  # trainer callbacks (HF, Lightning) over the library facade
    "__main__": "entry",
}
_DATA = {"data", "errors"}
_FILES = {"files", "diff", "analysis", *_DATA}
BELOW = {
    "errors": set(),
    "data": {"errors"},
    "analysis": _DATA,
    "diff": {"analysis", *_DATA},
    "files": {"diff", "analysis", *_DATA},
    "examples": set(),
    "templates": set(),
    "planner": _FILES,
    "history": _FILES,
    "reporting": {"templates", "history", *_FILES},
    "runtime": {"planner", *_FILES},
    "api": {"runtime", "planner", "reporting", "examples", *_FILES},
    "cli": {"api", "runtime", "planner", "reporting", "history", "examples", *_FILES},
    "integrations": {"api", "runtime", "planner", "reporting", *_FILES},
    "entry": {"cli"},
}
LOOSE_AT_TOP = {"__init__", "__main__", "errors"}  # everything else lives in a package

# The floors inside a package, top to bottom (see the module docstring). "*" stands for every part
# of the package named on no floor, taken together as one part.
REST = "*"
Floors = tuple[tuple[str, ...], ...]
INNER_FLOORS: dict[str, Floors] = {
    "hybridprof.runtime": (
        ("runs",),
        ("compiled", "memory", "flops", "distributed", "training"),
        ("strategies",),
        ("events",),
        ("measures",),
        ("basics",),
    ),
    "hybridprof.reporting": (
        ("notebook", "history"),  # the notebook view; the history page (its own views)
        ("page",),  # the HTML and PDF pages (their renderers beside them)
        ("text",),  # the words: printed and text tables, .txt report, diff and speed-up summaries
        (REST,),  # the ground: the columns, the pandas tables and files, the shared formatting
    ),
}
MAX_MODULES_PER_FOLDER = 15
MODULE_STRING = re.compile(r"^hybridprof(\.[a-z_][a-z0-9_]*)+(:[A-Za-z_]\w*)?$")


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module, dotted (a name imported from a module counts as the module)
    line: int
    type_only: bool  # under `if TYPE_CHECKING:`


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(target: str, names: list[str], modules: dict[str, Path]) -> list[str]:
    """`from a.b import c`: module a.b.c if there is one, else a.b (c is a name in it)."""
    found = [f"{target}.{n}" for n in names if f"{target}.{n}" in modules]
    return found if len(found) == len(names) else [target, *found]


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.body:
                inside.update(id(n) for n in ast.walk(statement))
    return inside


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> list[Import]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    type_only = _type_checking_nodes(tree)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[Import] = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = _resolve(base, [alias.name for alias in node.names], modules)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            targets = [node.value.partition(":")[0]] if MODULE_STRING.match(node.value) else []
        for target in targets:
            if target == "hybridprof" or target.startswith("hybridprof."):
                found.append(Import(name, target, node.lineno, id(node) in type_only))
    return found


def all_imports() -> list[Import]:
    modules = all_modules()
    return [i for name, path in modules.items() for i in imports_of(name, path, modules)]


def layer(module: str) -> str | None:
    """The layer of a dotted module; None for the package root (version and lazy names only)."""
    parts = module.split(".")
    if len(parts) == 1:
        return None
    part = parts[1]
    assert part in LAYER_OF, f"{module}: add hybridprof.{part} to a layer in {__file__}"
    return LAYER_OF[part]


def upward_imports(imports: list[Import]) -> list[str]:
    bad = []
    for imp in imports:
        source, target = layer(imp.source), layer(imp.target)
        if source is None:  # the root's lazy names are the public API: they may point anywhere
            continue
        if target is None:  # `from hybridprof import __version__`
            continue
        if source != target and target not in BELOW[source]:
            bad.append(f"{imp.source} (line {imp.line}) imports {imp.target}: {source} -> {target}")
    return bad


def inner_part(module: str, package: str, floors: Floors) -> tuple[str, int] | None:
    """The part of `package` that `module` belongs to and its floor (0 on top); None for a module
    outside the package, or the package's own `__init__` (its face: it may name any part)."""
    if not module.startswith(package + "."):
        return None
    part = module[len(package) + 1 :].split(".")[0]
    floor_of = {name: i for i, names in enumerate(floors) for name in names}
    if part in floor_of:
        return part, floor_of[part]
    assert REST in floor_of, (
        f"{module}: put {package}.{part} on a floor of INNER_FLOORS in {__file__}"
    )
    return REST, floor_of[REST]


def floor_violations(imports: list[Import], package: str, floors: Floors) -> list[str]:
    """The imports inside `package` that go up a floor or across one (to a part beside)."""
    bad = []
    for imp in imports:
        source = inner_part(imp.source, package, floors)
        target = inner_part(imp.target, package, floors)
        if source is None or target is None or source[0] == target[0]:
            continue
        if target[1] <= source[1]:
            way = "up a floor" if target[1] < source[1] else "across a floor"
            bad.append(
                f"{imp.source} (line {imp.line}) imports {imp.target}: "
                f"{source[0]} -> {target[0]} ({way})"
            )
    return bad


def cycles(imports: list[Import]) -> list[list[str]]:
    """Strongly connected groups of modules (more than one module) in the runtime import graph."""
    graph: dict[str, set[str]] = {}
    for imp in imports:
        # Every import runs the root package first; it imports nothing eagerly (tested below), so
        # an edge into it closes no circle.
        if not imp.type_only and imp.source != imp.target and imp.target != "hybridprof":
            graph.setdefault(imp.source, set()).add(imp.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return groups


def test_every_import_points_down() -> None:
    assert upward_imports(all_imports()) == []


@pytest.mark.parametrize("package", sorted(INNER_FLOORS))
def test_every_import_inside_a_package_points_down_its_floors(package: str) -> None:
    assert floor_violations(all_imports(), package, INNER_FLOORS[package]) == []


def test_every_part_of_the_runtime_is_on_a_floor() -> None:
    # No "*" floor in the runtime: a new folder or module there is placed on purpose.
    floors = INNER_FLOORS["hybridprof.runtime"]
    parts = {p.stem for p in (PACKAGE / "runtime").iterdir() if p.suffix == ".py" or p.is_dir()}
    placed = {name for names in floors for name in names}
    assert parts - {"__init__", "__pycache__"} == placed


def test_no_import_cycles() -> None:
    assert cycles(all_imports()) == []


def test_reporting_and_measuring_stay_apart() -> None:
    # Spelled out because it is the rule most easily broken by a "quick" import.
    for imp in all_imports():
        pair = (layer(imp.source), layer(imp.target))
        assert pair not in {
            ("reporting", "planner"),
            ("reporting", "runtime"),
            ("planner", "reporting"),
            ("runtime", "reporting"),
            ("planner", "runtime"),
        }, f"{imp.source} line {imp.line} imports {imp.target}"


def test_root_package_imports_nothing_eagerly() -> None:
    # `hybridprof --version` must not pay for torch: the root only names its lazy attributes.
    tree = ast.parse((PACKAGE / "__init__.py").read_text(encoding="utf-8"))
    statements = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in statements if isinstance(n, ast.Import) for a in n.names]
    modules = [n.module or "" for n in statements if isinstance(n, ast.ImportFrom)]
    assert [m for m in [*names, *modules] if m.startswith("hybridprof")] == []


def test_the_folders_are_the_layers() -> None:
    loose = {p.stem for p in PACKAGE.glob("*.py")}
    assert loose <= LOOSE_AT_TOP, f"modules loose at the top of hybridprof/: {loose - LOOSE_AT_TOP}"
    folders = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    crowded = {
        str(f.relative_to(ROOT)): n
        for f in folders
        if (n := len(list(f.glob("*.py")))) > MAX_MODULES_PER_FOLDER
    }
    assert crowded == {}


def test_no_module_name_is_used_twice() -> None:
    # A name says what a module is; two modules of one name make every traceback and import
    # ambiguous (`__init__` and `__main__` excepted).
    names: dict[str, list[str]] = {}
    for name, path in all_modules().items():
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.stem, []).append(name)
    assert {stem: found for stem, found in names.items() if len(found) > 1} == {}


def test_every_package_is_a_listed_package() -> None:
    dirs = {p.parent for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    assert sorted(str(d.relative_to(ROOT)) for d in dirs if not (d / "__init__.py").exists()) == []
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    listed = set(config["tool"]["setuptools"]["packages"]) - {"hybridprof._templates"}
    assert listed == {module_name(d / "__init__.py") for d in dirs}


# The checker itself, on small made-up sources: it must catch what it is meant to catch.


def _imports_from(tmp_path: Path, files: dict[str, str]) -> list[Import]:
    modules: dict[str, Path] = {}
    for name, text in files.items():
        path = tmp_path / (name.replace(".", "/") + ".py")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        modules[name] = path
    return [i for name, path in modules.items() for i in imports_of(name, path, modules)]


def test_checker_sees_lazy_upward_imports(tmp_path: Path) -> None:
    source = "def f():\n    from hybridprof.reporting.format import visible\n"
    imports = _imports_from(tmp_path, {"hybridprof.runtime.x": source})
    assert upward_imports(imports) == [
        "hybridprof.runtime.x (line 2) imports hybridprof.reporting.format: runtime -> reporting"
    ]


def test_checker_sees_registry_strings(tmp_path: Path) -> None:
    source = 'TARGET = "hybridprof.api.profiler:Profile"\n'
    imports = _imports_from(tmp_path, {"hybridprof.datamodel.session": source})
    assert len(upward_imports(imports)) == 1


def test_checker_finds_cycles_but_not_type_only_ones(tmp_path: Path) -> None:
    a = "import hybridprof.planner.b\n"
    b = "def f():\n    import hybridprof.planner.a\n"
    c = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import hybridprof.planner.a\n"
    files = {"hybridprof.planner.a": a, "hybridprof.planner.b": b}
    assert cycles(_imports_from(tmp_path, files)) == [
        ["hybridprof.planner.a", "hybridprof.planner.b"]
    ]
    files = {"hybridprof.planner.a": "import hybridprof.planner.c\n", "hybridprof.planner.c": c}
    assert cycles(_imports_from(tmp_path, files)) == []


def test_checker_sees_imports_up_and_across_inner_floors(tmp_path: Path) -> None:
    floors: Floors = (("top",), ("left", "right"), ("low",))
    files = {
        "hybridprof.pkg.low.a": 'NAME = "hybridprof.pkg.top.b:Thing"\n',  # a registry string
        "hybridprof.pkg.top.b": "def f():\n    from hybridprof.pkg.low import a\n",  # down: fine
        "hybridprof.pkg.left": "def f():\n    import hybridprof.pkg.right\n",  # lazy, across
        "hybridprof.pkg.right": "import hybridprof.pkg.low.a\n",
        "hybridprof.pkg": "import hybridprof.pkg.top.b\n",  # the package's face: may name any
    }
    found = floor_violations(_imports_from(tmp_path, files), "hybridprof.pkg", floors)
    assert found == [
        "hybridprof.pkg.low.a (line 1) imports hybridprof.pkg.top.b: low -> top (up a floor)",
        "hybridprof.pkg.left (line 2) imports hybridprof.pkg.right: left -> right (across a floor)",
    ]


def test_the_rest_of_a_package_is_one_part(tmp_path: Path) -> None:
    floors: Floors = (("top",), (REST,))
    files = {
        "hybridprof.pkg.x": "import hybridprof.pkg.y\n",  # both in the rest: one part
        "hybridprof.pkg.y": "import hybridprof.pkg.top\n",
        "hybridprof.pkg.top": "import hybridprof.pkg.x\n",
    }
    found = floor_violations(_imports_from(tmp_path, files), "hybridprof.pkg", floors)
    assert found == ["hybridprof.pkg.y (line 1) imports hybridprof.pkg.top: * -> top (up a floor)"]


def test_html_reports_and_the_data_model_do_not_load_pandas() -> None:
    code = (
        "import sys, hybridprof.datamodel, hybridprof.reporting.page.templates\n"
        "import hybridprof.analysis.tree\n"
        "assert 'pandas' not in sys.modules, 'pandas was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
