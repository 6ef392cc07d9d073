"""The data model's JSON round trip: frozen dataclasses to plain JSON and back, checked on the way
in.

Generic (it knows no class of the data model): the data model calls it for `to_json`/`from_json`.
A class may write itself in a form of its own (a compact string, a list): it then has a
`json_encode()` method, and a `json_decode(data)` class method if the default (dataclass) reading
does not fit that form. A class with `json_columns = True` is written, as a tuple of them, as one
list per field (a table's columns: the field names once, not once per row).

`dump(..., compact=True)` (the session file) leaves out every field equal to its default (zeros,
empty tuples, None) and all whitespace: a 10,000-layer session is mostly such zeros. The reader
fills them back in; it takes both forms (rows or columns, with or without the defaults), so files
written by older versions load too.

Reading is strict: an unknown field, a missing required one or a value of the wrong type is an
error naming where it is (`records[1].calls: expected int, got str`); a text that is no valid
Unicode (a lone surrogate, `"\\ud800"`) is refused too, as no renderer could write it. Each type's
reader is built once (a 10,000-layer session holds a million values); where a value failed is
worked out only once one did, so reading a good file pays nothing for it.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import json
import operator
import types
import typing
from collections.abc import Callable
from enum import Enum
from typing import Any, Literal, TypeVar

from hybridprof.datamodel.gc_pause import gc_paused
from hybridprof.datamodel.jsonbounds import (
    MAX_NUMBER,
    MAX_TEXT,
    OutOfBounds,
    cut_long_texts,
    may_hold_lone_surrogate,
    name_lone_surrogate,
    name_out_of_bounds,
    no_constant,
    within_bounds,
)
from hybridprof.errors import SessionFileError

T = TypeVar("T")
Decoder = Callable[[Any], Any]
_MISSING: Any = dataclasses.MISSING
# Written even when equal to its default: a reader must see which schema it reads.
_ALWAYS_WRITTEN = frozenset({"schema_version"})


# --------------------------------------------------------------------------- writing

_PLAIN = frozenset({str, int, float, bool, type(None)})
Encoder = Callable[[Any, bool], Any]


def to_plain(obj: Any, omit_defaults: bool = False) -> Any:
    """Dataclasses to dicts, tuples to lists, recursively (or what their `json_encode` gives);
    with `omit_defaults`, fields equal to their default are left out."""
    kind: Any = type(obj)
    if kind in _PLAIN:
        return obj
    return _encoder(kind)(obj, omit_defaults)


@functools.cache
def _encoder(tp: type) -> Encoder:
    """The function that writes objects of type `tp`, chosen once per type."""
    if hasattr(tp, "json_encode"):
        return lambda obj, omit: obj.json_encode()
    if issubclass(tp, Enum):
        return lambda obj, omit: obj.value
    if dataclasses.is_dataclass(tp):
        return _dataclass_encoder(tp)
    if issubclass(tp, tuple | list):
        return _sequence_to_plain
    if issubclass(tp, dict):
        return lambda obj, omit: {str(k): to_plain(v, omit) for k, v in obj.items()}
    return lambda obj, omit: obj


def _dataclass_encoder(cls: type) -> Encoder:
    fields = _defaults(cls)

    def write_dataclass(obj: Any, omit_defaults: bool) -> dict[str, Any]:
        plain = {}
        for name, default in fields:
            value = getattr(obj, name)
            if omit_defaults and default is not _MISSING and _same(value, default):
                continue
            plain[name] = value if type(value) in _PLAIN else to_plain(value, omit_defaults)
        return plain

    return write_dataclass


def _sequence_to_plain(items: Any, omit_defaults: bool) -> Any:
    if items and getattr(items[0], "json_columns", False):
        return _columns_to_plain(items, omit_defaults)
    return [v if type(v) in _PLAIN else to_plain(v, omit_defaults) for v in items]


def _columns_to_plain(rows: Any, omit_defaults: bool) -> dict[str, list[Any]]:
    """Rows of one class as columns; with `omit_defaults`, a column all at its default is left
    out (never the first, so that the rows' count is always written)."""
    columns = {}
    kind: Any = type(rows[0])
    for i, (name, default) in enumerate(_defaults(kind)):
        column = list(map(operator.attrgetter(name), rows))
        if i and omit_defaults and default is not _MISSING and _all_same(column, default):
            continue
        plain = set(map(type, column)) <= _PLAIN
        columns[name] = column if plain else [to_plain(v, omit_defaults) for v in column]
    return columns


def _same(value: Any, default: Any) -> bool:
    return value is default or (value == default and default is not None)


def _all_same(column: list[Any], default: Any) -> bool:
    return column.count(default) == len(column)  # `==` as `_same` (None equals only None)


@functools.cache
def _defaults(cls: type) -> tuple[tuple[str, Any], ...]:
    """(name, default or MISSING) of each field, once per class; `_ALWAYS_WRITTEN` fields as if
    they had none."""
    return tuple(
        (f.name, _MISSING if f.name in _ALWAYS_WRITTEN else f.default)
        for f in dataclasses.fields(cls)
    )


def dump(kind: str, obj: Any, omit_none: tuple[str, ...] = (), compact: bool = False) -> str:
    """The object as JSON; optional parts named in `omit_none` are left out when None. `compact`:
    no whitespace and no field equal to its default. A text over the readers' bound is cut to
    it (`cut_long_texts`): a file hybridprof writes, it reads back."""
    with gc_paused():
        plain = to_plain(obj, compact)
        plain = {k: v for k, v in plain.items() if not (k in omit_none and v is None)}
        if not within_bounds(plain):
            cut_long_texts(plain)
        if compact:
            return json.dumps({"kind": kind, **plain}, separators=(",", ":"))
        return json.dumps({"kind": kind, **plain}, indent=1, sort_keys=False)


# --------------------------------------------------------------------------- reading


def from_plain(tp: Any, data: Any) -> Any:
    """Build an instance of type `tp` (a dataclass or a typing form) from `to_plain` output."""
    return _decoder(tp)(data)


def dataclass_from_plain(cls: type[T], data: Any) -> T:
    """`cls` from its dict (for a class whose `json_decode` also takes the plain dataclass
    form)."""
    return typing.cast(T, _dataclass_decoder(cls)(data))


@functools.cache
def _decoder(tp: Any) -> Decoder:
    """The function that reads type `tp`, built once per type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return _union_decoder(tp)
    if origin is Literal:
        return _literal_decoder(tp)
    if isinstance(tp, type) and hasattr(tp, "json_decode"):
        return typing.cast(Decoder, tp.json_decode)
    if origin is tuple:
        args = typing.get_args(tp)
        return _tuple_decoder(args[0] if args else Any)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _dataclass_decoder(tp)
    if isinstance(tp, type) and issubclass(tp, Enum):
        return lambda data: tp(_str(data))
    return _SCALARS.get(tp, _any)


def _str(data: Any) -> str:
    if type(data) is str:
        if len(data) > MAX_TEXT:
            raise OutOfBounds("a text too long")
        return data
    raise ValueError(f"expected str, got {type(data).__name__}")


def _int(data: Any) -> int:
    if type(data) is int:
        if not -MAX_NUMBER <= data <= MAX_NUMBER:
            raise OutOfBounds(f"the number {data!r:.30} is out of range")
        return data
    raise ValueError(f"expected int, got {type(data).__name__}")


def read_float(data: Any) -> float:
    """A JSON number as a float: not a bool, within bounds (NaN is not)."""
    if type(data) is float or type(data) is int:
        if not -MAX_NUMBER <= data <= MAX_NUMBER:
            raise OutOfBounds(f"the number {data!r:.30} is out of range")
        return float(data)
    raise ValueError(f"expected a number, got {type(data).__name__}")


def _bool(data: Any) -> bool:
    if type(data) is bool:
        return data
    raise ValueError(f"expected bool, got {type(data).__name__}")


def _any(data: Any) -> Any:
    if not within_bounds(data):
        raise OutOfBounds("a value out of bounds")
    return data


_SCALARS: dict[Any, Decoder] = {str: _str, int: _int, float: read_float, bool: _bool}


def _union_decoder(tp: Any) -> Decoder:
    options = [a for a in typing.get_args(tp) if a is not type(None)]
    takes_none = len(options) < len(typing.get_args(tp))
    if len(options) == 1:
        only = _decoder(options[0])
        return lambda data: None if data is None and takes_none else only(data)
    decoders = [_decoder(option) for option in options]

    def first_fitting(data: Any) -> Any:
        """The value as the first of the union's types that takes it (`int | Literal["auto"]`)."""
        if data is None and takes_none:
            return None
        errors = []
        for decode in decoders:
            try:
                return decode(data)
            except ValueError as exc:
                errors.append(str(exc))
        raise ValueError(" or ".join(errors))

    return first_fitting


def _literal_decoder(tp: Any) -> Decoder:
    allowed = typing.get_args(tp)

    def literal(data: Any) -> Any:
        if isinstance(data, bool) or data not in allowed:
            # the value shown cut short: it may be a text of 100,000 characters
            raise ValueError(f"expected one of {allowed}, got {_shown(data)}")
        return data

    return literal


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "..."


class FieldError(ValueError):
    """A value that does not fit its field, with where it is in the file: `records[1].calls`
    (built up as the error leaves each reader); `cause` is the reader's own error."""

    def __init__(self, where: str, cause: ValueError) -> None:
        super().__init__(f"{where}: {cause}")
        self.where = where
        self.cause = cause


def _inside(step: str, exc: ValueError) -> FieldError:
    """`exc` one step further out: a field name (`calls`) or an index (`[1]`)."""
    if isinstance(exc, FieldError):
        joiner = "" if exc.where.startswith("[") else "."
        return FieldError(step + joiner + exc.where, exc.cause)
    return FieldError(step, exc)


def _item_error(items: list[Any], decode: Decoder, exc: ValueError) -> ValueError:
    """Which item of a list did not read (the list read again item by item, only on failure)."""
    for index, item in enumerate(items):
        try:
            decode(item)
        except ValueError as inner:
            return _inside(f"[{index}]", inner)
    return exc


def _tuple_decoder(item: Any) -> Decoder:
    decode = _decoder(item)
    columns = _columns_decoder(item) if getattr(item, "json_columns", False) else None

    def read_tuple(data: Any) -> tuple[Any, ...]:
        if type(data) is list:
            try:
                return tuple(map(decode, data))
            except ValueError as exc:
                raise _item_error(data, decode, exc) from exc
        if columns is not None and type(data) is dict:
            return tuple(columns(data))
        raise ValueError(f"expected list, got {type(data).__name__}")

    return read_tuple


def _dataclass_decoder(cls: type) -> Decoder:
    fields = _fields(cls)
    decoders = {name: decode for name, decode, _ in fields}
    names = frozenset(decoders)
    required = tuple(name for name, _, needed in fields if needed)

    def read_dataclass(data: Any) -> Any:
        if type(data) is not dict:
            raise ValueError(f"expected {cls.__name__}, got {type(data).__name__}")
        if not names.issuperset(data):
            raise ValueError(f"{cls.__name__} has an unknown field {_unknown(data, names)!r}")
        for name in required:
            if name not in data:
                raise ValueError(f"{cls.__name__} is missing field '{name}'")
        # only the fields the file holds: a compact file leaves out those at their default
        try:
            return cls(**{name: decoders[name](value) for name, value in data.items()})
        except ValueError as exc:
            raise _field_error(data, decoders, exc) from exc

    return read_dataclass


def _field_error(data: dict[str, Any], decoders: dict[str, Decoder], exc: ValueError) -> ValueError:
    """Which field of a dataclass did not read (each read again, only on failure)."""
    for name, value in data.items():
        try:
            decoders[name](value)
        except ValueError as inner:
            return _inside(name, inner)
    return exc  # the class itself refused the values


def _columns_decoder(cls: type) -> Decoder:
    """Rows of `cls` from one list per field (all of the same length; a left-out column is all
    its field's default)."""
    hints = typing.get_type_hints(cls)
    fields = tuple((name, _column_reader(hints[name]), needed) for name, _, needed in _fields(cls))
    names = frozenset(name for name, _, _ in fields)
    defaults = dict(_defaults(cls))
    item_decoders = {name: decode for name, decode, _ in _fields(cls)}

    def read_columns(data: dict[str, Any]) -> tuple[Any, ...]:
        if not names.issuperset(data):
            raise ValueError(f"{cls.__name__} has an unknown column {_unknown(data, names)!r}")
        lengths = {len(column) if type(column) is list else -1 for column in data.values()}
        if len(lengths) != 1 or -1 in lengths:
            raise ValueError(_uneven_columns(cls, data))
        columns: list[Any] = []
        for name, read_column, required in fields:
            if name in data:
                columns.append(read_column(data[name]))
            elif required:
                raise ValueError(f"{cls.__name__} is missing column '{name}'")
            else:
                columns.append(itertools.repeat(defaults[name]))
        try:
            return tuple(itertools.starmap(cls, zip(*columns, strict=False)))  # lengths checked
        except ValueError as exc:
            raise _column_error(data, item_decoders, exc) from exc

    return read_columns


def _uneven_columns(cls: type, data: dict[str, Any]) -> str:
    """Which column is no list, or is not as long as the first (named: the file is columns)."""
    bad = next((name for name, column in data.items() if type(column) is not list), None)
    if bad is not None:
        return f"column '{bad[:50]}' of {cls.__name__} is not a list"
    lengths = {name: len(column) for name, column in data.items()}
    first, count = next(iter(lengths.items()), ("", 0))
    other = next((name for name, length in lengths.items() if length != count), None)
    if other is not None:
        return (
            f"column '{other[:50]}' of {cls.__name__} holds {lengths[other]} values, column "
            f"'{first}' {count}"
        )
    return f"the columns of {cls.__name__} are not lists of one length"


def _column_error(
    data: dict[str, list[Any]], decoders: dict[str, Decoder], exc: ValueError
) -> ValueError:
    """Which value of which column did not read (`calls[3]`), looked for only on failure."""
    for name, column in data.items():
        error = _item_error(column, decoders[name], exc)
        if error is not exc:
            return _inside(name, error)
    return exc


def _column_reader(tp: Any) -> Callable[[list[Any]], Any]:
    """Reads a whole column of type `tp`: a column of plain numbers or texts is checked at C speed
    (the types present, then its extremes); anything else value by value."""
    decode = _decoder(tp)
    kinds_taken: dict[Any, set[type]] = {str: {str}, int: {int}, float: {float, int}, bool: {bool}}
    plain = kinds_taken.get(tp)
    if plain is None:
        return lambda column: map(decode, column)

    def read_column(column: list[Any]) -> Any:
        kinds = set(map(type, column))
        if not kinds <= plain:
            return map(decode, column)  # names the wrong value
        if tp is str:
            within = not column or max(map(len, column)) <= MAX_TEXT
        else:
            within = not column or (min(column) >= -MAX_NUMBER and max(column) <= MAX_NUMBER)
        if not within:
            return map(decode, column)  # names the value out of bounds
        return map(float, column) if int in kinds and tp is float else column

    return read_column


def _unknown(data: dict[str, Any], names: frozenset[str]) -> str:
    return next(key for key in data if key not in names)[:50]


@functools.cache
def _fields(cls: type) -> tuple[tuple[str, Decoder, bool], ...]:
    """(name, reader, required) of each field, once per class: resolving the string annotations
    (`get_type_hints`) per record made reading a 2,000-layer session take seconds."""
    hints = typing.get_type_hints(cls)
    return tuple(
        (
            f.name,
            _decoder(hints[f.name]),
            f.default is _MISSING and f.default_factory is _MISSING,
        )
        for f in dataclasses.fields(cls)
    )


def expect(tp: Any, value: Any, what: Any) -> Any:
    if isinstance(value, bool) and tp in (int, float, int | float):
        raise ValueError(f"expected a number for {what}, got a bool")
    if not isinstance(value, tp):
        raise ValueError(f"expected {getattr(what, '__name__', what)}, got {type(value).__name__}")
    return value


Trim = Callable[[dict[str, Any]], None]  # takes parts out of the file's data before it is read


def load(kind: str, cls: type[T], text: str, schema_version: int, trim: Trim | None = None) -> T:
    """`cls` from JSON text that `dump(kind, ...)` wrote, checked: SessionFileError if it is not.
    `trim`, when given, takes what the caller will not use out of the parsed data first."""
    with gc_paused():
        return _load(kind, cls, text, schema_version, trim)


def _load(kind: str, cls: type[T], text: str, schema_version: int, trim: Trim | None) -> T:
    try:
        data = json.loads(text, parse_constant=no_constant)
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
    if may_hold_lone_surrogate(text):
        name_lone_surrogate(kind, data)  # raises, naming where
    data.pop("kind")
    if trim is not None:
        trim(data)
    try:
        return typing.cast(T, from_plain(cls, data))
    except OutOfBounds as exc:
        name_out_of_bounds(kind, data)  # raises, naming where
        raise SessionFileError(
            f"corrupt {kind} file: {exc}; write it again with hybridprof"
        ) from exc
    except FieldError as exc:
        if isinstance(exc.cause, OutOfBounds):
            name_out_of_bounds(kind, data)  # raises, naming where and the bound
        raise SessionFileError(
            f"corrupt {kind} file: {exc}; write it again with hybridprof"
        ) from exc
    except (ValueError, TypeError, KeyError, IndexError, RecursionError) as exc:
        raise SessionFileError(
            f"corrupt {kind} file: {exc}; write it again with hybridprof"
        ) from exc


__all__ = [
    "dataclass_from_plain",
    "dump",
    "expect",
    "from_plain",
    "load",
    "read_float",
    "to_plain",
]
