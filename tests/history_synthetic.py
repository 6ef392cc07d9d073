"""Synthetic layer histories with steps known in advance, for the change-point tests and
benchmarks/bench_change_points.py.

A history is a layers x commits matrix of self times: each layer has its own level (log-uniform
from 10 us to 5 ms, as a model's small and big layers), every value is that level times
(1 + noise x N(0, 1)), independently per layer and commit; then the environment step multiplies
every layer from its commit on, and the layer step one layer (drawn per seed) from its commit on.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from hybridprof.history.change_points import Changes
from hybridprof.history.fingerprint import Machine
from hybridprof.history.snapshot import LayerFigures, Snapshot
from hybridprof.history.store import CommitRef, open_store

COMMITS, LAYERS, NOISE = 60, 40, 0.05
LAYER_STEP = (37, 0.15)  # at commit 37 (0-based: the first slower commit), +15%, one layer
ENVIRONMENT_STEP = (20, 0.10)  # at commit 20, +10%, every layer


@dataclass(frozen=True)
class Synthetic:
    values: np.ndarray  # layers x commits, us
    stepped: int  # the layer with the layer step


def synthetic_history(
    seed: int,
    commits: int = COMMITS,
    layers: int = LAYERS,
    noise: float = NOISE,
    layer_step: tuple[int, float] | None = LAYER_STEP,
    environment_step: tuple[int, float] | None = ENVIRONMENT_STEP,
    outliers: float = 0.0,
) -> Synthetic:
    """One seeded history; `outliers`: the share of values multiplied by 1.5-3 (a hiccup)."""
    rng = np.random.default_rng(seed)
    level = np.exp(rng.uniform(np.log(10.0), np.log(5000.0), layers))
    values = level[:, None] * (1.0 + noise * rng.standard_normal((layers, commits)))
    if environment_step is not None:
        at, size = environment_step
        values[:, at:] *= 1.0 + size
    stepped = int(rng.integers(layers))
    if layer_step is not None:
        at, size = layer_step
        values[stepped, at:] *= 1.0 + size
    if outliers:
        hit = rng.random((layers, commits)) < outliers
        values[hit] *= rng.uniform(1.5, 3.0, int(hit.sum()))
    return Synthetic(values, stepped)


@dataclass(frozen=True)
class Score:
    found: bool  # the layer step found within one commit, on the stepped layer, not environment
    environment: bool  # the environment step found within one commit, as environment
    false: int  # every other change point (layers' and environment's)


def score(changes: Changes, synthetic: Synthetic, tolerance: int = 1) -> Score:
    layer_at, env_at = LAYER_STEP[0], ENVIRONMENT_STEP[0]
    found = environment = False
    false = 0
    for row, steps in enumerate(changes.layers):
        for step in steps:
            hit = row == synthetic.stepped and abs(step.index - layer_at) <= tolerance
            if hit and not step.environment and not found:
                found = True
            elif step.environment and abs(step.index - env_at) <= tolerance:
                environment = True  # a layer's share of the environment step: labelled right
            else:
                false += 1
    for step in changes.environment:
        if abs(step.index - env_at) <= tolerance and not environment:
            environment = True
        elif abs(step.index - env_at) > tolerance:
            false += 1
    return Score(found, environment, false)


MACHINE = Machine("Test CPU @ 2.0GHz (2 logical cores)", "cpu", "2.13.0+cpu", 1)


def layer_paths(layers: int) -> list[str]:
    """A model's paths: blocks of four layers each (blocks.0.fc1, blocks.0.act, ...)."""
    names = ("fc1", "act", "fc2", "norm")
    classes = ("Linear", "ReLU", "Linear", "LayerNorm")
    return [f"blocks.{i // 4}.{names[i % 4]}:{classes[i % 4]}" for i in range(layers)]


def fill_history(
    db: Path,
    values: np.ndarray,
    machine: Machine = MACHINE,
    model: str = "net.py:Net",
    branch: str = "main",
    paths: list[str] | None = None,
    first_commit: int = 0,
) -> list[str]:
    """A history file holding `values` (layers x commits) as one session per commit, commits
    named by their number (as 40-hex "hashes") and dated a minute apart; returns the revs."""
    named = paths or layer_paths(values.shape[0])
    revs = []
    with open_store(db, create=True) as store:
        for c in range(values.shape[1]):
            layers = tuple(
                LayerFigures(p.split(":")[0], p.split(":")[1], float(v), share_pct=100 / len(named))
                for p, v in zip(named, values[:, c], strict=True)
                if np.isfinite(v)
            )
            rev = f"{first_commit + c + 1:04d}" + "ab" * 18
            digest = f"{db.name}-{model}-{machine.key()}-{branch}-{rev}"
            snap = Snapshot(digest, model, None, machine, "", 20, 1e3, "cpu", "stable", layers)
            store.add(
                snap,
                CommitRef(rev, branch, 1_700_000_000 + 60 * (first_commit + c), f"commit {c + 1}"),
            )
            revs.append(rev)
    return revs
