"""Profile a model file layer by layer; save the session and reports.

With no model file, profiles the bundled AlexNet-like example and writes session.json and
report.html into ./hybridprof-out/ (or --out-dir); files that hybridprof names itself inside an out
dir are overwritten on the next run, files you name (-o, --report, --trace) need --force.

examples:
  hybridprof run
  hybridprof run net.py --entry build_model --input-shape 8,3,32,32 --report net.html
  hybridprof run net.py --plan plan.json --iters 50 -o session.json --report net.pdf
  hybridprof run net.py --backward --paths 'blocks.*' --report train.html
  hybridprof run net.py --leaves-only    # torchprof's selection: leaves only
  hybridprof run net.py --flops           # FLOPs, bytes and a roofline verdict per layer
  hybridprof run net.py --warmup auto --iters auto --max-time 60 --threads 1
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hybridprof.cli.common import (
    add_common_options,
    command_parser,
    guarded,
    model_prints_to_stderr,
)
from hybridprof.cli.profiling import (
    DEFAULT_OUT_DIR,
    check_report_paths,
    make_out_dir,
    model_and_entry,
    profile_loaded,
)
from hybridprof.cli.run_ranks import add_rank_options, run_rank, torchrun_launch
from hybridprof.cli.terminal import emit, roofline_lines, summary_line, terminal_table
from hybridprof.errors import OutputError, UsageError
from hybridprof.loader import DEFAULT_ENTRY, parse_shape, read_model_source
from hybridprof.outputs import check_output_path, folder_locked, rescue_copy, write_atomic
from hybridprof.reporting import known_extensions, write_report
from hybridprof.reporting.trust import stability_line
from hybridprof.runtime.signals import TerminateHandler, sigterm_as_interrupt
from hybridprof.runtime.stopping import AUTO_TARGET_PCT, DEFAULT_MAX_TIME_S, Count, parse_count
from hybridprof.runtime.strategies import DEFAULT_STRATEGY, STRATEGIES, backward_strategies

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfilePlan, ProfileSession


def build_parser() -> argparse.ArgumentParser:
    parser = command_parser("run", __doc__)
    parser.add_argument("model", nargs="?", help="model file (default: the bundled AlexNet demo)")
    parser.add_argument(
        "--entry", help=f"function returning the nn.Module (default {DEFAULT_ENTRY})"
    )
    given = parser.add_mutually_exclusive_group()
    given.add_argument("--inputs", metavar="NAME", help="function in the file returning the inputs")
    given.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="SHAPE",
        help="random input of this shape, e.g. 1,3,224,224 or 4x128:long (repeat per argument)",
    )
    _add_selection_options(parser)
    _add_measure_options(parser)
    _add_output_options(parser)
    add_rank_options(parser)
    add_common_options(parser)
    return parser


def _add_selection_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--plan", help="profile exactly what this plan (hybridprof analyze) selects"
    )
    parser.add_argument(
        "--paths",
        nargs="+",
        default=[],
        metavar="PATH",
        help="dotted paths or globs ('features.*')",
    )
    parser.add_argument("--depth", type=int, help="select every module at this depth")
    parser.add_argument(
        "--leaves-only",
        action="store_true",
        help="profile only the leaves (default: every module that runs a forward, so the rows "
        "add up to the whole step)",
    )
    parser.add_argument(
        "--with-parents",
        action="store_true",
        help="with --paths/--depth/--leaves-only: also select parents whose forward runs ops "
        "directly (attention that uses its out_proj's weights, fused fast paths)",
    )


def _add_measure_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--warmup",
        type=_count,
        default=3,
        help="unmeasured iterations first (3), or auto: until iteration times stop falling",
    )
    parser.add_argument(
        "--iters",
        type=_count,
        default=20,
        help="measured iterations (20), or auto: until the median iteration time's 95%% "
        f"confidence interval is within ±{AUTO_TARGET_PCT:g}%% (at least 5 iterations)",
    )
    parser.add_argument(
        "--max-time",
        type=float,
        metavar="SECONDS",
        help=f"time limit of the iterations (default {DEFAULT_MAX_TIME_S:g} s with auto, "
        "none otherwise)",
    )
    parser.add_argument(
        "--threads",
        type=int,
        help="torch threads during the run (default: torch's); 1 gives the steadiest "
        "per-layer times on a busy machine",
    )
    parser.add_argument(
        "--device", help="cpu or cuda (default: where the entry put the model, usually cpu)"
    )
    parser.add_argument("--profile-memory", action="store_true", help="measure memory per layer")
    parser.add_argument(
        "--strategy", choices=tuple(STRATEGIES), help=f"how to measure (default {DEFAULT_STRATEGY})"
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
        "--peak-gflops", type=float, metavar="N", help="with --flops: the peak GFLOP/s to use"
    )
    parser.add_argument(
        "--peak-gbps", type=float, metavar="N", help="with --flops: the peak GB/s to use"
    )


def _add_output_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-o", "--output", metavar="SESSION.json", help="save the session here")
    parser.add_argument(
        "--report",
        action="append",
        default=[],
        metavar="FILE",
        help="write a report; the format follows the extension: " + " ".join(known_extensions()),
    )
    parser.add_argument("--trace", metavar="TRACE.json", help="write a Chrome/Perfetto trace")
    parser.add_argument(
        "--out-dir", help=f"folder for session and report (demo: ./{DEFAULT_OUT_DIR})"
    )


def _count(text: str) -> Count:
    try:
        return parse_count(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class Outputs:
    """Every file this run will write, checked before any torch work."""

    session: Path | None
    reports: tuple[Path, ...]
    trace: Path | None
    own: frozenset[Path]  # files hybridprof named itself in an out dir: overwritten freely
    inputs: tuple[Path, ...] = ()  # the model file and plan: never written over
    out_dir: Path | None = None  # locked for the run: two runs never mix their files there

    def force_for(self, path: Path, force: bool) -> bool:
        return force or path in self.own


def main(argv: Sequence[str]) -> int:
    parser = build_parser()

    def body() -> int:
        try:
            args = parser.parse_args(list(argv))
        except SystemExit as exc:  # --help
            return int(exc.code or 0)
        return run(args, list(argv))

    return guarded(body, "--debug" in argv)


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """The command body: check everything cheap first, then load, profile, save, print."""
    _check_values(args)
    launch = torchrun_launch()
    if launch is not None:
        if args.plan:
            raise UsageError("--plan is not supported under torchrun yet; select with --paths")
        if args.iters == "auto" or args.warmup == "auto" or args.max_time is not None:
            raise UsageError(
                "under torchrun every rank runs the same steps: give --warmup and --iters as "
                "numbers, without --max-time (auto counts would differ between ranks)"
            )
        return run_rank(args, argv, launch)
    if args.ddp:
        raise UsageError(
            "--ddp needs torchrun: torchrun --nproc-per-node N -m hybridprof run ... --ddp"
        )
    plan = _load_plan(args.plan) if args.plan else None
    model_file, entry = model_and_entry(args, plan)
    read_model_source(model_file)  # missing file or syntax error: said before anything is created
    inputs = (model_file, *([Path(args.plan)] if args.plan else []))
    outputs = plan_outputs(args, demo=args.model is None and plan is None, inputs=inputs)
    with folder_locked(outputs.out_dir), sigterm_as_interrupt() as sigterm:
        try:
            with model_prints_to_stderr():
                session = _profile(args, argv, model_file, entry, plan, outputs)
        except KeyboardInterrupt:
            print(
                f"hybridprof: {_stopped_by(sigterm)} before a measured iteration finished; "
                "nothing saved",
                file=sys.stderr,
            )
            return 143 if sigterm.received else 130
        _save(session, outputs, args.force)
    emit([*terminal_table(session), *_where_lines(session, outputs)])
    if session.interrupted:
        where = f"; partial session saved to {outputs.session}" if outputs.session else ""
        asked = session.requested_iterations
        print(
            f"hybridprof: {_stopped_by(sigterm)} after {session.iterations}"
            f"{'' if asked == 'auto' else f' of {asked}'} iterations{where}",
            file=sys.stderr,
        )
        return 143 if sigterm.received else 130
    return 0


def _stopped_by(sigterm: TerminateHandler) -> str:
    return "terminated (SIGTERM)" if sigterm.received else "interrupted"


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
    if args.plan and (
        args.paths or args.depth is not None or args.with_parents or args.leaves_only
    ):
        raise UsageError(
            "--plan fixes the selection; drop --paths/--depth/--leaves-only/--with-parents "
            "or edit the plan"
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


def plan_outputs(args: argparse.Namespace, demo: bool, inputs: tuple[Path, ...] = ()) -> Outputs:
    """Decide and check every output path (folder exists, writable, not there without --force)."""
    out_dir = Path(args.out_dir) if args.out_dir else (Path(DEFAULT_OUT_DIR) if demo else None)
    own: set[Path] = set()
    session = Path(args.output) if args.output else None
    reports = [Path(r) for r in args.report]
    if out_dir is not None:
        make_out_dir(out_dir)
        if session is None:
            session = out_dir / "session.json"
            own.add(session)
        if not reports:
            reports = [out_dir / "report.html"]
            own.update(reports)
    trace = Path(args.trace) if args.trace else None
    _check_distinct([p for p in (session, *reports, trace) if p is not None])
    check_report_paths(reports)
    for path in (session, *reports, trace):
        if path is not None:
            check_output_path(path, args.force or path in own, inputs)
    return Outputs(session, tuple(reports), trace, frozenset(own), inputs, out_dir)


def _check_distinct(paths: list[Path]) -> None:
    seen: set[Path] = set()
    for path in paths:
        key = path.resolve()
        if key in seen:
            raise UsageError(f"'{path}' is given as two outputs; give each output its own file")
        seen.add(key)


def _profile(
    args: argparse.Namespace,
    argv: list[str],
    model_file: Path,
    entry: str,
    plan: ProfilePlan | None,
    outputs: Outputs,
) -> ProfileSession:
    """The torch part: load the model, plan (or check the plan given), run with a progress bar."""
    from hybridprof.loader import load_model
    from hybridprof.runtime.workload import resolve_device

    resolve_device(args.device)  # no CUDA: said before the model is built
    loaded = load_model(model_file, entry, args.inputs, args.input_shape)
    trace = outputs.trace
    return profile_loaded(args, argv, model_file, entry, loaded, trace=trace, plan=plan)


def _save(session: ProfileSession, outputs: Outputs, force: bool) -> None:
    """Session first, then reports. A file that cannot be written does not lose the measurements:
    the error says where the session is (where asked, else a copy in the system temp folder)."""
    text = session.to_json()
    if outputs.session is not None:
        try:
            force_session = outputs.force_for(outputs.session, force)
            write_atomic(outputs.session, text, force_session, outputs.inputs)
        except OutputError as exc:
            raise OutputError(f"{exc}; {_kept(rescue_copy(text, 'hybridprof-session'))}") from exc
    for report in outputs.reports:
        try:
            write_report(session, report, force=outputs.force_for(report, force))
        except OutputError as exc:
            kept = outputs.session or rescue_copy(text, "hybridprof-session")
            raise OutputError(f"{exc}; {_kept(kept)}") from exc


def _kept(session_file: Path | None) -> str:
    if session_file is None:
        return "the session could not be saved anywhere"
    return f"the session is in {session_file} (re-render: hybridprof report {session_file} -o FILE)"


def _where_lines(session: ProfileSession, outputs: Outputs) -> list[str]:
    lines = [summary_line(session), *roofline_lines(session)]
    if outputs.session is not None:
        lines.append(
            f"session: {outputs.session}  (re-render: hybridprof report {outputs.session} -o FILE)"
        )
    lines += [f"report:  {r}" for r in outputs.reports]
    if outputs.trace is not None:
        from hybridprof.runtime.kineto import TRACE_ITERATIONS

        first = min(session.iterations, TRACE_ITERATIONS)
        lines.append(
            f"trace:   {outputs.trace}  (the first {first} measured iteration"
            f"{'s' if first > 1 else ''}; open in https://ui.perfetto.dev or chrome://tracing)"
        )
    if outputs.session is None and not outputs.reports:
        lines.append("nothing saved: add -o session.json and/or --report report.html")
    noisy = stability_line(session)
    lines += [f"warning: {w}" for w in ([noisy] if noisy else []) + list(session.warnings)]
    return lines
