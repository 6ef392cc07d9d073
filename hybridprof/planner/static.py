"""The walk of one nn.Module class: children made in `__init__`, calls and inline ops in `forward`.

Runs inside a libcst visitor that has PositionProvider and QualifiedNameProvider resolved (see
`source_index.py`), so every name is resolved through the file's imports. Helper methods of the
class called as `self.helper(...)` from `__init__` or `forward` are followed (torchvision's ResNet
does its work in `_forward_impl`), each once.

Child names may end in `.*` when the entries are not known statically (a ModuleList built in a
comprehension, `add_module(f"layer{i}", ...)` becomes `layer*`): the planner matches them as globs.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Protocol

import libcst as cst
from libcst.metadata import PositionProvider, QualifiedNameProvider, QualifiedNameSource

from hybridprof.datamodel import ChildCall, ChildDef, InlineOp, ModuleClassInfo, SourceSpan

CONTAINER_KINDS = {
    "Sequential": "sequential",
    "ModuleList": "modulelist",
    "ModuleDict": "moduledict",
}
# Resolved names that are bookkeeping, not tensor work.
_NOT_OPS = (
    "builtins.", "torch.jit.", "torch._", "torch.overrides.", "torch.is_", "torch.fx.",
    "torch.compiler.", "torch.cuda.is_available", "torch.no_grad", "torch.enable_grad",
    "torch.autocast", "torch.Size", "warnings.", "math.", "typing.", "logging.", "super",
)  # fmt: skip
_NOT_OP_METHODS = {
    "size", "dim", "numel", "items", "keys", "values", "get", "append", "extend", "format",
    "join", "pop", "update", "insert", "stride", "is_contiguous", "get_device", "startswith",
    "endswith", "split_with_sizes_", "named_children", "children", "modules", "parameters",
}  # fmt: skip
_NOT_CHILD_CALLS = ("builtins.", "torch.nn.Parameter", "torch.nn.parameter.", "torch.Tensor")
_OPERATORS = {
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


class ClassWalker:
    def __init__(
        self, node: cst.ClassDef, resolver: Resolver, shift: int, path: str, package: str
    ) -> None:
        self.node = node
        self.resolver = resolver
        self.shift = shift
        self.path = path
        self.package = package
        self.methods = _methods(node)
        self.children: list[ChildDef] = []
        self.calls: list[ChildCall] = []
        self.ops: list[InlineOp] = []
        # local name -> (child name, via, loops a call may sit in without being repeated)
        self.bound: dict[str, tuple[str, str, int]] = {}
        self.locals: dict[str, cst.BaseExpression] = {}  # local name -> value, in __init__
        self.followed: set[str] = set()

    def info(self, qualname: str) -> ModuleClassInfo:
        init, forward = self.methods.get("__init__"), self.methods.get("forward")
        if init is not None:
            self._follow("__init__", Flow(), ClassWalker._init_statement)
        if forward is not None:
            self.followed.discard("__init__")
            self._follow("forward", Flow(), ClassWalker._forward_statement)
        return ModuleClassInfo(
            qualname=qualname,
            span=self.span(self.node.name),
            forward_span=self.span(forward.name) if forward is not None else None,
            children=tuple(self.children),
            calls=tuple(self.calls),
            inline_ops=tuple(self.ops),
        )

    def bases(self) -> tuple[str, ...]:
        """The class's bases, resolved (`torch.nn.Module`) or as written (a local `Block`)."""
        return tuple(
            name for arg in self.node.bases if (name := self.qualified(arg.value)) is not None
        )

    # ------------------------------------------------------------------ helpers

    def line(self, node: cst.CSTNode) -> int:
        position = self.resolver.get_metadata(PositionProvider, node)
        return int(position.start.line) + self.shift  # type: ignore[attr-defined]

    def span(self, node: cst.CSTNode) -> SourceSpan:
        position = self.resolver.get_metadata(PositionProvider, node)
        return SourceSpan(self.path, self.line(node), int(position.start.column))  # type: ignore[attr-defined]

    def qualified(self, node: cst.CSTNode) -> str | None:
        """The resolved dotted name of a Name/Attribute, else its text, else None."""
        imported = self.imported(node)
        return imported if imported is not None else _dotted(node)

    def imported(self, node: cst.CSTNode) -> str | None:
        """The name through the file's imports or builtins (`torch.nn.functional.relu`)."""
        names = self.resolver.get_metadata(QualifiedNameProvider, node, set())
        if not isinstance(names, set):
            return None
        found = sorted(n.name for n in names if n.source is not QualifiedNameSource.LOCAL)
        return _absolute(found[0], self.package) if found else None

    def _follow(self, method: str, flow: Flow, handler: StatementHandler) -> None:
        if method in self.followed or method not in self.methods:
            return
        self.followed.add(method)
        self._block(self.methods[method].body, flow, handler)

    def _block(self, body: cst.BaseSuite, flow: Flow, handler: StatementHandler) -> None:
        if isinstance(body, cst.SimpleStatementSuite):
            for small in body.body:
                handler(self, small, flow)
            return
        for statement in body.body:
            self._statement(statement, flow, handler)

    def _statement(self, node: cst.CSTNode, flow: Flow, handler: StatementHandler) -> None:
        if isinstance(node, cst.SimpleStatementLine):
            for small in node.body:
                handler(self, small, flow)
        elif isinstance(node, cst.For):
            handler(self, node, flow)  # the iterable runs once; the handler binds the target
            self._block(node.body, flow.loop(), handler)
            self._optional(node.orelse, flow, handler)
        elif isinstance(node, cst.While):
            handler(self, cst.Expr(node.test), flow.loop())
            self._block(node.body, flow.loop(), handler)
            self._optional(node.orelse, flow, handler)
        elif isinstance(node, cst.If):
            handler(self, cst.Expr(node.test), flow)
            self._block(node.body, flow.branch(), handler)
            self._optional(node.orelse, flow.branch(), handler)
        elif isinstance(node, cst.Try | cst.TryStar):
            self._block(node.body, flow, handler)
            for part in [*node.handlers, node.orelse]:
                self._optional(part, flow.branch(), handler)
            self._optional(node.finalbody, flow, handler)
        elif isinstance(node, cst.With):
            for item in node.items:
                handler(self, cst.Expr(item.item), flow)
            self._block(node.body, flow, handler)
        elif isinstance(node, cst.Match):
            for case in node.cases:
                self._block(case.body, flow.branch(), handler)
        elif isinstance(node, cst.FunctionDef):
            self._block(node.body, flow.branch(), handler)  # a closure may or may not run

    def _optional(self, part: cst.CSTNode | None, flow: Flow, handler: StatementHandler) -> None:
        if part is None:
            return
        if isinstance(part, cst.If):
            self._statement(part, flow, handler)
        else:
            self._block(part.body, flow, handler)  # type: ignore[attr-defined]

    # ------------------------------------------------------------------ __init__

    def _init_statement(self, node: cst.CSTNode, flow: Flow) -> None:
        if isinstance(node, cst.Assign):
            for target in node.targets:
                self._init_assign(target.target, node.value, flow)
        elif isinstance(node, cst.AnnAssign) and node.value is not None:
            self._init_assign(node.target, node.value, flow)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            self._init_call(node.value, flow)

    def _init_assign(
        self, target: cst.BaseExpression, value: cst.BaseExpression, flow: Flow
    ) -> None:
        attr = _self_attr(target)
        if attr is not None:
            self.children += self._child_defs(attr, value, _kind(flow, "attr"), target)
        elif isinstance(target, cst.Subscript) and _self_attr(target.value) is not None:
            key = _constant_key(target)
            name = f"{_self_attr(target.value)}.{key or '*'}"
            self.children += self._child_defs(name, value, _kind(flow, "moduledict"), target)
        elif isinstance(target, cst.Name):
            self.locals[target.value] = value
        if isinstance(value, cst.Call):
            self._init_call(value, flow)

    def _init_call(self, call: cst.Call, flow: Flow) -> None:
        func, args = call.func, [a.value for a in call.args]
        method = _self_attr(func)
        if method is not None:
            if method in ("add_module", "register_module") and len(args) == 2:
                name = _name_pattern(args[0])
                self.children += self._child_defs(name, args[1], _kind(flow, "add_module"), call)
            self._follow(method, flow, ClassWalker._init_statement)
        elif self.qualified(func) == "builtins.setattr" and len(args) == 3 and _is_self(args[0]):
            name = _name_pattern(args[1])
            self.children += self._child_defs(name, args[2], _kind(flow, "setattr"), call)
        elif isinstance(func, cst.Attribute) and func.attr.value in ("append", "extend"):
            owner = _self_attr(func.value)
            if owner is not None and args:
                self.children += self._child_defs(f"{owner}.*", args[0], "loop", call)

    def _child_defs(
        self, name: str, value: cst.BaseExpression, kind: str, where: cst.CSTNode, depth: int = 0
    ) -> list[ChildDef]:
        if isinstance(value, cst.Name) and value.value in self.locals and depth < 4:
            return self._child_defs(name, self.locals[value.value], kind, where, depth + 1)
        if not isinstance(value, cst.Call):
            return []
        callee = None if _self_attr(value.func) else self.qualified(value.func)
        if callee is not None and callee.startswith(_NOT_CHILD_CALLS):
            return []
        if callee is not None and _is_torch_function(callee):
            return []
        own = ChildDef(name, kind, self.span(where), callee)
        container = container_kind(callee)
        if container is None:
            return [own]
        return [own, *self._entries(name, container, value)]

    def _entries(self, name: str, container: str, call: cst.Call) -> list[ChildDef]:
        args = [a for a in call.args if a.keyword is None]
        if not args:
            return []
        entries: list[ChildDef] = []
        if container == "sequential" and not _is_ordered_dict(args[0].value, self):
            for i, arg in enumerate(args):
                star = arg.star != ""
                entry = f"{name}.{'*' if star else i}"
                entries += self._child_defs(entry, arg.value, "loop" if star else container, arg)
                if star:
                    break
            return entries
        return self._collection_entries(name, container, args[0].value)

    def _collection_entries(
        self, name: str, container: str, value: cst.BaseExpression
    ) -> list[ChildDef]:
        if isinstance(value, cst.Call) and value.args:  # OrderedDict([...]) / dict(...)
            value = value.args[0].value
        if isinstance(value, cst.List | cst.Tuple):
            out: list[ChildDef] = []
            for i, element in enumerate(value.elements):
                key, item = _pair(element.value, str(i))
                out += self._child_defs(f"{name}.{key}", item, container, element)
            return out
        if isinstance(value, cst.Dict):
            out = []
            for entry in value.elements:
                if isinstance(entry, cst.DictElement):
                    key = _string(entry.key) or "*"
                    out += self._child_defs(f"{name}.{key}", entry.value, container, entry)
            return out
        if isinstance(value, cst.ListComp | cst.GeneratorExp):
            return self._child_defs(f"{name}.*", value.elt, "loop", value)
        if isinstance(value, cst.DictComp):
            return self._child_defs(f"{name}.*", value.value, "loop", value)
        return []

    # ------------------------------------------------------------------ forward

    def _forward_statement(self, node: cst.CSTNode, flow: Flow) -> None:
        if isinstance(node, cst.Assert | cst.Raise):
            return  # checks and error paths, not the work of a forward
        if isinstance(node, cst.For):
            self._expression(node.iter, flow)
            self._bind_loop(node.target, node.iter)
            return
        if isinstance(node, cst.Assign | cst.AnnAssign) and node.value is not None:
            for target in _assign_targets(node):
                self._bind_alias(target, node.value)
        if isinstance(node, cst.AugAssign):
            self._op(_augmented(node.operator), node, flow)
        for child in node.children:
            self._expression(child, flow)

    def _bind_alias(self, target: cst.BaseExpression, value: cst.BaseExpression) -> None:
        if not isinstance(target, cst.Name):
            return
        child = self._child_reference(value)
        if child is not None:
            self.bound[target.value] = child
        else:
            self.bound.pop(target.value, None)

    def _bind_loop(self, target: cst.BaseExpression, iterable: cst.BaseExpression) -> None:
        """`for m in self.layers`, `enumerate(self.layers)`, `self.d.items()/values()`."""
        owner = _iterated_container(iterable)
        if owner is None:
            return
        if isinstance(target, cst.Tuple) and target.elements:
            target = target.elements[-1].value
        if isinstance(target, cst.Name):
            self.bound[target.value] = (f"{owner}.*", "loop", 1)  # its own loop is no repeat

    def _child_reference(self, node: cst.BaseExpression) -> tuple[str, str, int] | None:
        """(child name, via) for `self.x`, `self.x[0]`, `getattr(self, "x")`, a bound local."""
        attr = _self_attr(node)
        if attr is not None:
            return (attr, "attr", 0) if attr not in self.methods else None
        if isinstance(node, cst.Subscript) and _self_attr(node.value) is not None:
            return f"{_self_attr(node.value)}.{_constant_key(node) or '*'}", "index", 0
        if isinstance(node, cst.Call) and self.qualified(node.func) == "builtins.getattr":
            args = [a.value for a in node.args]
            if len(args) >= 2 and _is_self(args[0]):
                return _name_pattern(args[1]), "getattr", 0
        if isinstance(node, cst.Name) and node.value in self.bound:
            return self.bound[node.value]
        return None

    def _expression(self, node: cst.CSTNode, flow: Flow) -> None:
        if isinstance(node, cst.Call):
            self._call(node, flow)
        elif isinstance(node, cst.BinaryOperation):
            if not _python_arithmetic(node):
                self._op(_OPERATORS.get(type(node.operator), "op"), node, flow)
            self._expression(node.left, flow)
            self._expression(node.right, flow)
        elif isinstance(node, cst.BaseComp):
            self._comprehension(node, flow)
        elif isinstance(node, cst.IfExp):
            self._expression(node.test, flow)
            self._expression(node.body, flow.branch())
            self._expression(node.orelse, flow.branch())
        elif isinstance(node, cst.Lambda):
            self._expression(node.body, flow.branch())
        elif isinstance(node, cst.SubscriptElement):
            return  # index arithmetic (x[:, : n - 1]) is Python work, not a tensor op
        else:
            for child in node.children:
                self._expression(child, flow)

    def _comprehension(self, node: cst.BaseComp, flow: Flow) -> None:
        loop = flow.loop()
        part: cst.CompFor | None = node.for_in
        while part is not None:
            self._expression(part.iter, flow)
            self._bind_loop(part.target, part.iter)
            for condition in part.ifs:
                self._expression(condition.test, loop)
            part = part.inner_for_in
        bodies = [node.key, node.value] if isinstance(node, cst.DictComp) else [node.elt]  # type: ignore[attr-defined]
        for body in bodies:
            self._expression(body, loop)

    def _call(self, node: cst.Call, flow: Flow) -> None:
        func = node.func
        method = _self_attr(func)
        reference = self._child_reference(func)
        if method is not None and method in self.methods:
            self._follow(method, flow, ClassWalker._forward_statement)
        elif reference is not None:
            name, via, depth = reference
            in_loop = flow.loops > depth  # a container's loop variable: its own loop is no repeat
            self.calls.append(ChildCall(name, self.line(node), via, in_loop, flow.in_branch))
        else:
            self._callee_op(func, node, flow)
        for arg in node.args:
            passed = _self_attr(arg.value)
            if passed is not None and passed not in self.methods:
                self.calls.append(ChildCall(passed, self.line(arg), "arg", flow.in_loop, True))
            self._expression(arg.value, flow)
        if isinstance(func, cst.Attribute):
            self._expression(func.value, flow)

    def _callee_op(self, func: cst.BaseExpression, node: cst.Call, flow: Flow) -> None:
        if (
            isinstance(func, cst.Attribute)
            and _self_attr(func.value) is None
            and not _is_self(func.value)
        ):
            resolved = self.imported(func)
            if resolved is not None:
                self._named_op(resolved, node, flow)
            elif func.attr.value not in _NOT_OP_METHODS:
                self._op(f".{func.attr.value}", node, flow)
            return
        if isinstance(
            func, cst.Attribute
        ):  # self.child.method(...): the child's forward is not run
            self._op(_dotted(func) or f".{func.attr.value}", node, flow)
            return
        resolved = self.qualified(func)
        if resolved is not None:
            self._named_op(resolved, node, flow)

    def _named_op(self, name: str, node: cst.CSTNode, flow: Flow) -> None:
        if not name.startswith(_NOT_OPS) and name not in self.bound:
            self._op(name, node, flow)

    def _op(self, name: str, node: cst.CSTNode, flow: Flow) -> None:
        self.ops.append(InlineOp(name, self.line(node), flow.in_loop))


