"""Profile a model file layer by layer; print the tree table, save the session and reports.

With no model file, profiles the bundled AlexNet-like demo. When you name no output, a run writes
session.json and report.html into --out-dir (default ./hybridprof-out/). With --report and no -o,
the session is saved beside the first report (net.html -> net.session.json), or into --out-dir when
you give one: every run saves its session, for hybridprof report to re-render. Files hybridprof
names itself are replaced on the next run with a one-line note; files you name (-o, --report,
--trace) need --force. -o - prints the session JSON on stdout (the table then goes to stderr).

examples:
  hybridprof run
  hybridprof run net.py --entry build_model --input-shape 8,3,32,32 --report net.html
  hybridprof run net.py --plan plan.json --iters 50 -o session.json --report net.pdf
  hybridprof run net.py --backward --paths 'blocks.*' --report train.html
  hybridprof run net.py --with-parents   # attention and fused blocks that skip their children
  hybridprof run net.py --flops           # FLOPs, bytes and a roofline verdict per layer
  hybridprof run net.py --warmup auto --iters auto --max-time 60 --threads 1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybridprof.cli.common import (
    add_common_options,
    add_model_options,
    add_selection_options,
    command_parser,
    guarded,
    model_prints_to_stderr,
    notice,
    parse_or_exit_code,
    split_selectors,
)
from hybridprof.cli.destinations import (
    DEFAULT_OUT_DIR,
    RunOutputs,
    make_folders,
    own_files_present,
    plan_run_outputs,
    say_replaced,
)
from hybridprof.cli.progress import ProgressBar, wanted
from hybridprof.cli.terminal import emit, terminal_table, where_lines
from hybridprof.errors import UsageError
from hybridprof.loader import DEFAULT_ENTRY, parse_shape, read_model_source
from hybridprof.outputs import write_atomic
from hybridprof.reporting import known_extensions, write_report
from hybridprof.runtime.stopping import AUTO_TARGET_PCT, DEFAULT_MAX_TIME_S, Count, parse_count
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, STRATEGIES, backward_strategies

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfilePlan, ProfileSession
    from hybridprof.runtime.driver import RunOptions

DEMO_FILE = Path(__file__).resolve().parent.parent / "examples" / "alexnet.py"
WARMUP, ITERS = 3, 20


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("run", __doc__)
    parser.add_argument(
        "model", nargs="?", help="model file (.py) (default: the bundled AlexNet-like demo)"
    )
    add_model_options(parser)
    parser.add_argument(
        "--plan",
        metavar="FILE",
        help="profile exactly what this plan (from hybridprof analyze) selects (default: plan now)",
    )
    add_selection_options(parser)
    _add_measure_options(parser)
    _add_output_options(parser)
    add_common_options(parser)
    return parser


def _add_measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--warmup",
        type=_count,
        default=WARMUP,
        metavar="N",
        help=f"unmeasured iterations first, or auto: until iteration times stop falling "
        f"(default: {WARMUP})",
    )
    parser.add_argument(
        "--iters",
        type=_count,
        default=ITERS,
        metavar="N",
        help="measured iterations, or auto: until the median iteration time's 95%% confidence "
        f"interval is within ±{AUTO_TARGET_PCT:g}%% (at least 5 iterations) (default: {ITERS})",
    )
    parser.add_argument(
        "--max-time",
        type=float,
        metavar="SECONDS",
        help=f"time limit of the iterations (default: {DEFAULT_MAX_TIME_S:g} s with auto, "
        "none otherwise)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="torch threads during the run; 1 gives the steadiest per-layer times on a busy "
        "machine (default: torch's)",
    )
    parser.add_argument(
        "--device",
        metavar="DEVICE",
        help="cpu or cuda (default: where the entry put the model, usually cpu)",
    )
    parser.add_argument("--profile-memory", action="store_true", help="measure memory per layer")
    parser.add_argument(
        "--strategy",
        choices=tuple(STRATEGIES),
        help=f"how to measure (default: {DEFAULT_STRATEGY}, or the plan's)",
    )
    parser.add_argument(
        "--backward", action="store_true", help="profile a training step: forward and backward"
    )
    parser.add_argument(
        "--flops",
        action="store_true",
        help="count FLOPs and bytes per layer in one extra unmeasured pass, measure the machine's "
        "peak once (cached), and say per layer whether it is compute-, memory- or overhead-bound",
    )
    parser.add_argument(
        "--peak-gflops",
        type=float,
        metavar="N",
        help="with --flops: the peak GFLOP/s to use (default: measured once, cached)",
    )
    parser.add_argument(
        "--peak-gbps",
        type=float,
        metavar="N",
        help="with --flops: the peak GB/s to use (default: measured once, cached)",
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="save the session (JSON) here; - prints it on stdout (default: session.json in "
        "--out-dir, or beside the first --report)",
    )
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="write a report, repeatable; the format follows the extension: "
        + " ".join(known_extensions())
        + " (default: report.html in --out-dir when neither -o nor --report is given)",
    )
    parser.add_argument(
        "--trace", metavar="FILE", help="write a Chrome/Perfetto trace (JSON) (default: none)"
    )
    parser.add_argument(
        "--out-dir",
        metavar="DIR",
        help="folder for the session and report files hybridprof names itself (default: "
        f"./{DEFAULT_OUT_DIR})",
    )


def _count(text: str) -> Count:
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else run(args, list(argv))

    return guarded(body, "--debug" in argv)


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """The command body: check everything cheap first, then load, profile, save, print."""
    _check_values(args)
    plan = _load_plan(args.plan) if args.plan else None
    model_file, entry = _model_and_entry(args, plan)
    read_model_source(model_file)  # missing file or syntax error: said before anything is created
    outputs = plan_run_outputs(args)
    if model_file == DEMO_FILE:
        print(
            "hybridprof: no model file given: profiling the bundled AlexNet-like demo "
            "(hybridprof run net.py profiles yours)",
            file=outputs.human,
            flush=True,
        )
    try:
        with model_prints_to_stderr():
            session = _profile(args, argv, model_file, entry, plan, outputs)
    except KeyboardInterrupt:
        notice("interrupted before a measured iteration finished; nothing saved")
        return 130
    replaced = _save(session, outputs, args.force)
    _print_results(session, outputs)
    say_replaced(replaced, outputs.human)
    if session.interrupted:
        asked = session.requested_iterations
        of = "" if asked == "auto" else f" of {asked}"
        where = f"; partial session saved to {outputs.session or 'stdout'}"
        notice(f"interrupted after {session.iterations}{of} iterations{where}")
        return 130
    return 0


def _check_values(args: argparse.Namespace) -> None:
    """Option values that can be judged without torch or the model."""
    if isinstance(args.iters, int) and args.iters < 1:
        raise UsageError(f"--iters must be 1 or more, got {args.iters}; or give auto")
    if isinstance(args.warmup, int) and args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, got {args.warmup}; or give auto")
    if args.max_time is not None and not args.max_time > 0:
        raise UsageError(f"--max-time must be more than 0 seconds, got {args.max_time:g}")
    if args.depth is not None and args.depth < 0:
        raise UsageError(f"--depth must be 0 or more, got {args.depth}")
    for spec in args.input_shape:
        parse_shape(spec)
    if args.device and args.device.split(":")[0] not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r} is not supported; use cpu or cuda")
    if args.plan and (args.paths or args.depth is not None or args.with_parents):
        raise UsageError(
            "--plan fixes the selection; drop --paths/--depth/--with-parents or edit the plan"
        )
    _check_peak_values(args)
    able = backward_strategies()
    if args.backward and args.strategy is not None and args.strategy not in able:
        raise UsageError(
            f"--backward needs {' or '.join(f'--strategy {name}' for name in able)} (it attributes "
            f"backward ops to layers); '{args.strategy}' cannot: drop --strategy or drop --backward"
        )


def _check_peak_values(args: argparse.Namespace) -> None:
    for option, value in (("--peak-gflops", args.peak_gflops), ("--peak-gbps", args.peak_gbps)):
        if value is None:
            continue
        if not args.flops:
            raise UsageError(f"{option} is used with --flops; add --flops or drop {option}")
        if not value > 0 or value == float("inf"):
            raise UsageError(f"{option} must be a positive number, got {value}")


def _load_plan(path: str) -> ProfilePlan:
    from hybridprof.storage import load_plan

    return load_plan(path)


def _model_and_entry(args: argparse.Namespace, plan: ProfilePlan | None) -> tuple[Path, str]:
    if args.model:
        return Path(args.model), args.entry or (plan.entry if plan else None) or DEFAULT_ENTRY
    if plan is not None:
        if not plan.model_file:
            raise UsageError(
                "the plan names no model file; give it: hybridprof run MODEL.py --plan ..."
            )
        return Path(plan.model_file), args.entry or plan.entry or DEFAULT_ENTRY
    return DEMO_FILE, args.entry or DEFAULT_ENTRY


def _profile(
    args: argparse.Namespace,
    argv: list[str],
    model_file: Path,
    entry: str,
    plan: ProfilePlan | None,
    outputs: RunOutputs,
) -> ProfileSession:
    """The torch part: load the model, plan (or check the plan given), run with a progress bar."""
    from hybridprof.loader import load_model
    from hybridprof.planner.compat import probe
    from hybridprof.planner.plan_check import checked_plan
    from hybridprof.runtime.driver import run
    from hybridprof.runtime.workload import resolve_device

    resolve_device(args.device)  # no CUDA: said before the model is built
    loaded = load_model(model_file, entry, args.inputs, args.input_shape)
    if loaded.inputs is None:
        raise UsageError(
            f"no inputs for the model in {model_file.name}: give --input-shape 1,3,224,224 "
            "(repeat per argument), --inputs NAME (a function in the file returning them), "
            "or define example_inputs() in the file"
        )
    options = _run_options(args, argv, model_file, loaded.sha256, outputs)
    options.check()
    warnings: list[str] = []
    if plan is None:
        plan = _static_plan(args, loaded.module, model_file, entry)  # made here: trusted as is
    else:
        plan = checked_plan(plan, loaded.module, probe(), warnings)  # from a file: checked
    with ProgressBar(wanted()) as bar:
        return run(
            loaded.module,
            loaded.inputs,
            _with_model(plan, model_file, entry),
            options,
            warnings=warnings,
            progress=bar,
        )


def _static_plan(
    args: argparse.Namespace, module: Any, model_file: Path, entry: str
) -> ProfilePlan:
    """The static planner's plan for the selection given, so the report shows its findings too."""
    from hybridprof.planner.plan import plan_model

    paths, globs = split_selectors(args.paths)
    return plan_model(
        module,
        paths or None,
        globs,
        args.depth,
        with_parents=args.with_parents,
        strategy=args.strategy or DEFAULT_STRATEGY,
        model_file=str(model_file),
        entry=entry,
    )


