"""Bounds on the numbers and texts of a file hybridprof reads (sessions, plans, comparisons): a
value beyond them makes the file corrupt, and the error names where it is."""

from __future__ import annotations

import re
from typing import Any

from hybridprof.errors import SessionFileError

# Bounds on what a file written by hybridprof holds (1e18 is 31,000 years in us, an exabyte, a
# million seconds of a petaflop machine); beyond them a file is corrupt or hostile, and renderers
# would fail on it (NaN, infinity) or take minutes (a 50 MB name in a PDF).
MAX_NUMBER = 1e18
MAX_TEXT = 100_000
# Module paths nest at most this many parts deep (torch's own recursive module walks fail near
# 1,000 levels; real models are under 100): a tree table indents every row by its depth, so a
# 3,000-deep chain would print gigabytes of indentation.
MAX_PATH_PARTS = 1_000
# Per-iteration series are texts of numbers ("84.2 85 83.9"), as long as the run; they are never
# drawn as text, and their numbers are checked where they are read (`Series.decode`).
_NUMBERS = re.compile(r"[-0-9. ]*")


def no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number hybridprof writes")


def within_bounds(data: Any) -> bool:
    """Is every number and text in `data` within bounds? (The readers check the values they read
    themselves; this is for values of no declared type.)"""
    stack: list[Any] = [[data]]
    while stack:
        container = stack.pop()
        for value in container.values() if isinstance(container, dict) else container:
            kind = type(value)
            if kind is float or kind is int:
                if not -MAX_NUMBER <= value <= MAX_NUMBER:  # NaN fails too
                    return False
            elif kind is str:
                if len(value) > MAX_TEXT and not _NUMBERS.fullmatch(value):
                    return False
            elif kind is dict or kind is list:
                stack.append(value)
    return True


def cut_long_texts(data: Any) -> None:
    """Cut, in place, every text over `MAX_TEXT` to fit it, ending in an ellipsis: what hybridprof
    writes it must read back (an op name of a million characters from `record_function`, a
    warning quoting one). Module names never get here: the planner bounds them."""
    stack: list[Any] = [data]
    while stack:
        container = stack.pop()
        keys = container.keys() if isinstance(container, dict) else range(len(container))
        for key in keys:
            value = container[key]
            if type(value) is str:
                if len(value) > MAX_TEXT and not _NUMBERS.fullmatch(value):
                    container[key] = value[: MAX_TEXT - 1] + "\u2026"
            elif type(value) is dict or type(value) is list:
                stack.append(value)


def name_out_of_bounds(kind: str, data: Any) -> None:
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


# A lone surrogate (U+D800-U+DFFF without its pair) is valid JSON (`"\ud800"`) but no valid
# Unicode: every renderer would fail to write it as UTF-8. It comes from such an escape (or from a
# text handed in from Python), so only a text holding one is walked.
_SURROGATE = re.compile("[\ud800-\udfff]")


def may_hold_lone_surrogate(text: str) -> bool:
    """Whether `text` holds a surrogate or its escape (substring searches: fast on megabytes)."""
    if "\\ud" in text or "\\uD" in text:
        return True
    return not text.isascii() and _SURROGATE.search(text) is not None


def name_lone_surrogate(kind: str, data: Any) -> None:
    """SessionFileError naming the first text (or key) holding a lone surrogate."""
    stack: list[tuple[str, Any]] = [("", data)]
    while stack:
        where, value = stack.pop()
        if isinstance(value, dict):
            for key, item in value.items():
                if _SURROGATE.search(key):
                    _refuse_surrogate(kind, f"{where}.{key!a:.60}", key)
                stack.append((f"{where}.{key}", item))
        elif isinstance(value, list):
            stack.extend((f"{where}[{i}]", item) for i, item in enumerate(value))
        elif isinstance(value, str) and _SURROGATE.search(value):
            _refuse_surrogate(kind, where, value)


def _refuse_surrogate(kind: str, where: str, text: str) -> None:
    found = _SURROGATE.search(text)
    assert found is not None
    raise SessionFileError(
        f"corrupt {kind} file: the text at {where.lstrip('.')[:200]} holds a lone surrogate "
        f"({found.group()!a}), which is no valid Unicode; write it again with hybridprof"
    )


class OutOfBounds(ValueError):
    """A number or text beyond what hybridprof writes (`load` then names where it is)."""


__all__ = [
    "MAX_NUMBER",
    "MAX_PATH_PARTS",
    "MAX_TEXT",
    "OutOfBounds",
    "cut_long_texts",
    "may_hold_lone_surrogate",
    "name_lone_surrogate",
    "name_out_of_bounds",
    "no_constant",
    "within_bounds",
]
