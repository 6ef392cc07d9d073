"""The `__init__` part of the static walk: which child modules a class creates, and how.

`self.x = nn.Linear(...)`, `self.add_module(f"layer{i}", ...)`, `setattr(self, name, ...)`,
`self.blocks.append(...)`, and the entries of Sequential/ModuleList/ModuleDict built from literals
or comprehensions. The walker (`ClassWalker` in static.py) calls `init_statement` on each statement
of `__init__`; this module sees it only through `InitWalker`, the part of it that the `__init__`
walk reads and fills, so the dependency runs one way (static.py -> static_init.py).
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst

from hybridprof.datamodel import ChildDef, SourceSpan
from hybridprof.planner.static_syntax import (
    Flow,
    constant_key,
    container_kind,
    is_self,
    name_pattern,
    self_attr,
    string_value,
)


class InitHandler(Protocol):
    def __call__(self, walker: InitWalker, node: cst.CSTNode, flow: Flow, /) -> None: ...


class InitWalker(Protocol):
    """What the `__init__` walk needs from the class walker: the child list it fills, the locals it
    records, and the walker's name resolution and method following."""

    children: list[ChildDef]
    locals: dict[str, cst.BaseExpression]

    def follow(self, method: str, flow: Flow, handler: InitHandler) -> None: ...

    def qualified(self, node: cst.CSTNode) -> str | None: ...

    def span(self, node: cst.CSTNode) -> SourceSpan: ...


_NOT_CHILD_CALLS = ("builtins.", "torch.nn.Parameter", "torch.nn.parameter.", "torch.Tensor")


def init_statement(walker: InitWalker, node: cst.CSTNode, flow: Flow) -> None:
    if isinstance(node, cst.Assign):
        for target in node.targets:
            _init_assign(walker, target.target, node.value, flow)
    elif isinstance(node, cst.AnnAssign) and node.value is not None:
        _init_assign(walker, node.target, node.value, flow)
    elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
        _init_call(walker, node.value, flow)


def _init_assign(
    walker: InitWalker, target: cst.BaseExpression, value: cst.BaseExpression, flow: Flow
) -> None:
    attr = self_attr(target)
    if attr is not None:
        walker.children += _child_defs(walker, attr, value, kind_in(flow, "attr"), target)
    elif isinstance(target, cst.Subscript) and self_attr(target.value) is not None:
        key = constant_key(target)
        name = f"{self_attr(target.value)}.{key or '*'}"
        walker.children += _child_defs(walker, name, value, kind_in(flow, "moduledict"), target)
    elif isinstance(target, cst.Name):
        walker.locals[target.value] = value
    if isinstance(value, cst.Call):
        _init_call(walker, value, flow)


def _init_call(walker: InitWalker, call: cst.Call, flow: Flow) -> None:
    func, args = call.func, [a.value for a in call.args]
    method = self_attr(func)
    if method is not None:
        if method in ("add_module", "register_module") and len(args) == 2:
            name = name_pattern(args[0])
            walker.children += _child_defs(walker, name, args[1], kind_in(flow, "add_module"), call)
        walker.follow(method, flow, init_statement)
    elif walker.qualified(func) == "builtins.setattr" and len(args) == 3 and is_self(args[0]):
        name = name_pattern(args[1])
        walker.children += _child_defs(walker, name, args[2], kind_in(flow, "setattr"), call)
    elif isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend"):
        owner = self_attr(func.value)
        if owner is not None and args:
            walker.children += _child_defs(walker, f"{owner}.*", args[0], "loop", call)


def _child_defs(
    walker: InitWalker,
    name: str,
    value: cst.BaseExpression,
    kind: str,
    where: cst.CSTNode,
    depth: int = 0,
) -> list[ChildDef]:
    if isinstance(value, cst.Name) and value.value in walker.locals and depth < 4:
        return _child_defs(walker, name, walker.locals[value.value], kind, where, depth + 1)
    if isinstance(value, cst.IfExp) and depth < 4:  # `A() if wide else B()`: made here either way
        for branch in (value.body, value.orelse):
            found = _child_defs(walker, name, branch, kind, where, depth + 1)
            if found:  # the first branch that makes a module names its class
                return found
        return []
    if not isinstance(value, cst.Call):
        return []
    callee = None if self_attr(value.func) else walker.qualified(value.func)
    if callee is not None and callee.startswith(_NOT_CHILD_CALLS):
        return []
    if callee is not None and is_torch_function(callee):
        return []
    own = ChildDef(name, kind, walker.span(where), callee)
    container = container_kind(callee)
    if container is None:
        return [own]
    return [own, *_entries(walker, name, container, value)]


def _entries(walker: InitWalker, name: str, container: str, call: cst.Call) -> list[ChildDef]:
    args = [a for a in call.args if a.keyword is None]
    if not args:
        return []
    entries: list[ChildDef] = []
    if container == "sequential" and not _is_ordered_dict(args[0].value, walker):
        for i, arg in enumerate(args):
            star = arg.star != ""
            entry = f"{name}.{'*' if star else i}"
            entries += _child_defs(walker, entry, arg.value, "loop" if star else container, arg)
            if star:
                break
        return entries
    return _collection_entries(walker, name, container, args[0].value)


def _collection_entries(
    walker: InitWalker, name: str, container: str, value: cst.BaseExpression
) -> list[ChildDef]:
    if isinstance(value, cst.Call) and value.args:  # OrderedDict([...]) / dict(...)
        value = value.args[0].value
    if isinstance(value, cst.List | cst.Tuple):
        out: list[ChildDef] = []
        for i, element in enumerate(value.elements):
            key, item = pair(element.value, str(i))
            out += _child_defs(walker, f"{name}.{key}", item, container, element)
        return out
    if isinstance(value, cst.Dict):
        out = []
        for entry in value.elements:
            if isinstance(entry, cst.DictElement):
                key = string_value(entry.key) or "*"
                out += _child_defs(walker, f"{name}.{key}", entry.value, container, entry)
        return out
    if isinstance(value, cst.ListComp | cst.GeneratorExp):
        return _child_defs(walker, f"{name}.*", value.elt, "loop", value)
    if isinstance(value, cst.DictComp):
        return _child_defs(walker, f"{name}.*", value.value, "loop", value)
    return []


def is_torch_function(qualified: str) -> bool:
    """torch.zeros(...), torch.nn.init.x(...): a tensor or None, never a child module."""
    last = qualified.rpartition(".")[2]
    return qualified.startswith("torch.") and not last[:1].isupper()


def kind_in(flow: Flow, kind: str) -> str:
    return "loop" if flow.in_loop else kind


def pair(node: cst.BaseExpression, index: str) -> tuple[str, cst.BaseExpression]:
    """("name", module) tuples of an OrderedDict list; otherwise (index, node)."""
    if isinstance(node, cst.Tuple) and len(node.elements) == 2:
        key = string_value(node.elements[0].value)
        if key is not None:
            return key, node.elements[1].value
    return index, node


def _is_ordered_dict(node: cst.BaseExpression, walker: InitWalker) -> bool:
    if not isinstance(node, cst.Call):
        return False
    return walker.qualified(node.func) in ("collections.OrderedDict", "builtins.dict", "dict")


__all__ = ["init_statement"]