def _run_options(
    args: argparse.Namespace, argv: list[str], model_file: Path, sha256: str, outputs: RunOutputs
) -> RunOptions:
    from hybridprof.runtime.driver import RunOptions

    return RunOptions(
        warmup=args.warmup,
        iters=args.iters,
        max_time_s=args.max_time,
        strategy=args.strategy,
        device=args.device,
        profile_memory=args.profile_memory,
        backward=args.backward,
        flops=args.flops,
        peak_gflops=args.peak_gflops,
        peak_gbps=args.peak_gbps,
        threads=args.threads,
        trace_path=str(outputs.trace) if outputs.trace else None,
        command=("hybridprof", "run", *argv),
        model_file=str(model_file.resolve()),
        model_hash=sha256,
    )


def _with_model(plan: ProfilePlan, model_file: Path, entry: str) -> ProfilePlan:
    if plan.model_file:
        return plan
    from dataclasses import replace

    return replace(plan, model_file=str(model_file), entry=entry)


def _save(session: ProfileSession, outputs: RunOutputs, force: bool) -> list[Path]:
    """Write the session and reports; returns hybridprof's own files that were there before."""
    written = [p for p in (outputs.session, *outputs.reports) if p is not None]
    replaced = own_files_present(written, outputs.own)
    make_folders(written)
    if outputs.session is not None:
        write_atomic(outputs.session, session.to_json(), outputs.force_for(outputs.session, force))
    else:
        emit([session.to_json()])
    for report in outputs.reports:
        write_report(session, report, force=outputs.force_for(report, force))
    return replaced


def _print_results(session: ProfileSession, outputs: RunOutputs) -> None:
    where = where_lines(session, outputs.session, outputs.reports, outputs.trace)
    lines = [*terminal_table(session), *where]
    if outputs.human is sys.stdout:
        emit(lines)
    else:
        print("\n".join(lines), file=sys.stderr)
