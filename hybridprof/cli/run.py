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
  hybridprof run net.py --leaves-only    # torchprof's selection: leaves only
  hybridprof run net.py --flops           # FLOPs, bytes and a roofline verdict per layer
  hybridprof run net.py --warmup auto --iters auto --max-time 60 --threads 1
  hybridprof run net.py --compile --compare-eager   # what torch.compile changed, per layer
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hybridprof.cli.common import (
    add_common_options,
    add_model_options,
    add_selection_options,
    add_table_options,
    command_parser,
    guarded,
    model_prints_to_stderr,
    notice,
    parse_or_exit_code,
    table_choice,
)
from hybridprof.cli.destinations import (
    DEFAULT_OUT_DIR,
    RunOutputs,
    check_outputs,
    make_folders,
    outputs_locked,
    own_files_present,
    plan_run_outputs,
    say_replaced,
)
from hybridprof.cli.history.history_record import add_history_option, recorder_for_run
from hybridprof.cli.measure_options import add_measure_options
from hybridprof.cli.profiling import (
    DEMO_FILE,
    check_measuring_values,
    model_and_entry,
    profile_loaded,
)
from hybridprof.cli.run_ranks import add_rank_options, run_rank, torchrun_launch
from hybridprof.cli.terminal import emit, terminal_table, where_lines
from hybridprof.errors import OutputError, UsageError
from hybridprof.files.loader import read_model_source
from hybridprof.files.outputs import rescue_copy, write_atomic
from hybridprof.reporting import known_extensions, write_report
from hybridprof.runtime.basics.limits import default_threads_line
from hybridprof.runtime.basics.signals import TerminateHandler, sigterm_as_interrupt
from hybridprof.runtime.strategies import backward_strategies

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfilePlan, ProfileSession


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
    add_measure_options(parser, "run")
    _add_output_options(parser)
    add_table_options(parser)
    add_rank_options(parser)
    add_common_options(parser)
    return parser


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
    add_history_option(parser)
    parser.add_argument(
        "--out-dir",
        metavar="DIR",
        help="folder for the session and report files hybridprof names itself (default: "
        f"./{DEFAULT_OUT_DIR})",
    )


def main(argv: Sequence[str]) -> int:
    def body() -> int:
        args = parse_or_exit_code(build_parser(), argv)
        return args if isinstance(args, int) else run(args, list(argv))

    return guarded(body, "--debug" in argv)


def run(args: argparse.Namespace, argv: list[str]) -> int:
    """The command body: check everything cheap first, then load, profile, save, print."""
    _check_values(args)
    launch = torchrun_launch()
    if launch is not None:
        _check_rank_options(args)
        return run_rank(args, argv, launch)
    _check_single_process(args)
    plan = _load_plan(args.plan) if args.plan else None
    model_file, entry = model_and_entry(args, plan)
    read_model_source(model_file)  # missing file or syntax error: said before anything is created
    history = recorder_for_run(args.history, model_file)
    inputs = (model_file, *([Path(args.plan)] if args.plan else []))
    outputs = plan_run_outputs(args, inputs)
    args.speedup_files = outputs.speedup
    if model_file == DEMO_FILE:
        notice(
            "no model file given: profiling the bundled AlexNet-like demo "
            "(hybridprof run net.py profiles yours)",
            outputs.human,
        )
    with outputs_locked(outputs), sigterm_as_interrupt() as sigterm:
        try:
            with model_prints_to_stderr():
                session = _profile(args, argv, model_file, entry, plan, outputs)
        except KeyboardInterrupt:
            notice(f"{_stopped_by(sigterm)} before a measured iteration finished; nothing saved")
            return 143 if sigterm.received else 130
        replaced = _save(session, outputs, args.force)
    _print_results(session, outputs, args)
    if history is not None and not session.interrupted:
        print("\n".join(history.add((session,))), file=outputs.human)
    say_replaced(replaced, outputs.human)
    if session.interrupted:
        asked = session.requested_iterations
        of = "" if asked == "auto" else f" of {asked}"
        where = f"; partial session saved to {outputs.session or 'stdout'}"
        notice(f"{_stopped_by(sigterm)} after {session.iterations}{of} iterations{where}")
        return 143 if sigterm.received else 130
    return 0


def _check_single_process(args: argparse.Namespace) -> None:
    """What only a torchrun rank does: another process group's ranks to wrap the model with."""
    for option, asked in (("--ddp", args.ddp), ("--fsdp", args.fsdp or args.fsdp_wrap)):
        if asked:
            raise UsageError(
                f"{option} needs torchrun: torchrun --nproc-per-node N -m hybridprof run ... "
                f"{option}"
            )


