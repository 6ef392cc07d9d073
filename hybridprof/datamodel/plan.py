"""What the planner found and chose: static facts of the source, the module tree's targets,
findings and compat choices, and the `ProfilePlan` that holds them (saved as JSON)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from hybridprof.datamodel.jsonio import dump, load
from hybridprof.datamodel.schema import DEFAULT_STRATEGY, PLAN_KIND, SCHEMA_VERSION


@dataclass(frozen=True, slots=True)
class SourceSpan:
    """A place in a source file (1-based line, 0-based column, as libcst's PositionProvider)."""

    file: str
    line: int
    column: int = 0
    end_line: int | None = None

    def short(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class ChildDef:
    """Where a child module is created in `__init__`.

    kind: "attr" (self.x = Mod()), "sequential", "modulelist", "moduledict" (an entry of such a
    container), "add_module", "loop" (created inside a for/while/comprehension), "setattr".
    """

    name: str
    kind: str
    span: SourceSpan
    class_name: str | None = (
        None  # resolved qualified name of the constructor, e.g. torch.nn.Linear
    )


@dataclass(frozen=True, slots=True)
class ChildCall:
    """A call of a child inside `forward`.

    via: "attr" (self.x(...)), "loop" (for m in self.layers: m(...)), "getattr" (getattr(self,
    "x")), "index" (self.layers[0](...)).
    """

    name: str
    line: int
    via: str = "attr"
    in_loop: bool = False
    in_branch: bool = False


@dataclass(frozen=True, slots=True)
class InlineOp:
    """A functional or tensor op called directly in `forward` (its time lands in the parent's self
    time).

    name is the resolved name where known (`torch.nn.functional.relu`, `torch.flatten`), an operator
    (`+`, `@`), or a tensor method (`.view`).
    """

    name: str
    line: int
    in_loop: bool = False


@dataclass(frozen=True, slots=True)
class ModuleClassInfo:
    """What libcst found in the source of one nn.Module subclass."""

    qualname: str  # module.Class, e.g. "torchvision.models.alexnet.AlexNet"
    span: SourceSpan | None
    forward_span: SourceSpan | None = None
    children: tuple[ChildDef, ...] = ()
    calls: tuple[ChildCall, ...] = ()
    inline_ops: tuple[InlineOp, ...] = ()
    builtin: bool = False  # a torch container understood without reading its source
    note: str = ""  # why the source could not be read, when it could not


class FindingKind(str, Enum):
    """What a planner finding is about. Declaration order is the order reports list them in;
    `heading` is the title a report groups them under. Saved as the value (`"never_called"`)."""

    NEVER_CALLED = "never_called"
    INLINE_OPS = "inline_ops"
    ALIAS = "alias"
    LOOP_CALL = "loop_call"
    BRANCH_CALL = "branch_call"
    NO_SOURCE = "no_source"
    STATIC_ONLY = "static_only"
    OPAQUE = "opaque"
    STRAGGLER = "straggler"  # a merged torchrun session: one rank slower on a layer
    GRAPH_BREAK = "graph_break"  # torch.compile broke the model's graph (the user's code)

    def __str__(self) -> str:
        return str(self.value)

    @property
    def heading(self) -> str:
        return _FINDING_HEADINGS[self]


_FINDING_HEADINGS = {
    FindingKind.NEVER_CALLED: "Children never called",
    FindingKind.INLINE_OPS: "Parents whose own inline ops take time",
    FindingKind.ALIAS: "Aliases of shared modules",
    FindingKind.LOOP_CALL: "Children called in a loop",
    FindingKind.BRANCH_CALL: "Children called under a condition",
    FindingKind.NO_SOURCE: "Source not readable",
    FindingKind.STATIC_ONLY: "Static analysis only",
    FindingKind.OPAQUE: "Modules measured as one layer",
    FindingKind.STRAGGLER: "Stragglers (one rank slower on a layer)",
    FindingKind.GRAPH_BREAK: "Graph breaks in compiled code",
}


@dataclass(frozen=True, slots=True)
class Finding:
    """One thing the planner wants the user to know."""

    kind: FindingKind
    path: str
    message: str
    span: SourceSpan | None = None


@dataclass(frozen=True, slots=True)
class ModuleTarget:
    """One module of the tree, selected for profiling or not, with the reason."""

    path: str
    class_name: str  # short class name, e.g. "Conv2d"
    qualname: str  # module.Class
    depth: int
    is_leaf: bool
    selected: bool
    reason: str  # why selected or not: "leaf", "matches features.*", "not a leaf", ...
    aliases: tuple[str, ...] = ()  # other paths reaching the same module object
    expected_calls: int | None = None  # per forward, from the source; None when unknown
    source: SourceSpan | None = None  # where the module is created in its parent's __init__
    param_count: int = 0
    # False for a container that is never called itself (ModuleList, ModuleDict): its time is
    # exactly its children's, so the complete selection leaves it out and reports sum its children.
    has_forward: bool = True


@dataclass(frozen=True, slots=True)
class CompatChoice:
    """One version-compatibility decision, probed once from the installed torch."""

    name: str  # e.g. "profiler_device_arg"
    value: str  # e.g. "use_device"
    reason: str  # e.g. "torch 2.13 accepts use_device; use_cuda is deprecated (removed in 2.14)"


@dataclass(frozen=True, slots=True)
class ProfilePlan:
    """What will be profiled and how. Saved as JSON so a user can review and edit it."""

    root_class: str
    targets: tuple[ModuleTarget, ...]
    compat: tuple[CompatChoice, ...] = ()
    strategy: str = DEFAULT_STRATEGY
    classes: tuple[ModuleClassInfo, ...] = ()
    findings: tuple[Finding, ...] = ()
    selectors: tuple[str, ...] = ()  # the --paths / --depth the user gave, for the record
    model_file: str | None = None
    entry: str | None = None
    torch_version: str = ""
    static_only: bool = False
    created_at: str = ""
    schema_version: int = SCHEMA_VERSION

    def selected_paths(self) -> tuple[str, ...]:
        return tuple(t.path for t in self.targets if t.selected)

    def target(self, path: str) -> ModuleTarget | None:
        return next((t for t in self.targets if t.path == path), None)

    def compat_value(self, name: str, default: str = "") -> str:
        return next((c.value for c in self.compat if c.name == name), default)

    def to_json(self) -> str:
        return dump(PLAN_KIND, self)

    @classmethod
    def from_json(cls, text: str) -> ProfilePlan:
        return load(PLAN_KIND, cls, text, SCHEMA_VERSION)
