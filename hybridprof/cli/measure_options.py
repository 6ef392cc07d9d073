"""How to measure, declared once for `hybridprof run` and `hybridprof diff --run`: each option's
flag, type, help and default under each command that takes it, and the `RunOptions` field it
sets. Both parsers and both commands' `RunOptions` are built from this one table, and so is what
a diff of two saved sessions refuses (`check_no_run_options`).

`run` hands argparse its defaults; `diff` gives argparse none (a value stays None when not given),
so a diff of two saved sessions can tell a measuring option that was given, and refuse it; its
defaults are applied when its `RunOptions` are made.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from hybridprof.cli.common import add_model_options, add_selection_options
from hybridprof.errors import UsageError
from hybridprof.runtime.basics.limits import DEFAULT_THREADS
from hybridprof.runtime.basics.stopping import (
    AUTO_TARGET_PCT,
    DEFAULT_MAX_TIME_S,
    Count,
    parse_count,
)
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, STRATEGIES

if TYPE_CHECKING:
    from hybridprof.runtime.runs.options import RunOptions

Command = Literal["run", "diff"]
WARMUP, ITERS = 3, 20  # run
DIFF_WARMUP, DIFF_PAIRS = 3, 30  # diff --run
COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def count(text: str) -> Count:
    """A count option's value: a number, or auto."""
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Usage:
    """An option under one command: its help and its value when not given."""

    help: str
    default: object = None


@dataclass(frozen=True, slots=True)
class MeasureOption:
    flag: str
    run: Usage | None  # under `hybridprof run` (None: not an option of run)
    diff: Usage | None = None  # under `hybridprof diff --run`
    field: str | None = None  # the RunOptions field it sets (None: the command reads it)
    type: Callable[[str], Any] = str  # what argparse makes of its text
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    switch: bool = False  # a flag without a value (store_true)

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")

    def usage(self, command: Command) -> Usage | None:
        return self.run if command == "run" else self.diff


_WARMUP_HELP = "unmeasured iterations first, or auto: until iteration times stop falling"
_MAX_TIME_HELP = (
    f"time limit of the iterations (default: {DEFAULT_MAX_TIME_S:g} s with auto, none otherwise)"
)
_DEVICE_HELP = "cpu or cuda (default: where the entry put the model, usually cpu)"
_MEMORY_HELP = "measure memory per layer"
_BACKWARD_HELP = "profile a training step: forward and backward"
_THREADS_HELP = (
    f"torch threads during the run (default: {DEFAULT_THREADS}, whatever the machine's load, so "
    "per-layer times stay comparable; N to measure multi-threaded speed)"
)

