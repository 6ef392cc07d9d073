"""What was measured for each profiled path: a `Stat` (median, min, max over iterations), ops,
per-iteration series, and the `ModuleRecord` of a layer. Times in us, memory in bytes."""

from __future__ import annotations

import itertools
import re
import typing
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from hybridprof.datamodel.jsonio import dataclass_from_plain, expect, read_float


@dataclass(frozen=True, slots=True)
class Stat:
    """A per-iteration quantity summarised over the measured iterations."""

    median: float
    min: float
    max: float

    @classmethod
    def of(cls, values: typing.Sequence[float]) -> Stat:
        if not values:
            return cls(0.0, 0.0, 0.0)
        ordered = sorted(values)
        mid = len(ordered) // 2
        median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
        return cls(float(median), float(ordered[0]), float(ordered[-1]))

    # the JSON round trip (jsonio): [median, min, max]; files before schema 4 hold a dict
    def json_encode(self) -> list[float]:
        return [self.median, self.min, self.max]

    @classmethod
    def json_decode(cls, data: Any) -> Stat:
        if type(data) is dict:
            return dataclass_from_plain(cls, data)
        if type(data) is not list or len(data) != 3:
            raise ValueError(f"expected a Stat [median, min, max], got {str(data)[:40]}")
        median, low, high = map(read_float, data)
        return cls(median, low, high)


@dataclass(frozen=True, slots=True)
class OpStat:
    """One operator (e.g. aten::addmm) inside one layer, per iteration (medians over iterations)."""

    name: str
    calls: int
    self_cpu_us: float
    total_cpu_us: float
    self_device_us: float = 0.0
    total_device_us: float = 0.0
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_device_mem: int = 0
    device_mem: int = 0
    backward: bool = False  # the op ran in the backward pass of this layer

    json_columns = True  # a record's ops are saved as one list per field (jsonio)


SERIES_DECIMALS = 1  # per-iteration values are kept to 0.1 us
_SERIES_ITEM = re.compile(r"-?[0-9]+(\.[0-9]+)?")
# Any character no plain decimal number holds (the letters of nan, inf, 1e3 or 0x10, a comma, an
# underscore float() would take): one scan of the text, then float() refuses the rest ("1-2").
# A third of the cost of matching the whole series against one pattern (10,000-layer sessions
# hold 20,000 series; `history add` reads 1,000 per session).
_NOT_IN_A_NUMBER = re.compile(r"[^0-9.\s-]")
SERIES_MAX = 1e18  # microseconds; beyond it a file is corrupt (a float of 400 digits is infinite)


@dataclass(frozen=True, slots=True)
class Series:
    """One quantity's value in each measured iteration, in order, in microseconds (0.1 us kept).

    Saved as one string of space-separated numbers ("84.2 85 83.9"): a JSON list would take a line
    per number, and a 10,000-layer session keeps 20,000 or more of these.
    """

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: typing.Iterable[float]) -> Series:
        # map, not a generator: a 10,000-layer session makes 20,000 or more of these
        return cls(tuple(map(round, map(float, values), repeat(SERIES_DECIMALS))))

    def encode(self) -> str:
        return " ".join(_short_number(v) for v in self.values)

    @classmethod
    def decode(cls, text: Any) -> Series:
        items = expect(str, text, "a per-iteration series").split()
        try:
            if _NOT_IN_A_NUMBER.search(text):
                raise ValueError(text)
            values = tuple(map(float, items))
        except ValueError:
            bad = next((item for item in items if not _SERIES_ITEM.fullmatch(item)), items[0])
            raise ValueError(f"per-iteration series holds {bad[:20]!r}, not a number") from None
        if values and not max(map(abs, values)) <= SERIES_MAX:
            raise ValueError(f"per-iteration series holds a number over {SERIES_MAX:g}")
        return cls(values)

    # the JSON round trip (jsonio): a string, not a dict
    def json_encode(self) -> str:
        return self.encode()

    @classmethod
    def json_decode(cls, data: Any) -> Series:
        return cls.decode(data)


def series_values(texts: typing.Sequence[Any]) -> list[tuple[float, ...]] | None:
    """The values of many series' texts at once, each as `Series.decode` reads it (one scan of
    them all for a character no number holds); None where one of them would not decode."""
    if not set(map(type, texts)) <= {str} or _NOT_IN_A_NUMBER.search(" ".join(texts)):
        return None
    try:
        values = [tuple(map(float, text.split())) for text in texts]
    except ValueError:
        return None
    if values and not max(map(abs, itertools.chain.from_iterable(values))) <= SERIES_MAX:
        return None
    return values


def _short_number(value: float) -> str:
    text = f"{value:.{SERIES_DECIMALS}f}".rstrip("0").rstrip(".")
    return "0" if text in ("", "-0") else text


@dataclass(frozen=True, slots=True)
class IterationSeries:
    """A record's per-iteration values (iteration i of every record is the same measured iteration).

    They give each layer's median a confidence interval (`hybridprof.analysis.stats`) and let two
    runs be compared iteration by iteration. A total is None when it equals its self time in every
    iteration (a layer with no profiled layer inside), so leaves store one series, not two; an
    unmeasured quantity (device or backward time) is None too. None series are left out of the file.
    """

    self_cpu_us: Series
    total_cpu_us: Series | None = None
    self_device_us: Series | None = None
    total_device_us: Series | None = None
    backward_self_cpu_us: Series | None = None
    backward_total_cpu_us: Series | None = None

    def total_cpu(self) -> Series:
        return self.total_cpu_us or self.self_cpu_us

    def total_device(self) -> Series | None:
        return self.total_device_us or self.self_device_us

    def backward_total_cpu(self) -> Series | None:
        return self.backward_total_cpu_us or self.backward_self_cpu_us

    def present(self) -> dict[str, Series]:
        return {name: s for name in self.__slots__ if (s := getattr(self, name)) is not None}

    def lengths(self) -> set[int]:
        return {len(s.values) for s in self.present().values()}

    def json_encode(self) -> dict[str, str]:
        return {name: s.encode() for name, s in self.present().items()}


@dataclass(frozen=True, slots=True)
class ModuleRecord:
    """Everything measured for one profiled path.

    Times and memory are per iteration (the sum over that iteration's calls), summarised over
    iterations with `Stat`. `calls` is the total over all measured iterations.
    """

    path: str
    class_name: str
    calls: int
    self_cpu_us: Stat
    total_cpu_us: Stat
    self_device_us: Stat | None = None
    total_device_us: Stat | None = None
    self_cpu_mem: int = 0
    cpu_mem: int = 0
    self_device_mem: int = 0
    device_mem: int = 0
    backward_self_cpu_us: Stat | None = None
    backward_total_cpu_us: Stat | None = None
    backward_self_device_us: Stat | None = None
    param_count: int = 0
    input_shapes: tuple[str, ...] = ()  # of the first call, e.g. ("1x3x224x224",)
    output_shapes: tuple[str, ...] = ()
    ops: tuple[OpStat, ...] = ()
    aliases: tuple[str, ...] = ()
    is_leaf: bool = True
    per_iteration: IterationSeries | None = None  # None with one iteration, or in schema < 3 files

    def calls_per_iteration(self, iterations: int) -> float:
        """Calls in one iteration (times and OpStat calls are per iteration too)."""
        return self.calls / max(iterations, 1)
