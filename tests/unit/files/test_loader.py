"""Loading model files: every failure is one line naming the problem and the fix."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch

from hybridprof.errors import ModelLoadError, UsageError
from hybridprof.files.loader import load_model, parse_shape, read_model_source


def write(tmp_path: Path, source: str, name: str = "net_def.py") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


GOOD = """
    import torch
    from torch import nn

    def build_model():
        return nn.Sequential(nn.Linear(4, 3), nn.ReLU())

    def example_inputs():
        return (torch.rand(2, 4),)

    def keyword_inputs():
        return {"input": torch.rand(5, 4)}
"""


def test_loads_module_and_default_example_inputs(tmp_path: Path) -> None:
    loaded = load_model(write(tmp_path, GOOD))
    assert isinstance(loaded.module, torch.nn.Sequential)
    assert loaded.inputs is not None and loaded.inputs.args[0].shape == (2, 4)
    assert len(loaded.sha256) == 64


def test_inputs_precedence_named_function_then_shapes(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD)
    named = load_model(path, inputs_name="keyword_inputs").inputs
    assert named is not None and named.kwargs["input"].shape == (5, 4)
    shaped = load_model(path, input_shapes=["3,4"]).inputs
    assert shaped is not None and shaped.args[0].shape == (3, 4)


def test_entry_may_return_model_and_inputs(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
        import torch
        def make():
            return torch.nn.Linear(2, 2), torch.rand(1, 2)
    """,
    )
    loaded = load_model(path, entry="make")
    assert loaded.inputs is not None and loaded.inputs.args[0].shape == (1, 2)


def test_sys_path_is_restored_and_sibling_imports_work(tmp_path: Path) -> None:
    (tmp_path / "sibling_layers.py").write_text("import torch\nLayer = torch.nn.Linear\n")
    path = write(
        tmp_path,
        """
        from sibling_layers import Layer
        def build_model():
            return Layer(2, 2)
    """,
    )
    before = list(sys.path)
    load_model(path)
    assert sys.path == before


@pytest.mark.parametrize(
    "source, kwargs, message",
    [
        ("def build_model(:\n    pass\n", {}, r"syntax error in .*net_def.py:1:\d+"),
        (
            GOOD,
            {"entry": "nope"},
            "entry 'nope' not found in net_def.py; callables there: "
            "build_model, example_inputs, keyword_inputs",
        ),
        (
            "def build_model():\n    raise RuntimeError('no weights')\n",
            {},
            r"build_model\(\) raised RuntimeError: no weights",
        ),
        ("def build_model():\n    return 42\n", {}, "returned int, not a torch.nn.Module"),
        ("import not_a_real_package_xyz\n", {}, "No module named 'not_a_real_package_xyz'"),
        ("raise SystemExit(3)\n", {}, "importing net_def.py raised SystemExit"),
        (GOOD, {"inputs_name": "missing_inputs"}, "inputs function 'missing_inputs' not found"),
    ],
)
def test_load_errors_are_one_line(tmp_path: Path, source: str, kwargs: dict, message: str) -> None:
    path = write(tmp_path, source)
    with pytest.raises(ModelLoadError, match=message) as info:
        load_model(path, **kwargs)
    assert "\n" not in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match="not found; check the path"):
        read_model_source(tmp_path / "absent.py")


@pytest.mark.parametrize(
    "spec, expected",
    [("1,3,224,224", ((1, 3, 224, 224), "float32")), ("2x16:long", ((2, 16), "int64"))],
)
def test_parse_shape(spec: str, expected: tuple) -> None:
    assert parse_shape(spec) == expected


@pytest.mark.parametrize("spec", ["", "a,b", "1,-3", "0", "1,2:complex99"])
def test_bad_shape_is_a_usage_error(spec: str) -> None:
    with pytest.raises(UsageError, match="bad --input-shape"):
        parse_shape(spec)


def test_a_huge_model_file_is_refused_by_its_size_before_it_is_read(tmp_path: Path) -> None:
    from hybridprof.files.loader import MAX_MODEL_BYTES

    big = tmp_path / "big.py"
    with big.open("wb") as handle:
        handle.truncate(MAX_MODEL_BYTES + 1)  # sparse: no disk, and reading it would be slow
    with pytest.raises(ModelLoadError) as refused:
        read_model_source(big)
    message = str(refused.value)
    assert "\n" not in message and "more than hybridprof reads" in message, message
