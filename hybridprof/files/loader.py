"""Import a user's model file by path, call its entry, and make its example inputs.

Every failure becomes a `ModelLoadError` (or `UsageError` for a bad `--input-shape`) whose message
names the problem and the fix; nothing here prints or exits.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import math
import os
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hybridprof.errors import ModelLoadError, UsageError

DEFAULT_ENTRY = "build_model"
DEFAULT_INPUTS = "example_inputs"

_DTYPES = {
    "float": "float32",
    "float32": "float32",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    "float64": "float64",
    "double": "float64",
    "long": "int64",
    "int64": "int64",
    "int": "int64",
    "int32": "int32",
    "bool": "bool",
}


@dataclass(frozen=True)
class ModelInputs:
    """Positional and keyword arguments for one forward of the root module."""

    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)

    def describe(self) -> str:
        parts = [_describe_value(a) for a in self.args]
        parts += [f"{k}={_describe_value(v)}" for k, v in self.kwargs.items()]
        return ", ".join(parts)


@dataclass(frozen=True)
class LoadedModel:
    module: Any  # torch.nn.Module; typed Any so this file imports torch lazily
    inputs: ModelInputs | None
    file: str
    entry: str
    sha256: str


# A model file bigger than this is refused before it is read: no hand-written or generated model
# file comes near it (Hugging Face's largest modeling files are under 1 MiB), while compiling a
# Python file takes several times its size in memory (a 600 MB file ended in MemoryError).
MAX_MODEL_BYTES = 16 * 2**20


def too_big(what: str, size: int) -> str:
    """The refusal of a model file of `size` bytes (over MAX_MODEL_BYTES)."""
    return (
        f"{what} holds {size / 2**20:,.0f} MiB, more than hybridprof reads as a model file "
        f"({MAX_MODEL_BYTES // 2**20} MiB); give the file that defines the model"
    )


def file_sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def read_model_source(path: str | Path) -> str:
    """The file's text, after checking it exists and is valid Python (file:line:col on error)."""
    file = Path(path)
    if not file.exists():
        raise ModelLoadError(f"model file '{file}' not found; check the path")
    if not file.is_file():
        raise ModelLoadError(f"model file '{file}' is not a file; give a .py file")
    try:
        source = _bounded_text(file)
    except (OSError, UnicodeDecodeError) as exc:
        raise ModelLoadError(
            f"cannot read model file '{file}': {exc}; give a UTF-8 Python source file"
        ) from exc
    try:
        compile(source, str(file), "exec")
    except SyntaxError as exc:
        where = f"{file}:{exc.lineno or 0}:{(exc.offset or 0)}"
        raise ModelLoadError(f"syntax error in {where}: {exc.msg}; fix the model file") from exc
    except ValueError as exc:  # e.g. null bytes in the source
        raise ModelLoadError(f"model file '{file}' is not Python source: {exc}") from exc
    return source


