"""Parents that use a child's parameters without calling it.

nn.MultiheadAttention holds `out_proj` (a Linear) but never calls it: its forward hands
`out_proj.weight` and `out_proj.bias` to `F.multi_head_attention_forward`, which does the whole
attention. A leaves-only selection (torchprof's) would then measure `out_proj`, which never runs,
and put the attention's time in no row. Such a parent does its child's work itself, so a
leaves-only selection takes it as a leaf in effect.

Read from the class's `forward` source, and only on positive evidence: a child counts as held
when the source names it only as `self.<child>.<one of its own parameters or buffers>`. Any other
use (a call, passing the module, a loop over `self.children()`, `getattr`) counts as a call.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

# A forward that reaches its children in a way the source does not spell out by name.
_INDIRECT = re.compile(r"\b(children|named_children|modules|named_modules)\(|_modules\b|getattr\(")


def held_children(module: nn.Module) -> tuple[str, ...]:
    """The children of `module` whose parameters its forward uses without calling them."""
    if "forward" in vars(module) or isinstance(module, torch.jit.ScriptModule):
        return ()  # an instance-level or TorchScript forward: no Python class source to read
    source = _forward_source(type(module).forward)
    if source is None or _INDIRECT.search(source):
        return ()
    return tuple(
        name for name, child in module.named_children() if _only_weights_used(source, name, child)
    )


def _only_weights_used(source: str, name: str, child: nn.Module) -> bool:
    own = {n for n, _ in child.named_parameters(recurse=False)}
    own |= {n for n, _ in child.named_buffers(recurse=False)}
    uses = re.findall(rf"\bself\.{re.escape(name)}\b(?:\.(\w+))?", source)
    return bool(uses) and all(attribute in own for attribute in uses)


@functools.lru_cache(maxsize=512)
def _forward_source(forward: Callable[..., Any]) -> str | None:
    """A class's forward as text, once per function (None where Python has no source)."""
    try:
        return inspect.getsource(forward)
    except (OSError, TypeError):
        return None


__all__ = ["held_children"]
