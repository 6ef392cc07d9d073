"""`run --fsdp`'s units and the user's wrap function (no process group: what is decided before
any sharding, and the one-line refusals)."""

from __future__ import annotations

from pathlib import Path

import pytest
from torch import nn

from hybridprof.errors import ModelLoadError, UsageError
from hybridprof.runtime.distributed.fsdp_wrap import default_units, load_wrap, shard
from tests.paths import FIXTURES


class Tower(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(10, 4)
        self.layers = nn.ModuleList([nn.Linear(4, 4), nn.Sequential(nn.Linear(4, 4))])
        self.heads = nn.ModuleDict({"a": nn.ModuleList([nn.Linear(4, 2)])})


def test_the_default_units_are_each_child_of_every_module_list() -> None:
    assert default_units(Tower()) == ["layers.0", "layers.1", "heads.a.0"]
    assert default_units(nn.Linear(2, 2)) == []  # the root alone is then the one unit


def test_a_wrap_function_is_found_in_a_file_or_a_module() -> None:
    wrap = load_wrap(f"{FIXTURES / 'fsdp_run.py'}:wrap")
    assert wrap.__name__ == "wrap"
    assert load_wrap("os.path:basename")("a/b") == "b"


@pytest.mark.parametrize(
    ("spec", "error", "said"),
    [
        ("no_colon", UsageError, "names no function; give FILE.py:FUNCTION or module:FUNCTION"),
        ("surely_no_such_module_x:f", UsageError, "module 'surely_no_such_module_x' cannot be"),
        (f"{FIXTURES / 'fsdp_run.py'}:nope", ModelLoadError, "'nope' not found in fsdp_run.py"),
    ],
)
def test_a_wrap_that_is_not_there_is_a_one_line_error(spec: str, error: type, said: str) -> None:
    with pytest.raises(error, match=said) as caught:
        load_wrap(spec)
    assert "\n" not in str(caught.value)


def test_a_wrap_that_shards_nothing_or_returns_another_model_is_refused(tmp_path: Path) -> None:
    import torch

    model = Tower()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    with pytest.raises(UsageError, match=r"--fsdp-wrap w.py:f sharded nothing: call fully_shard"):
        shard(model, torch.device("cpu"), lambda m: None, "w.py:f")
    with pytest.raises(UsageError, match="returned another object than the model"):
        shard(model, torch.device("cpu"), lambda m: Tower(), "w.py:f")
    with pytest.raises(UsageError, match=r"--fsdp-wrap w.py:f raised ValueError: bad; fix"):
        shard(model, torch.device("cpu"), _raises, "w.py:f")
    assert all(torch.equal(p, before[name]) for name, p in model.named_parameters())


def _raises(model: nn.Module) -> None:
    raise ValueError("bad")