MEASURE_OPTIONS: tuple[MeasureOption, ...] = (
    MeasureOption(
        "--warmup",
        Usage(f"{_WARMUP_HELP} (default: {WARMUP})", WARMUP),
        Usage(f"{_WARMUP_HELP} (default: {DIFF_WARMUP})", DIFF_WARMUP),
        "warmup",
        count,
        "N",
    ),
    MeasureOption(
        "--iters",
        Usage(
            "measured iterations, or auto: until the median iteration time's 95%% confidence "
            f"interval is within ±{AUTO_TARGET_PCT:g}%% (at least 5 iterations) "
            f"(default: {ITERS})",
            ITERS,
        ),
        Usage(
            "measured pairs of iterations (one of each model), or auto: until every layer's "
            f"paired interval is narrower than the threshold (default: {DIFF_PAIRS})",
            DIFF_PAIRS,
        ),
        "iters",
        count,
        "N",
    ),
    MeasureOption(
        "--max-time", Usage(_MAX_TIME_HELP), Usage(_MAX_TIME_HELP), "max_time_s", float, "SECONDS"
    ),
    MeasureOption("--threads", Usage(_THREADS_HELP), Usage(_THREADS_HELP), "threads", int, "N"),
    MeasureOption("--device", Usage(_DEVICE_HELP), Usage(_DEVICE_HELP), "device", metavar="DEVICE"),
    MeasureOption(
        "--profile-memory", Usage(_MEMORY_HELP), Usage(_MEMORY_HELP), "profile_memory", switch=True
    ),
    MeasureOption(
        "--strategy",
        Usage(f"how to measure (default: {DEFAULT_STRATEGY}, or the plan's)"),
        Usage(f"how to measure both models (default: {DEFAULT_STRATEGY})"),
        "strategy",
        choices=tuple(STRATEGIES),
    ),
    MeasureOption(
        "--backward", Usage(_BACKWARD_HELP), Usage(_BACKWARD_HELP), "backward", switch=True
    ),
    MeasureOption(
        "--flops",
        Usage(
            "count FLOPs and bytes per layer in one extra unmeasured pass, measure the machine's "
            "peak once (cached), and say per layer whether it is compute-, memory- or "
            "overhead-bound"
        ),
        field="flops",
        switch=True,
    ),
    MeasureOption(
        "--compile",
        Usage(
            "profile torch.compile(model) (its kernels attributed to layers; the compile runs in "
            "warm-up and is reported, never timed) (default: the model as the entry returns it)"
        ),
        switch=True,
    ),
    MeasureOption(
        "--compile-mode",
        Usage(
            "with --compile: torch.compile's mode: default, reduce-overhead, max-autotune or "
            "max-autotune-no-cudagraphs (default: default)"
        ),
        metavar="NAME",
        choices=COMPILE_MODES,
    ),
    MeasureOption(
        "--compare-eager",
        Usage(
            "run the model eager and compiled, interleaved, and compare them per layer (eager "
            "and compiled time, speed-up, what fused): OUT/compare.html and .json, or "
            "NAME.compare.html and .json beside --report NAME.html / -o NAME.json"
        ),
        switch=True,
    ),
    MeasureOption(
        "--peak-gflops",
        Usage("with --flops: the peak GFLOP/s to use (default: measured once, cached)"),
        field="peak_gflops",
        type=float,
        metavar="N",
    ),
    MeasureOption(
        "--peak-gbps",
        Usage("with --flops: the peak GB/s to use (default: measured once, cached)"),
        field="peak_gbps",
        type=float,
        metavar="N",
    ),
)


def add_measure_options(parser: argparse._ActionsContainer, command: Command) -> None:
    """The measuring options `command` takes, in the table's order."""
    for option in MEASURE_OPTIONS:
        usage = option.usage(command)
        if usage is None:
            continue
        if option.switch:
            parser.add_argument(option.flag, action="store_true", help=usage.help)
            continue
        parser.add_argument(
            option.flag,
            type=option.type,
            default=usage.default if command == "run" else None,
            metavar=option.metavar,
            choices=option.choices,
            help=usage.help,
        )


def measure_fields(args: argparse.Namespace, command: Command) -> dict[str, Any]:
    """The `RunOptions` fields `command`'s measuring options set: each as given, or its default."""
    fields: dict[str, Any] = {}
    for option in MEASURE_OPTIONS:
        usage = option.usage(command)
        if usage is None or option.field is None:
            continue
        value = getattr(args, option.dest)
        fields[option.field] = usage.default if value is None else value
    return fields


def command_run_options(args: argparse.Namespace, which: Command, /, **more: Any) -> RunOptions:
    """`which` command's RunOptions: its measuring options, then `more` (the command line, the
    model file and what only the command knows)."""
    from hybridprof.runtime.runs.options import RunOptions

    return RunOptions(**{**measure_fields(args, which), **more})


RUN_GROUP = "with --run"


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """The options of `diff --run`, grouped under their own heading in --help: how the model and
    its inputs are found, the selection, and how to measure (the table above)."""
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


__all__ = [
    "DIFF_PAIRS",
    "DIFF_WARMUP",
    "ITERS",
    "MEASURE_OPTIONS",
    "RUN_GROUP",
    "WARMUP",
    "MeasureOption",
    "Usage",
    "add_measure_options",
    "add_run_options",
    "check_no_run_options",
    "command_run_options",
    "count",
    "measure_fields",
]
