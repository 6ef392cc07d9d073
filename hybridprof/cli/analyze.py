"""Plan what to profile: read the model's source and module tree, print and save the plan.

Imports the model file, calls its entry, walks the module tree and reads the source of every module
class in it (libcst; torch's and libraries' classes too) to say, per module: where it is created,
whether it is selected and why, how often it should run per forward, and findings (never called,
called in a loop or branch, inline ops in a parent, shared modules, unreadable source). The plan is
saved as JSON (default: <model>.plan.json next to the model file) for `hybridprof run --plan`.

examples:
  hybridprof analyze net.py --entry build_model
  hybridprof analyze net.py --paths 'blocks.*.attn' --with-parents -o net.plan.json --force
  hybridprof analyze net.py --static-only --format json
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from hybridprof.cli.common import (
    add_common_options,
    command_parser,
    guarded,
    model_prints_to_stderr,
)
from hybridprof.cli.terminal import emit
from hybridprof.datamodel import ProfilePlan
from hybridprof.errors import UsageError
from hybridprof.loader import DEFAULT_ENTRY, read_model_source
from hybridprof.outputs import check_output_path, write_atomic


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("analyze", __doc__)
    parser.add_argument("model", help="model file (.py) defining the entry function")
    parser.add_argument("--entry", default=DEFAULT_ENTRY, help="function returning the nn.Module")
    parser.add_argument("--inputs", metavar="NAME", help="function in the file returning inputs")
    parser.add_argument("--input-shape", action="append", default=[], metavar="SHAPE")
    parser.add_argument(
        "--paths",
        nargs="+",
        default=[],
        metavar="GLOB",
        help="dotted paths or globs to select (features.0, 'blocks.*.attn')",
    )
    parser.add_argument("--depth", type=int, help="select every module at this depth")
    parser.add_argument("--leaves-only", action="store_true",
                        help="select only the leaves (as torchprof did)")  # fmt: skip
    parser.add_argument("--with-parents", action="store_true",
                        help="with --paths/--depth/--leaves-only: also select parents whose "
                        "forward runs ops directly")  # fmt: skip
    parser.add_argument("-o", "--output", help="plan file (default: <model>.plan.json beside it)")
    parser.add_argument("--static-only", action="store_true",
                        help="read the source only; execute nothing of the model file")  # fmt: skip
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument(
        "--max-rows",
        type=int,
        default=120,
        help="text: modules printed in the tree (0: all; the saved plan always has every one)",
    )
    add_common_options(parser)
    return parser


def main(argv: Sequence[str]) -> int:
    debug = "--debug" in argv
    return guarded(lambda: _analyze(list(argv)), debug)


def _analyze(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.max_rows < 0:
        raise UsageError(f"--max-rows must be 0 (all) or more, got {args.max_rows}")
    model = Path(args.model)
    read_model_source(model)  # missing file, syntax error: before anything else
    output = check_output_path(args.output or _default_output(model), args.force, [model])
    with model_prints_to_stderr():
        plan = _make_plan(args, model)
    text = plan.to_json() if args.format == "json" else _text(plan, model, args.max_rows)
    write_atomic(output, plan.to_json() + "\n", force=args.force, inputs=[model])
    lines = text.rstrip("\n").splitlines()
    emit([*lines, f"plan saved to {output}"] if args.format == "text" else lines)
    return 0


def _make_plan(args: argparse.Namespace, model: Path) -> ProfilePlan:
    paths, globs = _split_selectors(args.paths)
    if args.static_only:
        from hybridprof.planner.static_plan import static_plan

        return static_plan(
            model, args.entry, paths, globs, args.depth, args.with_parents, args.leaves_only
        )
    from hybridprof.loader import load_model
    from hybridprof.planner.plan import plan_model

    loaded = load_model(model, args.entry, args.inputs, args.input_shape)
    return plan_model(
        loaded.module, paths, globs, args.depth, args.with_parents,
        model_file=str(model), entry=args.entry, leaves_only=args.leaves_only,
    )  # fmt: skip


def _split_selectors(selectors: Sequence[str]) -> tuple[list[str], list[str]]:
    """Plain dotted paths must exist; anything with glob characters is a pattern."""
    globs = [s for s in selectors if any(ch in s for ch in "*?[")]
    return [s for s in selectors if s not in globs], globs


def _default_output(model: Path) -> Path:
    return model.with_name(f"{model.stem}.plan.json")


def _text(plan: ProfilePlan, model: Path, max_rows: int) -> str:
    from hybridprof.reporting.plan_text import render_plan

    return render_plan(plan, str(model.resolve().parent), max_rows)


__all__ = ["build_parser", "main"]
