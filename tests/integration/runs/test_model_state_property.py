"""Property: whatever the module tree, profiling leaves the model as an unprofiled run would.

Hypothesis builds trees of random depth and fan-out from Linear, BatchNorm1d, Dropout and ReLU
leaves (all 4 features wide, so any composition runs), with shared children, children called
twice, children never called, a module that raises at a random point, odd names, and random
train/eval and frozen flags. For every strategy, with and without backward, both through
`hybridprof.profile()` and a `Profile` with-block, it checks: no instance attribute left, the
state_dict bitwise equal (to before, or to an unprofiled twin that ran the same code), training and
requires_grad flags and .grads as before, outputs bitwise equal to the twin's, and call counts equal
to a count made with forward hooks.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from torch import nn

import hybridprof
from hybridprof.errors import HybridprofError, UsageError
from hybridprof.runtime.basics.patching import live_patches
from hybridprof.runtime.strategies import SPECS

ODD_NAMES = ("fc", "<b>", "x y", "é", "\x1b[31m", "0", "_", "a\u202eb")
LEAVES = ("linear", "bn", "dropout", "relu", "raise")


class Boom(Exception):
    pass


class Raiser(nn.Module):
    """Raises on its `at`-th call within one forward of the tree (the root resets the count)."""

    def __init__(self, at: int, counter: list[int]) -> None:
        super().__init__()
        self.at = at
        self.counter = counter

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.counter[0] += 1
        if self.counter[0] == self.at:
            raise Boom("raised on purpose")
        return x


class Node(nn.Module):
    """Calls its children in order, each `repeats[name]` times (0: never called)."""

    def __init__(self, repeats: dict[str, int], counter: list[int] | None = None) -> None:
        super().__init__()
        self.repeats = repeats
        self.counter = counter  # the root's: reset at every forward

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.counter is not None:
            self.counter[0] = 0
        for name, module in self.named_children():
            for _ in range(self.repeats[name]):
                x = module(x)
        return x


@dataclass(frozen=True)
class Tree:
    kind: str  # a leaf kind or "node"
    children: tuple[tuple[str, Tree, int], ...] = ()  # (name, subtree, repeats)
    raise_at: int = 1
    share: bool = False  # reuse the previous leaf object of this kind instead of a new one


def trees() -> st.SearchStrategy[Tree]:
    leaf = st.builds(
        Tree,
        kind=st.sampled_from(LEAVES),
        raise_at=st.integers(1, 3),
        share=st.booleans(),
    )

    def nodes(children: st.SearchStrategy[Tree]) -> st.SearchStrategy[Tree]:
        entry = st.tuples(st.sampled_from(ODD_NAMES), children, st.integers(0, 2))
        unique = st.lists(entry, min_size=1, max_size=3, unique_by=lambda e: e[0])
        return st.builds(Tree, kind=st.just("node"), children=unique.map(tuple))

    return st.recursive(leaf, nodes, max_leaves=6).filter(lambda t: t.kind == "node")


def build(tree: Tree, counter: list[int], made: dict[str, nn.Module], root: bool) -> nn.Module:
    if tree.kind == "node":
        node = Node({name: reps for name, _, reps in tree.children}, counter if root else None)
        for name, child, _ in tree.children:
            node.add_module(name, build(child, counter, made, root=False))
        return node
    if tree.share and tree.kind in made:
        return made[tree.kind]
    module: nn.Module = {
        "linear": lambda: nn.Linear(4, 4),
        "bn": lambda: nn.BatchNorm1d(4),
        "dropout": lambda: nn.Dropout(0.5),
        "relu": lambda: nn.ReLU(),
        "raise": lambda: Raiser(tree.raise_at, counter),
    }[tree.kind]()
    made[tree.kind] = module
    return module


def make_model(tree: Tree, flags: list[bool]) -> nn.Module:
    torch.manual_seed(0)
    model = build(tree, [0], {}, root=True)
    for i, module in enumerate(model.modules()):
        module.training = flags[i % len(flags)]
    for i, parameter in enumerate(model.parameters()):
        parameter.requires_grad_(flags[(i + 1) % len(flags)])
        if flags[(i + 2) % len(flags)]:
            parameter.grad = torch.full_like(parameter, float(i))
    return model


def snapshot(model: nn.Module) -> dict[str, Any]:
    return {
        "state": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "training": [m.training for m in model.modules()],
        "requires_grad": [p.requires_grad for p in model.parameters()],
        "grads": [None if p.grad is None else p.grad.clone() for p in model.parameters()],
        "dicts": [sorted(vars(m)) for m in model.modules()],
    }


def assert_same(expected: dict[str, Any], model: nn.Module) -> None:
    got = snapshot(model)
    assert got["dicts"] == expected["dicts"]  # no instance attribute left (or lost)
    assert got["training"] == expected["training"]
    assert got["requires_grad"] == expected["requires_grad"]
    assert expected["state"].keys() == got["state"].keys()
    for key, value in expected["state"].items():
        assert torch.equal(value, got["state"][key]), key
    for old, new in zip(expected["grads"], got["grads"], strict=True):
        assert (old is None) == (new is None)
        assert old is None or torch.equal(old, new)
    assert not live_patches()


def hook_counts(model: nn.Module, run: Any) -> tuple[Counter[str], BaseException | None]:
    """Calls per canonical path, counted with forward pre-hooks while `run()` runs."""
    canonical: dict[int, str] = {}
    for path, module in model.named_modules():
        canonical.setdefault(id(module), path)
    counts: Counter[str] = Counter()
    handles = [
        m.register_forward_pre_hook(lambda m, args: counts.update([canonical[id(m)]]))
        for m in {id(m): m for m in model.modules()}.values()
    ]
    failure: BaseException | None = None
    try:
        run()
    except Boom as exc:
        failure = exc
    finally:
        for handle in handles:
            handle.remove()
    return counts, failure


def step(model: nn.Module, x: torch.Tensor, backward: bool) -> torch.Tensor:
    torch.manual_seed(1)
    out: torch.Tensor = model(x)
    if backward and out.requires_grad:
        out.sum().backward()
    return out


def check_profile_function(tree: Tree, flags: list[bool], strategy: str, backward: bool) -> None:
    model = make_model(tree, flags)
    x = torch.rand(3, 4)
    before = snapshot(model)
    twin = twin_of(model)
    expected, failure = hook_counts(twin, lambda: step(twin, x, False))
    no_backward = backward and not output_trains(model, x)  # nothing to train: refused
    try:
        session = hybridprof.profile(
            model,
            x,
            strategy=strategy,
            backward=backward,
            warmup=1,
            iters=1,
            paths=all_paths(model),
        )
    except UsageError:
        assert backward and strategy != "session"  # backward needs an attributing strategy
    except HybridprofError as exc:
        assert failure is not None or no_backward, exc
    else:
        assert failure is None and not no_backward
        assert {r.path: r.calls for r in session.records if r.calls} == dict(expected)
        assert not set(session.never_called) & set(expected)
    assert_same(before, model)


def check_profile_block(tree: Tree, flags: list[bool], strategy: str, backward: bool) -> None:
    model = make_model(tree, flags)
    twin = twin_of(model)
    x = torch.rand(3, 4)
    before_dicts = snapshot(model)["dicts"]
    twin_out: list[torch.Tensor] = []
    expected, twin_failure = hook_counts(twin, lambda: twin_out.append(step(twin, x, backward)))
    failure: BaseException | None = None
    out: list[torch.Tensor] = []
    with hybridprof.Profile(model, strategy=strategy, paths=all_paths(model)) as prof:
        try:
            out.append(step(model, x, backward))
        except Boom as exc:
            failure = exc
    assert (failure is None) == (twin_failure is None)
    if failure is None:
        assert torch.equal(out[0], twin_out[-1])
        records = prof.session().records
        assert {r.path: r.calls for r in records if r.calls} == dict(expected)
    assert snapshot(model)["dicts"] == before_dicts
    assert_same(snapshot(twin), model)  # state, flags and grads as the unprofiled run left them


def twin_of(model: nn.Module) -> nn.Module:
    """An unprofiled copy, .grads included (a Parameter's deepcopy leaves its grad behind)."""
    twin = copy.deepcopy(model)
    for mine, theirs in zip(model.parameters(), twin.parameters(), strict=True):
        theirs.grad = None if mine.grad is None else mine.grad.clone()
    return twin


def output_trains(model: nn.Module, x: torch.Tensor) -> bool:
    """Whether the output depends on a parameter (else a training step is refused)."""
    probe = copy.deepcopy(model)
    for parameter in probe.parameters():
        parameter.requires_grad_(True)
    try:
        return bool(probe(x).requires_grad)
    except Boom:
        return True  # the run fails first


def all_paths(model: nn.Module) -> list[str]:
    return [path for path, _ in model.named_modules()]


@settings(
    max_examples=6,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(tree=trees(), flags=st.lists(st.booleans(), min_size=3, max_size=6))
def test_profiling_leaves_the_model_as_an_unprofiled_run_would(
    tree: Tree, flags: list[bool]
) -> None:
    for spec in SPECS:
        for backward in (False, True):
            check_profile_function(tree, flags, spec.name, backward)
            check_profile_block(tree, flags, spec.name, backward)
