"""The options of `hybridprof diff`: the threshold, the min-delta floor, and the run options of
`diff --run` (the model, its inputs, the selection and how to measure, as `hybridprof run` takes
them), which saved sessions refuse."""

from __future__ import annotations

import argparse
import re

from hybridprof.cli.common import add_model_options, add_selection_options
from hybridprof.errors import UsageError
from hybridprof.runtime.basics.stopping import DEFAULT_MAX_TIME_S, Count, parse_count
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, STRATEGIES

DIFF_WARMUP, DIFF_PAIRS = 3, 30
# One thread, as the stability advice says: with torch's default (a thread per core) on a busy
# machine, OpenMP's threads wait for each other and single iterations take 10-100x longer (on a
# 2-core machine with two busy processes, a 0.5 ms iteration took up to 160 ms), which widens
# every paired interval; a comparison of multi-threaded speed asks for it with --threads.
DIFF_THREADS = 1
_TIME = re.compile(r"(?P<value>[0-9]*\.?[0-9]+)\s*(?P<unit>us|µs|ms|s)?")
_UNIT_US = {"us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6, None: 1.0}

# option -> (attribute, value when not given): what saved sessions refuse when given
RUN_ONLY: dict[str, tuple[str, object]] = {
    "--rev": ("rev", []),
    "--entry": ("entry", None),
    "--inputs": ("inputs", None),
    "--input-shape": ("input_shape", []),
    "--paths": ("paths", []),
    "--depth": ("depth", None),
    "--leaves-only": ("leaves_only", False),
    "--with-parents": ("with_parents", False),
    "--warmup": ("warmup", None),
    "--iters": ("iters", None),
    "--max-time": ("max_time", None),
    "--threads": ("threads", None),
    "--device": ("device", None),
    "--strategy": ("strategy", None),
    "--backward": ("backward", False),
    "--profile-memory": ("profile_memory", False),
}


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of `diff --run`, grouped under their own heading in --help."""
    group = parser.add_argument_group("with --run")
    add_model_options(group)  # type: ignore[arg-type]  # an argument group takes them alike
    add_selection_options(group)  # type: ignore[arg-type]
    group.add_argument(
        "--warmup",
        type=_count,
        metavar="N",
        help="unmeasured iterations first, or auto: until iteration times stop falling "
        f"(default: {DIFF_WARMUP})",
    )
    group.add_argument(
        "--iters",
        type=_count,
        metavar="N",
        help="measured pairs of iterations (one of each model), or auto: until every layer's "
        f"paired interval is narrower than the threshold (default: {DIFF_PAIRS})",
    )
    group.add_argument(
        "--max-time",
        type=float,
        metavar="SECONDS",
        help=f"time limit of the iterations (default: {DEFAULT_MAX_TIME_S:g} s with auto, "
        "none otherwise)",
    )
    group.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="torch threads during the run: 1, the steadiest comparison, unless you compare "
        f"multi-threaded speed (default: {DIFF_THREADS})",
    )
    group.add_argument(
        "--device",
        metavar="DEVICE",
        help="cpu or cuda (default: where the entry put the model, usually cpu)",
    )
    group.add_argument("--profile-memory", action="store_true", help="measure memory per layer")
    group.add_argument(
        "--strategy",
        choices=tuple(STRATEGIES),
        help=f"how to measure both models (default: {DEFAULT_STRATEGY})",
    )
    group.add_argument(
        "--backward", action="store_true", help="profile a training step: forward and backward"
    )


def check_no_run_options(args: argparse.Namespace) -> None:
    """Saved sessions were measured already: a run option is a mistake, said in one line."""
    given = [option for option, (name, unset) in RUN_ONLY.items() if getattr(args, name) != unset]
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


def _count(text: str) -> Count:
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


__all__ = [
    "DIFF_PAIRS",
    "DIFF_WARMUP",
    "add_run_options",
    "check_no_run_options",
    "parse_min_delta",
    "parse_threshold",
]
