"""The walk of one nn.Module class: children made in `__init__`, calls and inline ops in `forward`.

Runs inside a libcst visitor that has PositionProvider resolved (see `source_index.py`); every
name is resolved through the file's imports (`static_names.ImportNames`). Helper methods of the
class called as `self.helper(...)` from `__init__` or `forward` are followed (torchvision's ResNet
does its work in `_forward_impl`), each once.

Child names may end in `.*` when the entries are not known statically (a ModuleList built in a
comprehension, `add_module(f"layer{i}", ...)` becomes `layer*`): the planner matches them as globs.

The `__init__` part is in `static_init.py`, the syntax helpers in `static_syntax.py`.
"""

from __future__ import annotations

from typing import Protocol

import libcst as cst
from libcst.metadata import PositionProvider

from hybridprof.datamodel import ChildCall, ChildDef, InlineOp, ModuleClassInfo, SourceSpan
from hybridprof.planner.static_init import init_statement
from hybridprof.planner.static_names import ImportNames, local_names
from hybridprof.planner.static_syntax import (
    CONTAINER_KINDS,
    INSPECTING_BUILTINS,
    OPERATORS,
    Flow,
    Resolver,
    absolute,
    assign_targets,
    augmented,
    constant_key,
    container_kind,
    container_loop,
    dotted,
    is_self,
    iterates_children,
    methods_of,
    name_pattern,
    python_arithmetic,
    self_attr,
)

# Resolved names that are bookkeeping, not tensor work.
_NOT_OPS = (
    "builtins.", "torch.jit.", "torch._", "torch.overrides.", "torch.is_", "torch.fx.",
    "torch.compiler.", "torch.cuda.is_available", "torch.no_grad", "torch.enable_grad",
    "torch.autocast", "torch.Size", "warnings.", "math.", "typing.", "logging.", "super",
)  # fmt: skip
# nn.Module's own iterators: `self.children()` is neither a child call nor an op.
_MODULE_ITERATORS = {
    "children", "named_children", "modules", "named_modules", "parameters", "named_parameters",
    "buffers", "named_buffers",
}  # fmt: skip
_NOT_OP_METHODS = {
    "size", "dim", "numel", "items", "keys", "values", "get", "append", "extend", "format",
    "join", "pop", "update", "insert", "stride", "is_contiguous", "get_device", "startswith",
    "endswith", "split_with_sizes_", "named_children", "children", "modules", "parameters",
    # a logger's methods (transformers: `logger.warning_once(...)` in forward)
    "debug", "info", "warning", "warning_once", "warn", "error", "exception", "critical",
}  # fmt: skip