class StatementHandler(Protocol):
    def __call__(self, walker: ClassWalker, node: cst.CSTNode, flow: Flow, /) -> None: ...


# --------------------------------------------------------------------------- syntax helpers


def _augmented(operator: cst.BaseAugOp) -> str:
    """`+=` is the same tensor work as `+`."""
    name = type(operator).__name__.removesuffix("Assign")
    symbol = next((v for k, v in _OPERATORS.items() if k.__name__ == name), "op")
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


def _is_torch_function(qualified: str) -> bool:
    """torch.zeros(...), torch.nn.init.x(...): a tensor or None, never a child module."""
    last = qualified.rpartition(".")[2]
    return qualified.startswith("torch.") and not last[:1].isupper()


def _methods(node: cst.ClassDef) -> dict[str, cst.FunctionDef]:
    body = node.body.body if isinstance(node.body, cst.IndentedBlock) else ()
    return {s.name.value: s for s in body if isinstance(s, cst.FunctionDef)}


def _self_attr(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Attribute) and _is_self(node.value):
        return node.attr.value
    return None


def _is_self(node: cst.CSTNode) -> bool:
    return isinstance(node, cst.Name) and node.value == "self"


def _kind(flow: Flow, kind: str) -> str:
    return "loop" if flow.in_loop else kind