def _check_rank_options(args: argparse.Namespace) -> None:
    """What a torchrun rank cannot do: each rank must run the same steps as the others."""
    if args.plan:
        raise UsageError("--plan is not supported under torchrun yet; select with --paths")
    if args.iters == "auto" or args.warmup == "auto" or args.max_time is not None:
        raise UsageError(
            "under torchrun every rank runs the same steps: give --warmup and --iters as "
            "numbers, without --max-time (auto counts would differ between ranks)"
        )
    if args.history:
        raise UsageError(
            "--history under torchrun: add the merged session with hybridprof "
            "history add (after hybridprof merge)"
        )
    if args.ddp and (args.fsdp or args.fsdp_wrap):
        raise UsageError("--ddp and --fsdp each wrap the model: give one of them")


def _stopped_by(sigterm: TerminateHandler) -> str:
    return "terminated (SIGTERM)" if sigterm.received else "interrupted"


def _check_values(args: argparse.Namespace) -> None:
    """Option values that can be judged without torch or the model."""
    check_measuring_values(args)
    if args.plan and (
        args.paths or args.depth is not None or args.with_parents or args.leaves_only
    ):
        raise UsageError(
            "--plan fixes the selection; drop --paths/--depth/--leaves-only/--with-parents "
            "or edit the plan"
        )
    _check_peak_values(args)
    table_choice(args)  # --columns and --sort: checked before the run, not after
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
    from hybridprof.files.storage import load_plan

    return load_plan(path)


def _profile(
    args: argparse.Namespace,
    argv: list[str],
    model_file: Path,
    entry: str,
    plan: ProfilePlan | None,
    outputs: RunOutputs,
) -> ProfileSession:
    """The torch part: load the model, plan (or check the plan given), run with a progress bar."""
    from hybridprof.files.loader import load_model
    from hybridprof.runtime.basics.workload import resolve_device

    resolve_device(args.device)  # no CUDA: said before the model is built
    loaded = load_model(model_file, entry, args.inputs, args.input_shape)
    trace = outputs.trace
    return profile_loaded(args, argv, model_file, entry, loaded, trace=trace, plan=plan)


def _save(session: ProfileSession, outputs: RunOutputs, force: bool) -> list[Path]:
    """Every output checked again, then the session, then the reports; returns hybridprof's own
    files that were there before. A file that cannot be written does not lose the measurements:
    the error says where the session is (where asked, else a copy in the system temp folder)."""
    text = session.to_json()
    written = [p for p in (outputs.session, *outputs.reports) if p is not None]
    try:  # a file made meanwhile refuses the run before it writes any, not halfway through
        check_outputs(written, outputs.own, force, outputs.inputs)
    except OutputError as exc:
        raise OutputError(f"{exc}; {_kept(rescue_copy(text, 'hybridprof-session'))}") from exc
    replaced = own_files_present(written, outputs.own)
    make_folders(written)
    if outputs.session is not None:
        try:
            own = outputs.session in outputs.own
            write_atomic(outputs.session, text, force, outputs.inputs, own=own)
        except OutputError as exc:
            raise OutputError(f"{exc}; {_kept(rescue_copy(text, 'hybridprof-session'))}") from exc
    else:
        emit([text])
    for report in outputs.reports:
        try:
            write_report(session, report, force=force, own=report in outputs.own)
        except OutputError as exc:
            kept = outputs.session or rescue_copy(text, "hybridprof-session")
            raise OutputError(f"{exc}; {_kept(kept)}") from exc
    return replaced


def _kept(session_file: Path | None) -> str:
    if session_file is None:
        return "the session could not be saved anywhere"
    return f"the session is in {session_file} (re-render: hybridprof report {session_file} -o FILE)"


def _print_results(session: ProfileSession, outputs: RunOutputs, args: argparse.Namespace) -> None:
    traced = _traced_iterations(session) if outputs.trace else 0
    # The default threads, said under the results: a failed run ends in its error alone.
    said = [f"hybridprof: {default_threads_line()}"] if args.threads is None else []
    where = where_lines(session, outputs.session, outputs.reports, outputs.trace, traced, said)
    lines = [*terminal_table(session, table_choice(args, outputs.human)), *where]
    if outputs.human is sys.stdout:
        emit(lines)
    else:
        print("\n".join(lines), file=sys.stderr)


def _traced_iterations(session: ProfileSession) -> int:
    from hybridprof.runtime.events.kineto import TRACE_ITERATIONS

    return min(session.iterations, TRACE_ITERATIONS)
