"""Which module of the model is at which path, for the counting pass: each module object at its
canonical (first) path, in tree order; a TorchScript module is one opaque module."""

from __future__ import annotations

from torch import nn

from hybridprof.planner.module_tree import is_scripted, named_modules


class ModulePaths:
    """Each module object's canonical path (its first), in tree order; TorchScript stays opaque."""

    def __init__(self, model: nn.Module) -> None:
        self._by_id: dict[int, tuple[nn.Module, str]] = {}
        for path, module in named_modules(model):
            self._by_id.setdefault(id(module), (module, path))

    def items_in_order(self) -> list[tuple[nn.Module, str]]:
        return [(m, p) for m, p in self._by_id.values() if hookable(m)]

    def every_module(self) -> list[tuple[nn.Module, str]]:
        return list(self._by_id.values())

    def in_order(self) -> list[str]:
        return [p for _, p in self._by_id.values()]

    def scripted(self) -> list[str]:
        return [p for m, p in self._by_id.values() if not hookable(m)]

    def path_of(self, module: nn.Module) -> str | None:
        entry = self._by_id.get(id(module))
        return None if entry is None else entry[1]


def hookable(module: nn.Module) -> bool:
    # A scripted module's own forward hooks are TorchScript-only: its forward is wrapped instead.
    return not is_scripted(module)


def parameter_owners(model: nn.Module, paths: ModulePaths) -> dict[int, str]:
    owners: dict[int, str] = {}
    for module, path in paths.every_module():
        # a TorchScript module is one layer: it owns its hidden children's parameters too
        for parameter in module.parameters(recurse=not hookable(module)):
            owners.setdefault(id(parameter), path)
    return owners


def with_ancestors(path: str) -> tuple[str, ...]:
    if path == "":
        return ("",)
    parts = path.split(".")
    return ("", *(".".join(parts[: i + 1]) for i in range(len(parts))))


__all__ = ["ModulePaths", "hookable", "parameter_owners", "with_ancestors"]
