"""The data model's JSON round trip: frozen dataclasses to plain JSON and back, checked on the way
in.

Generic (it knows no class of the data model): `datamodel.py` calls it for `to_json`/`from_json`.
A class may write itself in a form of its own (a compact string, a dict without its empty parts):
it then has a `json_encode()` method, and a `json_decode(data)` class method if the default
(dataclass) reading does not fit that form.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from enum import Enum
from typing import Any, Literal, TypeVar

from hybridprof.errors import SessionFileError

T = TypeVar("T")


def to_plain(obj: Any) -> Any:
    """Dataclasses to dicts, tuples to lists, recursively (or what their `json_encode` gives)."""
    if hasattr(obj, "json_encode"):
        return obj.json_encode()
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_plain(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, tuple | list):
        return [to_plain(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): to_plain(v) for k, v in obj.items()}
    return obj


def from_plain(tp: Any, data: Any) -> Any:
    """Build an instance of type `tp` (a dataclass or a typing form) from `to_plain` output."""
    kind = _kind(tp)
    if kind == "scalar":
        return expect(tp, data, tp)
    if kind == "float":
        return float(expect(int | float, data, tp))
    if kind == "union":
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        return None if data is None else _first_fitting(options, data, tp)
    if kind == "literal":
        if isinstance(data, bool) or data not in typing.get_args(tp):
            raise ValueError(f"expected one of {typing.get_args(tp)}, got {data!r}")
        return data
    if kind == "decode":
        return tp.json_decode(data)
    if kind == "tuple":
        args = typing.get_args(tp)
        item = args[0] if args else Any
        return tuple(from_plain(item, v) for v in expect(list, data, tp))
    if kind == "dataclass":
        return _dataclass_from_plain(tp, data)
    if kind == "enum":
        return tp(expect(str, data, tp))
    return data


@functools.cache
def _kind(tp: Any) -> str:
    """How `from_plain` reads a type, decided once per type (reading a 2,000-layer session asks
    hundreds of thousands of times)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return "union"
    if origin is Literal:
        return "literal"
    if isinstance(tp, type) and hasattr(tp, "json_decode"):
        return "decode"
    if origin is tuple:
        return "tuple"
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return "dataclass"
    if isinstance(tp, type) and issubclass(tp, Enum):
        return "enum"
    if tp is float:
        return "float"
    if tp in (int, str, bool):
        return "scalar"
    return "any"


def _first_fitting(options: list[Any], data: Any, tp: Any) -> Any:
    """The value as the first of a union's types that takes it (`int | Literal["auto"]`)."""
    errors = []
    for option in options:
        try:
            return from_plain(option, data)
        except ValueError as exc:
            errors.append(str(exc))
    raise ValueError(" or ".join(errors) or f"no type of {tp} fits {data!r}")


def _dataclass_from_plain(cls: type[T], data: Any) -> T:
    fields_data = expect(dict, data, cls)
    kwargs: dict[str, Any] = {}
    for name, hint, required in _field_types(cls):  # type: ignore[arg-type]
        if name in fields_data:
            value = fields_data[name]
            # the common cases first, checked exactly (a bool is not an int here)
            if (hint is str or hint is int) and type(value) is hint:
                kwargs[name] = value
            elif hint is float and type(value) in (float, int):
                kwargs[name] = float(value)
            else:
                kwargs[name] = from_plain(hint, value)
        elif required:
            raise ValueError(f"{cls.__name__} is missing field '{name}'")
    return cls(**kwargs)


@functools.cache
def _field_types(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """(name, resolved type, required) of each field, once per class: resolving the string
    annotations (`get_type_hints`) per record made reading a 2,000-layer session take seconds."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (
            f.name,
            hints[f.name],
            f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def expect(tp: Any, value: Any, what: Any) -> Any:
    if isinstance(value, bool) and tp in (int, float, int | float):
        raise ValueError(f"expected a number for {what}, got a bool")
    if not isinstance(value, tp):
        raise ValueError(f"expected {getattr(what, '__name__', what)}, got {type(value).__name__}")
    return value


def dump(kind: str, obj: Any, omit_none: tuple[str, ...] = ()) -> str:
    """The object as JSON; optional parts named in `omit_none` are left out when None."""
    plain = {k: v for k, v in to_plain(obj).items() if not (k in omit_none and v is None)}
    return json.dumps({"kind": kind, **plain}, indent=1, sort_keys=False)


def load(kind: str, cls: type[T], text: str, schema_version: int) -> T:
    """`cls` from JSON text that `dump(kind, ...)` wrote, checked: SessionFileError if it is not."""
    try:
        data = json.loads(text, parse_constant=_no_constant)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise SessionFileError(
            f"not a JSON file ({exc}); give a file written by hybridprof"
        ) from exc
    except ValueError as exc:  # NaN or Infinity
        raise SessionFileError(
            f"corrupt {kind} file: {exc}; write it again with hybridprof"
        ) from exc
    except RecursionError as exc:
        raise SessionFileError(
            f"corrupt {kind} file: nested too deeply to be one written by hybridprof"
        ) from exc
    _check_bounds(kind, data)
    if not isinstance(data, dict) or data.get("kind") != kind:
        raise SessionFileError(f'not a {kind} file (no "kind": "{kind}" field)')
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise SessionFileError(
            f"corrupt {kind} file: schema_version {version!r} is not a positive integer; "
            "write it again with hybridprof"
        )
    if version > schema_version:
        raise SessionFileError(
            f"{kind} schema version {version!r} is newer than this hybridprof reads "
            f"({schema_version}); upgrade hybridprof to read it"
        )
    data.pop("kind")
    try:
        return typing.cast(T, from_plain(cls, data))
    except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
        raise SessionFileError(
            f"corrupt {kind} file: {exc}; write it again with hybridprof"
        ) from exc


# Bounds on what a file written by hybridprof holds (1e18 is 31,000 years in us, an exabyte, a
# million seconds of a petaflop machine); beyond them a file is corrupt or hostile, and renderers
# would fail on it (NaN, infinity) or take minutes (a 50 MB name in a PDF).
MAX_NUMBER = 1e18
MAX_TEXT = 100_000
# Per-iteration series are texts of numbers ("84.2 85 83.9"), as long as the run; they are never
# drawn as text, and their numbers are checked where they are read (`Series.decode`).
_NUMBERS = re.compile(r"[-0-9. ]*")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number hybridprof writes")


def _check_bounds(kind: str, data: Any) -> None:
    """SessionFileError naming the first number or text out of bounds (walked without recursion)."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((f"{where}.{key}", item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str) and len(value) > MAX_TEXT and not _NUMBERS.fullmatch(value):
            raise SessionFileError(
                f"corrupt {kind} file: a text of {len(value):,} characters at {where.lstrip('.')} "
                f"(hybridprof writes none over {MAX_TEXT:,}); write it again with hybridprof"
            )
        elif (
            isinstance(value, int | float)
            and not isinstance(value, bool)
            and not abs(value) <= MAX_NUMBER
        ):
            raise SessionFileError(
                f"corrupt {kind} file: the number {value!r:.30} at {where.lstrip('.')} is out of "
                f"range (over {MAX_NUMBER:g}); write it again with hybridprof"
            )


__all__ = ["dump", "expect", "from_plain", "load", "to_plain"]