def _bounded_text(file: Path) -> str:
    """The file's text, its size checked first (and again while reading: it may grow)."""
    with file.open("rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size > MAX_MODEL_BYTES:
            raise ModelLoadError(too_big(f"model file '{file}'", size))
        data = handle.read(MAX_MODEL_BYTES + 1)
    if len(data) > MAX_MODEL_BYTES:
        raise ModelLoadError(too_big(f"model file '{file}'", len(data)))
    return data.decode("utf-8")


def import_model_file(
    path: str | Path, tag: str = "", siblings: Path | None = None
) -> types.ModuleType:
    """Import the file as a uniquely named module (kept in sys.modules so `inspect` finds
    sources). A `tag` makes it an import of its own (`diff --run` loads two models, maybe of one
    file, each with its own module state); `siblings`: a folder whose modules it may import too
    (the checkout a file read from a git revision came from)."""
    file = Path(path).resolve()
    read_model_source(file)
    suffix = f"_{_safe_identifier(tag)}" if tag else ""
    name = f"hybridprof_user_{_safe_identifier(file.stem)}_{file_sha256(file)[:10]}{suffix}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise ModelLoadError(f"cannot import '{file}'; give a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    folders = [file.parent, *([siblings] if siblings is not None else [])]
    try:
        with contextlib.ExitStack() as stack:
            for folder in reversed(folders):  # the file's own folder first on sys.path
                stack.enter_context(_folder_on_sys_path(folder))
            stack.enter_context(keeping_cwd())
            spec.loader.exec_module(module)
    except ImportError as exc:
        del sys.modules[name]
        missing = getattr(exc, "name", None)
        fix = f"install '{missing}' or fix the import" if missing else "fix the import"
        raise ModelLoadError(f"importing {file.name} failed: {exc}; {fix}") from exc
    except BaseException as exc:  # SystemExit and friends from user code too
        del sys.modules[name]
        if isinstance(exc, KeyboardInterrupt):
            raise
        raise ModelLoadError(
            f"importing {file.name} raised {type(exc).__name__}: {exc}; fix the model file"
        ) from exc
    return module


def load_model(
    path: str | Path,
    entry: str = DEFAULT_ENTRY,
    inputs_name: str | None = None,
    input_shapes: Sequence[str] = (),
    *,
    tag: str = "",
    siblings: Path | None = None,
) -> LoadedModel:
    """Import `path` (`tag`, `siblings`: see `import_model_file`), call `entry()`, and resolve the
    example inputs (see `resolve_inputs`)."""
    import torch

    module = import_model_file(path, tag, siblings)
    factory = _find_callable(module, entry, path, "entry")
    result = _call_user(factory, f"{entry}()")
    example: Any = None
    if isinstance(result, tuple) and len(result) == 2 and isinstance(result[0], torch.nn.Module):
        result, example = result
    if not isinstance(result, torch.nn.Module):
        raise ModelLoadError(_not_a_module(entry, result))
    inputs = resolve_inputs(module, path, inputs_name, input_shapes, example)
    return LoadedModel(result, inputs, str(Path(path)), entry, file_sha256(path))


def resolve_inputs(
    module: types.ModuleType,
    path: str | Path,
    inputs_name: str | None,
    input_shapes: Sequence[str],
    from_entry: Any,
) -> ModelInputs | None:
    """Inputs by precedence: --inputs NAME, --input-shape, the entry's tuple, `example_inputs()`."""
    if inputs_name:
        function = _find_callable(module, inputs_name, path, "inputs function")
        return as_model_inputs(_call_user(function, f"{inputs_name}()"), f"{inputs_name}()")
    if input_shapes:
        return ModelInputs(tuple(random_tensor(spec) for spec in input_shapes))
    if from_entry is not None:
        return as_model_inputs(from_entry, "the entry's example inputs")
    function = getattr(module, DEFAULT_INPUTS, None)
    if callable(function):
        return as_model_inputs(_call_user(function, f"{DEFAULT_INPUTS}()"), f"{DEFAULT_INPUTS}()")
    return None


def as_model_inputs(value: Any, what: str) -> ModelInputs:
    """A tuple/list is positional args, a dict keyword args, anything else one positional arg."""
    if isinstance(value, ModelInputs):
        return value
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise ModelLoadError(f"{what} returned a dict with non-string keys; use argument names")
        return ModelInputs((), dict(value))
    if isinstance(value, tuple | list):
        return ModelInputs(tuple(value))
    if value is None:
        raise ModelLoadError(f"{what} returned None; return a tensor, a tuple or a dict of inputs")
    return ModelInputs((value,))


def parse_shape(spec: str) -> tuple[tuple[int, ...], str]:
    """'1,3,224,224' or '1x128:long' -> ((1, 3, 224, 224), 'float32')."""
    shown = _shown_spec(spec)
    text, _, dtype = spec.strip().partition(":")
    dtype_name = _DTYPES.get(dtype.strip().lower() or "float")
    if dtype_name is None:
        raise UsageError(
            f"bad --input-shape '{shown}': unknown dtype '{_shown_spec(dtype)}'; use one of "
            f"{', '.join(_DTYPES)}"
        )
    parts = text.replace("x", ",").split(",")  # `8x3x64x64x` has an empty last part: refused
    try:
        dims = tuple(int(p) for p in parts)
    except ValueError:  # not a number, int("") too, or more digits than Python converts (4,300)
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        raise UsageError(
            f"bad --input-shape '{shown}': give positive integers separated by commas or x, "
            "e.g. --input-shape 1,3,224,224 or 8x128:long"
        )
    if max(dims) > MAX_INT64 or math.prod(dims) > MAX_INT64:
        raise UsageError(
            f"bad --input-shape '{shown}': a dimension or the number of elements is beyond "
            "torch's limit (2**63 - 1); give a smaller shape"
        )
    return dims, dtype_name


MAX_INT64 = 2**63 - 1  # torch's sizes are int64: anything above fails inside torch's C++


def _shown_spec(spec: str) -> str:
    """A shape as the user typed it, cut to a length an error line can carry."""
    return spec if len(spec) <= 60 else spec[:57] + "..."


def random_tensor(spec: str) -> Any:
    """A tensor for `spec`: uniform [0, 1) floats, or small non-negative ints (safe as indices)."""
    import torch

    dims, dtype_name = parse_shape(spec)
    dtype = getattr(torch, dtype_name)
    try:
        if dtype.is_floating_point:
            return torch.rand(dims, dtype=dtype)
        if dtype == torch.bool:
            return torch.zeros(dims, dtype=torch.bool)
        return torch.randint(0, 2, dims, dtype=dtype)
    except (RuntimeError, MemoryError, OverflowError) as exc:
        size = math.prod(dims) * torch.empty((), dtype=dtype).element_size()
        raise UsageError(
            f"--input-shape '{_shown_spec(spec)}' needs {size / 2**30:,.1f} GiB, which cannot be "
            f"allocated here ({type(exc).__name__}); give a smaller shape"
        ) from exc


def _not_a_module(entry: str, result: Any) -> str:
    import torch

    if isinstance(result, type) and issubclass(result, torch.nn.Module):
        return (
            f"{entry}() returned the class {result.__name__}, not an instance; "
            f"return {result.__name__}(...)"
        )
    return (
        f"{entry}() returned {type(result).__name__}, not a torch.nn.Module; "
        "return the model (or (model, example_inputs))"
    )


def find_callable(module: types.ModuleType, name: str, path: str | Path, what: str) -> Any:
    """`name` in the imported file or module; a one-line error listing its callables if it is
    not there or not callable (`what` names it: "entry", "--fsdp-wrap function")."""
    return _find_callable(module, name, path, what)


def _find_callable(module: types.ModuleType, name: str, path: str | Path, what: str) -> Any:
    value = getattr(module, name, None)
    if callable(value):
        return value
    available = sorted(
        n
        for n, v in vars(module).items()
        if callable(v)
        and not n.startswith("_")
        and getattr(v, "__module__", None) == module.__name__
    )
    listing = ", ".join(available) if available else "none"
    problem = "is not callable" if value is not None else "not found"
    raise ModelLoadError(
        f"{what} '{name}' {problem} in {Path(path).name}; callables there: {listing}"
    )


def _call_user(function: Any, what: str) -> Any:
    try:
        with keeping_cwd():
            return function()
    except KeyboardInterrupt:
        raise
    except BaseException as exc:
        name = what.removesuffix("()")
        raise ModelLoadError(
            f"{what} raised {type(exc).__name__}: {exc}; fix {name} in the model file"
        ) from exc


@contextlib.contextmanager
def keeping_cwd() -> Iterator[None]:
    """User code that changes the working directory (os.chdir) gets it changed back afterwards:
    relative paths the user gave (the model file, -o, --report, --trace) must keep their meaning."""
    before = os.getcwd()
    try:
        yield
    finally:
        if os.getcwd() != before:
            os.chdir(before)


@contextlib.contextmanager
def _folder_on_sys_path(folder: Path) -> Iterator[None]:
    """The model's folder first on sys.path while it imports (for its sibling modules), then not."""
    entry = str(folder)
    sys.path.insert(0, entry)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(entry)


def _safe_identifier(text: str) -> str:
    cleaned = "".join(ch if ch.isalnum() else "_" for ch in text)
    return cleaned or "model"


def _describe_value(value: Any) -> str:
    shape = getattr(value, "shape", None)
    if shape is not None:
        return "x".join(str(d) for d in shape) or "scalar"
    return type(value).__name__
