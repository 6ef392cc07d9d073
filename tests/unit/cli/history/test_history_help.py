"""The history sub-commands follow the help conventions of every command (tests/unit/
test_cli_help.py): each option has help stating its default, metavars from one vocabulary, an
option shared with another command reads the same."""

from __future__ import annotations

import argparse

import pytest

from hybridprof.cli import diff, run
from hybridprof.cli.history import history_add, history_bisect, history_show
from tests.unit.cli.test_help import METAVARS

PARSERS = {
    "history add": history_add.build_parser,
    "history show": history_show.build_parser,
    "history bisect": history_bisect.build_parser,
}


def options(command: str) -> list[argparse.Action]:
    return [a for a in PARSERS[command]()._actions if a.option_strings]


@pytest.mark.parametrize("command", PARSERS)
def test_every_option_has_help_with_its_default_and_a_known_metavar(command: str) -> None:
    for action in options(command):
        assert action.help, f"{command} {action.option_strings} has no help"
        if action.nargs != 0:
            assert "(default: " in action.help, f"{command} {action.option_strings}"
            assert action.metavar in METAVARS, f"{command} {action.option_strings}"
        if action.nargs != 0 and action.default not in (None, [], argparse.SUPPRESS):
            assert f"(default: {action.default})" in action.help, action.option_strings
        if isinstance(action, argparse._AppendAction):
            assert "repeat" in (action.help or ""), action.option_strings


def test_options_shared_with_other_commands_read_the_same() -> None:
    others = {
        a.option_strings[-1]: a
        for parser in (run.build_parser(), diff.build_parser())
        for a in parser._actions
        if a.option_strings
    }
    for command in PARSERS:
        for action in options(command):
            name = action.option_strings[-1]
            # What --report writes, and what --all adds to (show: the changed and the largest
            # layers; diff: the changed ones), differ per command; their names do not.
            if name in others and name not in ("--help", "--report", "--all"):
                assert (action.metavar, action.help) == (others[name].metavar, others[name].help), (
                    name
                )
