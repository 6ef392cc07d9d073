"""The measuring options, declared once (`cli.measure_options`) for `run` and `diff --run`: both
parsers, both commands' RunOptions and the saved diff's refusals come from the one table."""

from __future__ import annotations

import argparse

import pytest

from hybridprof.cli import diff, run
from hybridprof.cli.measure_options import (
    DIFF_PAIRS,
    ITERS,
    MEASURE_OPTIONS,
    RUN_GROUP,
    check_no_run_options,
    command_run_options,
    measure_fields,
)
from hybridprof.errors import UsageError

VALUES = {"--strategy": "session", "--device": "cpu", "--input-shape": "1,2"}


def flags(actions: list[argparse.Action]) -> set[str]:
    return {flag for action in actions for flag in action.option_strings}


def test_both_parsers_take_their_options_from_the_table() -> None:
    run_flags = flags(run.build_parser()._actions)
    group = next(g for g in diff.build_parser()._action_groups if g.title == RUN_GROUP)
    diff_flags = flags(group._group_actions)
    for option in MEASURE_OPTIONS:
        assert (option.flag in run_flags) == (option.run is not None), option.flag
        assert (option.flag in diff_flags) == (option.diff is not None), option.flag


def test_each_command_fills_in_its_own_defaults() -> None:
    ran = run.build_parser().parse_args([])
    compared = diff.build_parser().parse_args(["--run", "a.py", "b.py"])
    assert measure_fields(ran, "run")["iters"] == ITERS and ran.threads is None
    fields = measure_fields(compared, "diff")
    # Neither gives a thread count: RunOptions' default (one thread) is both commands'.
    assert (fields["iters"], fields["threads"]) == (DIFF_PAIRS, None)
    assert "flops" in measure_fields(ran, "run") and "flops" not in fields  # run's only
    options = command_run_options(compared, "diff", command=("hybridprof", "diff"))
    assert options.iters == DIFF_PAIRS and options.command == ("hybridprof", "diff")


@pytest.mark.parametrize(
    "action",
    next(g for g in diff.build_parser()._action_groups if g.title == RUN_GROUP)._group_actions,
    ids=lambda a: a.option_strings[0],
)
def test_a_saved_diff_refuses_every_option_of_diff_run(action: argparse.Action) -> None:
    flag = action.option_strings[0]
    parser = diff.build_parser()
    switch = action.nargs == 0
    args = parser.parse_args(
        ["base.json", "new.json", flag, *([] if switch else [VALUES.get(flag, "1")])]
    )
    with pytest.raises(UsageError, match=f"^{flag} is an option of diff --run"):
        check_no_run_options(args, parser)


def test_a_saved_diff_without_run_options_passes() -> None:
    parser = diff.build_parser()
    check_no_run_options(parser.parse_args(["base.json", "new.json"]), parser)
    with pytest.raises(UsageError, match=r"^--rev is an option"):
        check_no_run_options(parser.parse_args(["a.json", "b.json", "--rev", "main"]), parser)