class ClassWalker:
    def __init__(
        self,
        node: cst.ClassDef,
        resolver: Resolver,
        shift: int,
        path: str,
        package: str,
        names: ImportNames,
    ) -> None:
        self.node = node
        self.resolver = resolver
        self.names = names
        self.local: frozenset[str] = frozenset()  # names the method being walked binds itself
        self.shift = shift
        self.path = path
        self.package = package
        self.methods = methods_of(node)
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
            self.follow("__init__", Flow(), init_statement)
        if forward is not None:
            self.followed.discard("__init__")
            self.follow("forward", Flow(), ClassWalker._forward_statement)
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
        return imported if imported is not None else dotted(node)

    def imported(self, node: cst.CSTNode) -> str | None:
        """The name through the file's imports or builtins (`torch.nn.functional.relu`)."""
        found = self.names.resolve(node, self.local)
        return absolute(found, self.package) if found is not None else None

    def follow(self, method: str, flow: Flow, handler: StatementHandler) -> None:
        if method in self.followed or method not in self.methods:
            return
        self.followed.add(method)
        outer, self.local = self.local, local_names(self.methods[method])
        try:
            self._block(self.methods[method].body, flow, handler)
        finally:
            self.local = outer

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

    # ------------------------------------------------------------------ forward

    def _forward_statement(self, node: cst.CSTNode, flow: Flow) -> None:
        if isinstance(node, cst.Assert | cst.Raise):
            return  # checks and error paths, not the work of a forward
        if isinstance(node, cst.For):
            self._expression(node.iter, flow)
            self._bind_loop(node.target, node.iter)
            return
        if isinstance(node, cst.Assign | cst.AnnAssign) and node.value is not None:
            for target in assign_targets(node):
                self._bind_alias(target, node.value)
        if isinstance(node, cst.AugAssign):
            self._op(augmented(node.operator), node, flow)
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
        """`for m in self.layers`, `enumerate(self.layers)`, `zip(self.h, pasts)`,
        `self.d.items()/values()`, `self.children()`: calling the loop variable calls a child, it
        is no inline op (and walking the container calls nothing)."""
        found = container_loop(target, iterable)
        if found is not None:
            owner, target = found
            bound = (f"{owner}.*", "loop", 1)  # its own loop is no repeat
        elif iterates_children(iterable):
            # any direct child, which one unknown: via "children" keeps its count uncertain
            bound = ("*", "children", 1)
            if isinstance(target, cst.Tuple) and target.elements:
                target = target.elements[-1].value
        else:
            return
        if isinstance(target, cst.Name):
            self.bound[target.value] = bound

    def _child_reference(self, node: cst.BaseExpression) -> tuple[str, str, int] | None:
        """(child name, via) for `self.x`, `self.x[0]`, `getattr(self, "x")`, a bound local."""
        attr = self_attr(node)
        if attr is not None:
            return (attr, "attr", 0) if attr not in self.methods else None
        if isinstance(node, cst.Subscript) and self_attr(node.value) is not None:
            return f"{self_attr(node.value)}.{constant_key(node) or '*'}", "index", 0
        if isinstance(node, cst.Call) and self.qualified(node.func) == "builtins.getattr":
            args = [a.value for a in node.args]
            if len(args) >= 2 and is_self(args[0]):
                return name_pattern(args[1]), "getattr", 0
        if isinstance(node, cst.Name) and node.value in self.bound:
            return self.bound[node.value]
        return None

    def _expression(self, node: cst.CSTNode, flow: Flow) -> None:
        if isinstance(node, cst.Call):
            self._call(node, flow)
        elif isinstance(node, cst.BinaryOperation):
            if not python_arithmetic(node):
                self._op(OPERATORS.get(type(node.operator), "op"), node, flow)
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
        method = self_attr(func)
        reference = self._child_reference(func)
        if method is not None and method in self.methods:
            self.follow(method, flow, ClassWalker._forward_statement)
        elif method in _MODULE_ITERATORS:
            pass  # self.children() & co. walk the tree; they run no child and no tensor op
        elif reference is not None:
            name, via, depth = reference
            in_loop = flow.loops > depth  # a container's loop variable: its own loop is no repeat
            self.calls.append(ChildCall(name, self.line(node), via, in_loop, flow.in_branch))
        else:
            self._callee_op(func, node, flow)
        inspects = self.qualified(func) in INSPECTING_BUILTINS  # enumerate(self.h) runs no h
        for arg in node.args:
            passed = self_attr(arg.value)
            if passed is not None and passed not in self.methods and not inspects:
                self.calls.append(ChildCall(passed, self.line(arg), "arg", flow.in_loop, True))
            self._expression(arg.value, flow)
        if isinstance(func, cst.Attribute):
            self._expression(func.value, flow)

    def _callee_op(self, func: cst.BaseExpression, node: cst.Call, flow: Flow) -> None:
        if (
            isinstance(func, cst.Attribute)
            and self_attr(func.value) is None
            and not is_self(func.value)
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
            self._op(dotted(func) or f".{func.attr.value}", node, flow)
            return
        resolved = self.qualified(func)
        if resolved is not None:
            self._named_op(resolved, node, flow)

    def _named_op(self, name: str, node: cst.CSTNode, flow: Flow) -> None:
        if not name.startswith(_NOT_OPS) and name not in self.bound and not _builds_object(name):
            self._op(name, node, flow)

    def _op(self, name: str, node: cst.CSTNode, flow: Flow) -> None:
        self.ops.append(InlineOp(name, self.line(node), flow.in_loop))


def _builds_object(name: str) -> bool:
    """`Output(...)`, `DynamicCache(...)`: a class from outside torch made in forward (a
    dataclass result, a cache) is bookkeeping, not tensor work. torch's own classes stay ops:
    `nn.ReLU()(x)` does run work inline."""
    return name.rpartition(".")[2][:1].isupper() and not name.startswith("torch.")


class StatementHandler(Protocol):
    def __call__(self, walker: ClassWalker, node: cst.CSTNode, flow: Flow, /) -> None: ...


__all__ = ["CONTAINER_KINDS", "ClassWalker", "Flow", "container_kind"]
