"""The options of `hybridprof diff`: the threshold, the min-delta floor, and the run options of
`diff --run` (the model, its inputs, the selection and how to measure, as `hybridprof run` takes
them), which saved sessions refuse."""

from __future__ import annotations

import argparse
import re

from hybridprof.cli.common import add_model_options, add_selection_options
from hybridprof.cli.measure_options import add_measure_options
from hybridprof.errors import UsageError

_TIME = re.compile(r"(?P<value>[0-9]*\.?[0-9]+)\s*(?P<unit>us|µs|ms|s)?")
_UNIT_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1.0}
RUN_GROUP = "with --run"


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of `diff --run`, grouped under their own heading in --help: how the model and
    its inputs are found, the selection, and how to measure (`measure_options`)."""
    group = parser.add_argument_group(RUN_GROUP)
    add_model_options(group)  # type: ignore[arg-type]  # an argument group takes them alike
    add_selection_options(group)  # type: ignore[arg-type]
    add_measure_options(group, "diff")


def check_no_run_options(args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Saved sessions were measured already: a run option (`--rev`, or one of `parser`'s "with
    --run" group) is a mistake, said in one line."""
    group = next(g for g in parser._action_groups if g.title == RUN_GROUP)
    given = ["--rev"] if args.rev else []
    given += [
        action.option_strings[0]
        for action in group._group_actions
        if getattr(args, action.dest) != action.default
    ]
    if given:
        raise UsageError(
            f"{given[0]} is an option of diff --run (profiling two model files); saved sessions "
            "were measured already: drop it, or add --run"
        )


def parse_threshold(text: str) -> float:
    """'5%', '5' or '0.5%' -> percent; UsageError for anything else."""
    body = text.strip().removesuffix("%")
    try:
        value = float(body)
    except ValueError:
        raise UsageError(
            f"--threshold '{text}' is not a percentage; give e.g. --threshold 5%"
        ) from None
    if not 0 <= value < 1000:
        raise UsageError(f"--threshold {text} is out of range; give 0% to 999%")
    return value


def parse_min_delta(text: str) -> float:
    """'5us', '5', '0.1ms' -> microseconds; UsageError for anything else."""
    found = _TIME.fullmatch(text.strip().lower())
    if found is None:
        raise UsageError(f"--min-delta '{text}' is not a time; give e.g. --min-delta 5us or 0.1ms")
    value = float(found["value"]) * _UNIT_US[found["unit"]]
    if not value < 1e9:
        raise UsageError(f"--min-delta {text} is out of range; give less than 1000 s")
    return value


__all__ = [
    "add_run_options",
    "check_no_run_options",
    "parse_min_delta",
    "parse_threshold",
]
