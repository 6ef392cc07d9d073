"""What `hybridprof run` shares between a single process and a torchrun rank: where the model
and outputs are, planning, and profiling a loaded model."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybridprof.cli.common import check_pdf_support, typed_selectors
from hybridprof.cli.progress import ProgressBar, wanted
from hybridprof.errors import UsageError
from hybridprof.files.loader import DEFAULT_ENTRY, parse_shape
from hybridprof.reporting import renderer_for
from hybridprof.runtime.basics.limits import DEFAULT_THREADS, iterations_problem, threads_problem
from hybridprof.runtime.strategies import DEFAULT_STRATEGY

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfilePlan, ProfileSession
    from hybridprof.files.loader import LoadedModel
    from hybridprof.runtime.runs.options import RunOptions, StepFn

DEMO_FILE = Path(__file__).resolve().parent.parent / "examples" / "alexnet.py"


def model_and_entry(args: argparse.Namespace, plan: ProfilePlan | None) -> tuple[Path, str]:
    if args.model:
        return Path(args.model), args.entry or (plan.entry if plan else None) or DEFAULT_ENTRY
    if plan is not None:
        if not plan.model_file:
            raise UsageError(
                "the plan names no model file; give it: hybridprof run MODEL.py --plan ..."
            )
        return Path(plan.model_file), args.entry or plan.entry or DEFAULT_ENTRY
    return DEMO_FILE, args.entry or DEFAULT_ENTRY


def check_report_paths(reports: Sequence[Path]) -> None:
    """Every report's format known, and its renderer importable, before any work."""
    for report in reports:
        renderer_for(report)
    check_pdf_support(reports)  # missing system libraries are said before a long run, not after


