"""libcst syntax helpers for the static planner: names, keys, operators, and where code sits.

Functions of one node each (no metadata, no class state), shared by the `__init__` walk
(`static_init.py`) and the forward walk (`static.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import libcst as cst

CONTAINER_KINDS = {
    "Sequential": "sequential",
    "ModuleList": "modulelist",
    "ModuleDict": "moduledict",
}
OPERATORS = {
    cst.Add: "+", cst.Subtract: "-", cst.Multiply: "*", cst.Divide: "/", cst.FloorDivide: "//",
    cst.Modulo: "%", cst.Power: "**", cst.MatrixMultiply: "@", cst.BitAnd: "&", cst.BitOr: "|",
    cst.BitXor: "^", cst.LeftShift: "<<", cst.RightShift: ">>",
}  # fmt: skip


class Resolver(Protocol):
    def get_metadata(self, key: type, node: cst.CSTNode, default: object = ...) -> object: ...


@dataclass(frozen=True, slots=True)
class Flow:
    """Where a statement sits: inside a loop (runs many times) or a branch (may not run)."""

    loops: int = 0  # enclosing loops (for, while, comprehensions)
    in_branch: bool = False

    @property
    def in_loop(self) -> bool:
        return self.loops > 0

    def loop(self) -> Flow:
        return replace(self, loops=self.loops + 1)

    def branch(self) -> Flow:
        return replace(self, in_branch=True)


def augmented(operator: cst.BaseAugOp) -> str:
    """`+=` is the same tensor work as `+`."""
    name = type(operator).__name__.removesuffix("Assign")
    symbol = next((v for k, v in OPERATORS.items() if k.__name__ == name), "op")
    return f"{symbol}="


def container_kind(qualified: str | None) -> str | None:
    """ "sequential"/"modulelist"/"moduledict" for torch's containers, however imported."""
    if qualified is None:
        return None
    head, _, last = qualified.rpartition(".")
    if last not in CONTAINER_KINDS:
        return None
    if head in ("torch.nn", "torch.nn.modules", "torch.nn.modules.container", ".container"):
        return CONTAINER_KINDS[last]
    return None


def methods_of(node: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}


def self_attr(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Attribute) and is_self(node.value):
        return node.attr.value
    return None


def is_self(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def string_value(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def name_pattern(node: cst.BaseExpression) -> str:
    """ "x" for a constant, "layer*" for f"layer{i}", "*" for anything else."""
    text = string_value(node)
    if text is not None:
        return text
    if isinstance(node, cst.FormattedString):
        return "".join(
            p.value if isinstance(p, cst.FormattedStringText) else "*" for p in node.parts
        )
    return "*"


def constant_key(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    if isinstance(value, cst.Integer):
        return value.value
    return string_value(value)


def iterated_container(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("enumerate", "reversed") and node.args:
            return iterated_container(node.args[0].value)
        if isinstance(func, cst.Attribute) and func.attr.value in ("values", "items"):
            return self_attr(func.value)
        return None
    if isinstance(node, cst.Subscript):  # self.layers[1:]
        return self_attr(node.value)
    return self_attr(node)


def container_loop(
    target: cst.BaseExpression, iterable: cst.BaseExpression
) -> tuple[str, cst.BaseExpression] | None:
    """For `for target in iterable` over a container attribute: (the container's name, the part
    of `target` that names its entry). `for b in self.h`, `enumerate(self.h)`, `zip(self.h, pasts)`
    and `enumerate(zip(...))`, `self.d.items()`, `reversed(self.h)`, `self.h[1:]`."""
    args = (
        [a.value for a in iterable.args if a.keyword is None and not a.star]
        if isinstance(iterable, cst.Call)
        else []
    )
    if isinstance(iterable, cst.Call) and isinstance(iterable.func, cst.Name) and args:
        name = iterable.func.value
        if name == "reversed":
            return container_loop(target, args[0])
        if name == "enumerate":
            pair = _unpacked(target, 2)
            return container_loop(pair[1], args[0]) if pair else None
        if name == "zip":
            parts = _unpacked(target, len(args))
            found = (container_loop(t, a) for t, a in zip(parts, args, strict=False))
            return next((f for f in found if f is not None), None)
        return None
    owner = iterated_container(iterable)
    if owner is None:
        return None
    func = iterable.func if isinstance(iterable, cst.Call) else None
    items = isinstance(func, cst.Attribute) and func.attr.value == "items"
    pair = _unpacked(target, 2) if items else ()
    return owner, pair[1] if pair else target


def _unpacked(target: cst.BaseExpression, n: int) -> tuple[cst.BaseExpression, ...]:
    """The n names of an unpacking target (`i, block` or `(block, past)`); () otherwise."""
    if isinstance(target, cst.Tuple | cst.List) and len(target.elements) == n:
        return tuple(e.value for e in target.elements)
    return ()


# Builtins a forward hands a module to look at it or walk it, never to run it:
# `enumerate(self.layers)`, `len(self.blocks)`, `isinstance(self.norm, nn.LayerNorm)`.
INSPECTING_BUILTINS = frozenset(
    f"builtins.{name}"
    for name in (
        "enumerate", "zip", "reversed", "len", "list", "tuple", "iter", "next", "isinstance",
        "hasattr", "getattr", "setattr", "id", "type", "range", "print", "repr", "str", "sorted",
        "vars", "dict",
    )
)  # fmt: skip


def iterates_children(node: cst.BaseExpression) -> bool:
    """`self.children()`, `self.named_children()` (also under enumerate/reversed/list)."""
    if not isinstance(node, cst.Call):
        return False
    func = node.func
    if isinstance(func, cst.Name) and func.value in ("enumerate", "reversed", "list"):
        return bool(node.args) and iterates_children(node.args[0].value)
    return (
        isinstance(func, cst.Attribute)
        and func.attr.value in ("children", "named_children")
        and is_self(func.value)
    )


def assign_targets(node: cst.Assign | cst.AnnAssign) -> list[cst.BaseExpression]:
    if isinstance(node, cst.AnnAssign):
        return [node.target]
    return [t.target for t in node.targets]


def is_constant(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer | cst.Float | cst.BaseString)


def python_arithmetic(node: cst.BinaryOperation) -> bool:
    """`1 + 2` or `"%d" % n`: Python work, not a tensor op."""
    strings = isinstance(node.left, cst.BaseString) or isinstance(node.right, cst.BaseString)
    return strings or (is_constant(node.left) and is_constant(node.right))


def dotted(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return f"{head}.{node.attr.value}" if head is not None else None
    return None


def absolute(name: str, package: str) -> str:
    """`.linear.Linear` inside package torch.nn.modules -> torch.nn.modules.linear.Linear."""
    if not name.startswith(".") or not package:
        return name
    dots = len(name) - len(name.lstrip("."))
    parts = package.split(".")
    base = parts[: len(parts) - (dots - 1)] if dots > 1 else parts
    return ".".join([*base, name.lstrip(".")])


__all__ = [
    "CONTAINER_KINDS",
    "OPERATORS",
    "Flow",
    "Resolver",
    "absolute",
    "assign_targets",
    "augmented",
    "constant_key",
    "container_kind",
    "dotted",
    "is_constant",
    "is_self",
    "iterated_container",
    "iterates_children",
    "methods_of",
    "name_pattern",
    "python_arithmetic",
    "self_attr",
    "string_value",
]