def _string(node: cst.CSTNode | None) -> str | None:
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def _name_pattern(node: cst.BaseExpression) -> str:
    """ "x" for a constant, "layer*" for f"layer{i}", "*" for anything else."""
    text = _string(node)
    if text is not None:
        return text
    if isinstance(node, cst.FormattedString):
        return "".join(
            p.value if isinstance(p, cst.FormattedStringText) else "*" for p in node.parts
        )
    return "*"


def _constant_key(node: cst.Subscript) -> str | None:
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return None
    value = node.slice[0].slice.value
    if isinstance(value, cst.Integer):
        return value.value
    return _string(value)


def _pair(node: cst.BaseExpression, index: str) -> tuple[str, cst.BaseExpression]:
    """("name", module) tuples of an OrderedDict list; otherwise (index, node)."""
    if isinstance(node, cst.Tuple) and len(node.elements) == 2:
        key = _string(node.elements[0].value)
        if key is not None:
            return key, node.elements[1].value
    return index, node


def _is_ordered_dict(node: cst.BaseExpression, walker: ClassWalker) -> bool:
    if not isinstance(node, cst.Call):
        return False
    return walker.qualified(node.func) in ("collections.OrderedDict", "builtins.dict", "dict")


def _iterated_container(node: cst.BaseExpression) -> str | None:
    if isinstance(node, cst.Call):
        func = node.func
        if isinstance(func, cst.Name) and func.value in ("enumerate", "reversed") and node.args:
            return _iterated_container(node.args[0].value)
        if isinstance(func, cst.Attribute) and func.attr.value in ("values", "items"):
            return _self_attr(func.value)
        return None
    if isinstance(node, cst.Subscript):  # self.layers[1:]
        return _self_attr(node.value)
    return _self_attr(node)


