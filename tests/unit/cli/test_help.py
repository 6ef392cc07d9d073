"""Help conventions of every sub-command (issue: help that tells the defaults, alike everywhere)."""

from __future__ import annotations

import argparse
import re

import pytest

from hybridprof.cli import analyze, diff, merge, report, run
from hybridprof.cli.common import refill, typed_selectors
from hybridprof.planner.module_tree import typed_parts

PARSERS = {
    "analyze": analyze.build_parser,
    "run": run.build_parser,
    "report": report.build_parser,
    "merge": merge.build_parser,
    "diff": diff.build_parser,
}
METAVARS = {"FILE", "DIR", "NAME", "PATH", "SHAPE", "N", "DEVICE", "SECONDS", "PERCENT", "TIME"}


def options(command: str) -> list[argparse.Action]:
    return [a for a in PARSERS[command]()._actions if a.option_strings]


@pytest.mark.parametrize("command", PARSERS)
def test_every_option_has_help_and_every_value_option_its_default(command: str) -> None:
    for action in options(command):
        assert action.help, f"{command} {action.option_strings} has no help"
        takes_value = action.nargs != 0
        if takes_value:
            assert "(default: " in action.help, f"{command} {action.option_strings}: {action.help}"
        if takes_value and action.default not in (None, [], argparse.SUPPRESS):
            shown = f"{action.default:g}" if isinstance(action.default, float) else action.default
            assert f"(default: {shown})" in action.help


@pytest.mark.parametrize("command", PARSERS)
def test_metavars_come_from_one_vocabulary(command: str) -> None:
    for action in options(command):
        if action.nargs != 0 and action.choices is None:
            assert action.metavar in METAVARS, f"{command} {action.option_strings}"


def test_an_option_shared_by_commands_reads_the_same_in_each() -> None:
    seen: dict[str, tuple[object, str | None]] = {}
    for command in PARSERS:
        for action in options(command):
            name = action.option_strings[-1]
            # What -o saves and what --report reports differ per command; their names do not.
            # diff --run measures pairs of iterations of two models, with no plan file, at one
            # thread unless told. --verbose prints more of what each command prints.
            differs = name in (
                "--verbose",
                "--help",
                "--output",
                "--report",
                "--iters",
                "--strategy",
                "--threads",
            )
            shape = (action.metavar, None if differs else action.help)
            assert seen.setdefault(name, shape) == shape, f"{name} differs in {command}"


def test_repeatable_options_say_so() -> None:
    for command in PARSERS:
        for action in options(command):
            if isinstance(action, argparse._AppendAction):
                assert re.search(r"repeat", action.help or ""), (command, action.option_strings)


@pytest.mark.parametrize("columns", [80, 120, 200])
@pytest.mark.parametrize("command", PARSERS)
def test_description_and_options_wrap_at_one_width(
    command: str, columns: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", str(columns))
    width = min(columns, 100) - 2
    text = PARSERS[command]().format_help()
    before, _, rest = text.partition("\nexamples:")
    after = rest[rest.index("\npositional arguments:") :]  # examples are kept as written
    long_lines = [line for line in (before + after).splitlines() if len(line) > width]
    assert long_lines == [], long_lines
    # Both the description's prose and the options' help fill out to about that width.
    description = text.split("\nexamples:")[0].split("usage:")[1]
    prose = [len(line) for line in description.splitlines()[1:] if not line.startswith(" ")]
    option_help = [len(line) for line in text.split("options:")[1].splitlines()]
    assert width - 15 <= max(prose) <= width
    assert width - 15 <= max(option_help) <= width


def test_refill_keeps_examples_and_headers() -> None:
    text = "one two three four\nfive six\n\nexamples:\n  hybridprof run   # as typed\n"
    assert refill(text, 12) == [
        "one two",
        "three four",
        "five six",
        "",
        "examples:",
        "  hybridprof run   # as typed",
    ]


def test_paths_repeat_or_split_on_commas() -> None:
    known = {"features.0", "norm", "a", "b", "fc1"}
    parts = [
        p for v in ["features.0,classifier.*", " norm ", "a,,b"] for p in typed_parts(v, known)
    ]
    assert parts == [("features.0", False), ("classifier.*", True), ("norm", False),
                     ("a", False), ("b", False)]  # fmt: skip
    assert typed_parts("fc1,blocks.[0-1]", known) == [("fc1", False), ("blocks.[0-1]", True)]
    assert [str(s) for s in typed_selectors(["fc1,blocks.*", " x"])] == ["fc1,blocks.*", " x"]


def test_the_top_help_says_what_diff_compares_and_names_run(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from hybridprof.cli import main

    assert main(["-h"]) == 0
    out = capsys.readouterr().out
    diff_entry = out.split("\n  diff ", 1)[1].split("\n  history ", 1)[0]
    assert "two saved sessions" in diff_entry and "--run two model files" in diff_entry
    assert "--fail-on-regression" in diff_entry