def make_out_dir(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise UsageError(f"--out-dir '{folder}' exists and is not a folder; choose another")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create --out-dir '{folder}': {exc.strerror}") from exc


def profile_loaded(
    args: argparse.Namespace,
    argv: list[str],
    model_file: Path,
    entry: str,
    loaded: LoadedModel,
    *,
    trace: Path | None,
    plan: ProfilePlan | None = None,
    device: str | None = None,
    step: StepFn | None = None,
    progress: bool = True,
    exclude_stolen: bool = True,
) -> ProfileSession:
    """Plan (or check the plan given) and run a loaded model, with a progress bar on a terminal
    (`exclude_stolen`: False for a torchrun rank, which must step with the others)."""
    from hybridprof.runtime.runs.fixed import run

    _need_inputs(loaded, model_file)
    options = run_options(args, argv, model_file, loaded.sha256, trace, device)
    options.check()
    warnings: list[str] = []
    plan = _plan_for(args, loaded.module, model_file, entry, plan, warnings)
    setup = _compiled_setup(args, loaded.module)
    if options.threads is None:  # the default, given: a compiled model's too (compiled here)
        options = replace(options, threads=DEFAULT_THREADS)
    if not exclude_stolen:
        options = replace(options, exclude_stolen=False)
    if setup is not None:
        options = replace(options, compiled_by_hybridprof=setup.by_hybridprof)
    compiling = _compiling(setup.model if setup is not None else loaded.module)
    with ProgressBar(progress and wanted(), compiling=compiling) as bar:
        if setup is not None and getattr(args, "compare_eager", False):
            from hybridprof.cli.speedup_outputs import run_speedup

            files = getattr(args, "speedup_files", None) or ()
            return run_speedup(
                setup, loaded.inputs, with_model(plan, model_file, entry), options, files, bar
            )
        return run(
            setup.model if setup is not None else loaded.module,
            loaded.inputs,
            with_model(plan, model_file, entry),
            options,
            warnings=warnings,
            progress=bar,
            step=step or (setup.step(options) if setup is not None else None),
        )


def _need_inputs(loaded: LoadedModel, model_file: Path) -> None:
    if loaded.inputs is None:
        raise UsageError(
            f"no inputs for the model in {model_file.name}: give --input-shape 1,3,224,224 "
            "(repeat per argument), --inputs NAME (a function in the file returning them), "
            "or define example_inputs() in the file"
        )


def _compiling(model: Any) -> str | None:
    """What the warm-up compiles, for the line said while it does ("blocks (inductor)")."""
    from hybridprof.runtime.compiled.compile_again import warm_paths
    from hybridprof.runtime.compiled.detect import find_compiled

    layout = find_compiled(model)
    if layout is None:
        return None
    again = warm_paths(model)  # ran compiled already: compiled again, hooked, for the profile
    return ", ".join(
        f"{p.path or 'the model'}{' again' if p.path in again else ''} ({p.backend})"
        for p in layout.parts
    )


def _plan_for(
    args: argparse.Namespace,
    module: Any,
    model_file: Path,
    entry: str,
    plan: ProfilePlan | None,
    warnings: list[str],
) -> ProfilePlan:
    """A plan made now (trusted as is), or the plan given, from a file: checked against the
    model (what it could not keep is said in `warnings`)."""
    if plan is None:
        return static_plan(args, module, model_file, entry)
    from hybridprof.planner.compat import probe
    from hybridprof.planner.plan_check import checked_plan

    return checked_plan(plan, module, probe(), warnings)


def _compiled_setup(args: argparse.Namespace, module: Any) -> Any:
    """--compile / --compare-eager, or a model the entry compiled (None: all eager)."""
    from hybridprof.runtime.runs.compile_setup import compiled_for_run

    return compiled_for_run(
        module,
        getattr(args, "compile", False),
        getattr(args, "compile_mode", None),
        getattr(args, "compare_eager", False),
        grad_as_called=False,  # a command runs forwards under no_grad: nothing runs after it
    )


def static_plan(args: argparse.Namespace, module: Any, model_file: Path, entry: str) -> ProfilePlan:
    """The static planner's plan for the selection given, so the report shows its findings too."""
    from hybridprof.planner.live_plan import plan_model

    return plan_model(
        module,
        typed_selectors(args.paths) or None,
        (),
        args.depth,
        with_parents=args.with_parents,
        leaves_only=args.leaves_only,
        strategy=args.strategy or DEFAULT_STRATEGY,
        model_file=str(model_file),
        entry=entry,
    )


def run_options(
    args: argparse.Namespace,
    argv: list[str],
    model_file: Path,
    sha256: str,
    trace: Path | None,
    device: str | None,
) -> RunOptions:
    """`run`'s measuring options (`measure_options`), and what the run knows of its files."""
    from hybridprof.cli.measure_options import command_run_options

    return command_run_options(
        args,
        "run",
        device=device or args.device,
        trace_path=str(trace) if trace else None,
        command=("hybridprof", "run", *argv),
        model_file=str(model_file.resolve()),
        model_hash=sha256,
    )


def with_model(plan: ProfilePlan, model_file: Path, entry: str) -> ProfilePlan:
    if plan.model_file:
        return plan
    from dataclasses import replace

    return replace(plan, model_file=str(model_file), entry=entry)


def check_measuring_values(args: argparse.Namespace) -> None:
    """The measuring options `run` and `diff --run` share, judged before torch or the model:
    counts, their limits (runtime/basics/limits.py), threads, time, depth, shapes and device."""
    if isinstance(args.iters, int) and args.iters < 1:
        raise UsageError(f"--iters must be 1 or more, got {args.iters}; or give auto")
    if isinstance(args.warmup, int) and args.warmup < 0:
        raise UsageError(f"--warmup must be 0 or more, got {args.warmup}; or give auto")
    for option, count in (("--iters", args.iters), ("--warmup", args.warmup)):
        if isinstance(count, int) and (problem := iterations_problem(count, option)):
            raise UsageError(problem)
    if args.threads is not None and (problem := threads_problem(args.threads, "--threads")):
        raise UsageError(problem)
    if args.max_time is not None and not args.max_time > 0:
        raise UsageError(f"--max-time must be more than 0 seconds, got {args.max_time:g}")
    if args.depth is not None and args.depth < 0:
        raise UsageError(f"--depth must be 0 or more, got {args.depth}")
    for spec in args.input_shape:
        parse_shape(spec)
    if args.device and args.device.split(":")[0] not in ("cpu", "cuda"):
        raise UsageError(f"--device {args.device!r} is not supported; use cpu or cuda")
