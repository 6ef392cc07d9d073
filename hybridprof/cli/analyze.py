"""Plan what to profile: read the model's source and module tree, print the plan and save it.

Imports the model file, calls its entry, walks the module tree and reads the source of every module
class in it (libcst; torch's and libraries' classes too) to say, per module: where it is created,
whether it is selected and why, how often it should run per forward, and findings (never called,
called in a loop or branch, inline ops in a parent, shared modules, unreadable source). The plan is
printed every time and saved as JSON for `hybridprof run --plan`: to -o FILE, or else to
./hybridprof-out/<model>.plan.json, which the next analyze of that model replaces.

examples:
  hybridprof analyze net.py --entry build_model
  hybridprof analyze net.py --paths 'blocks.*.attn' --with-parents -o net.plan.json
  hybridprof analyze net.py --static-only -o - | jq .targets
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from hybridprof.cli.common import (
    add_common_options,
    add_model_options,
    add_selection_options,
    command_parser,
    guarded,
    model_prints_to_stderr,
    parse_or_exit_code,
    typed_selectors,
)
from hybridprof.cli.destinations import (
    DEFAULT_OUT_DIR,
    check_outputs,
    is_stdout,
    make_folders,
    own_files_present,
    say_replaced,
)
from hybridprof.cli.terminal import emit
from hybridprof.datamodel import ProfilePlan
from hybridprof.errors import UsageError
from hybridprof.files.loader import DEFAULT_ENTRY, read_model_source
from hybridprof.files.outputs import write_atomic
from hybridprof.reporting.format import visible

MAX_ROWS = 120


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("analyze", __doc__)
    parser.add_argument("model", help="model file (.py) defining the entry function")
    add_model_options(parser)
    add_selection_options(parser)
    parser.add_argument(
        "--static-only",
        action="store_true",
        help="read the source only; execute nothing of the model file",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help=f"save the plan (JSON) here; - prints it on stdout instead of the text plan "
        f"(default: ./{DEFAULT_OUT_DIR}/<model>.plan.json)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json"),
        default="text",
        help="how the plan is printed on stdout (default: text)",
    )
    parser.add_argument(
        "--max-rows",
        type=int,
        default=MAX_ROWS,
        metavar="N",
        help="text: modules printed in the tree; 0 prints all, the saved plan always has every "
        f"one (default: {MAX_ROWS})",
    )
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="text: also print the torch-compatibility choices (the saved plan always has them)",
    )
    add_common_options(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else _analyze(args)

    return guarded(body, "--debug" in argv)


def _analyze(args: argparse.Namespace) -> int:
    if args.max_rows < 0:
        raise UsageError(f"--max-rows must be 0 (all) or more, got {args.max_rows}")
    model = Path(args.model)
    read_model_source(model)  # missing file, syntax error: before anything else
    if is_stdout(args.output):
        with model_prints_to_stderr():
            plan = _make_plan(args, model)
        emit([plan.to_json()])
        return 0
    output = Path(args.output) if args.output else _default_output(model)
    own = set() if args.output else {output}
    check_outputs([output], own, args.force, [model])
    with model_prints_to_stderr():
        plan = _make_plan(args, model)
    replaced = own_files_present([output], own)
    make_folders([output])
    write_atomic(output, plan.to_json() + "\n", args.force, [model], own=output in own)
    printed = plan.to_json() if args.format == "json" else _text(plan, model, args)
    lines = printed.rstrip("\n").splitlines()
    emit([*lines, visible(f"plan saved to {output}")] if args.format == "text" else lines)
    say_replaced(replaced, sys.stderr if args.format == "json" else sys.stdout)
    return 0


def _make_plan(args: argparse.Namespace, model: Path) -> ProfilePlan:
    paths = typed_selectors(args.paths)
    entry = args.entry or DEFAULT_ENTRY
    if args.static_only:
        from hybridprof.planner.static_plan import static_plan

        return static_plan(model, entry, paths, (), args.depth, args.with_parents, args.leaves_only)
    from hybridprof.files.loader import load_model
    from hybridprof.planner.live_plan import plan_model

    loaded = load_model(model, entry, args.inputs, args.input_shape)
    return plan_model(
        loaded.module, paths, (), args.depth, args.with_parents,
        model_file=str(model), entry=entry, leaves_only=args.leaves_only,
    )  # fmt: skip


def _default_output(model: Path) -> Path:
    return DEFAULT_OUT_DIR / f"{model.stem}.plan.json"


def _text(plan: ProfilePlan, model: Path, args: argparse.Namespace) -> str:
    from hybridprof.reporting.text.plan_text import render_plan

    return render_plan(plan, str(model.resolve().parent), args.max_rows, compat=args.verbose)


__all__ = ["build_parser", "main"]