def _assign_targets(node: cst.Assign | cst.AnnAssign) -> list[cst.BaseExpression]:
    if isinstance(node, cst.AnnAssign):
        return [node.target]
    return [t.target for t in node.targets]


def _is_constant(node: cst.BaseExpression) -> bool:
    return isinstance(node, cst.Integer | cst.Float | cst.BaseString)


def _python_arithmetic(node: cst.BinaryOperation) -> bool:
    """`1 + 2` or `"%d" % n`: Python work, not a tensor op."""
    strings = isinstance(node.left, cst.BaseString) or isinstance(node.right, cst.BaseString)
    return strings or (_is_constant(node.left) and _is_constant(node.right))


def _dotted(node: cst.CSTNode) -> str | None:
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return f"{head}.{node.attr.value}" if head is not None else None
    return None


def _absolute(name: str, package: str) -> str:
    """`.linear.Linear` inside package torch.nn.modules -> torch.nn.modules.linear.Linear."""
    if not name.startswith(".") or not package:
        return name
    dots = len(name) - len(name.lstrip("."))
    parts = package.split(".")
    base = parts[: len(parts) - (dots - 1)] if dots > 1 else parts
    return ".".join([*base, name.lstrip(".")])


__all__ = ["CONTAINER_KINDS", "ClassWalker", "Flow", "container_kind"]
