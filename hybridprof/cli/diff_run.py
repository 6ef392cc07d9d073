"""`hybridprof diff --run`: load two model files (or one at git revisions), profile them in one
process with their iterations interleaved, and compare pair by pair.

Everything cheap is checked first (options, outputs, the files and revisions, their syntax), then
both models are imported separately (each its own module, so module state is not shared) with
torch's random generator seeded alike before each, so two builds of one model get the same weights
and random inputs. Files read at a git revision live in a temporary folder removed at the end.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hybridprof.cli.common import check_pdf_support, model_prints_to_stderr, notice
from hybridprof.cli.destinations import check_outputs
from hybridprof.cli.profiling import check_measuring_values, static_plan
from hybridprof.cli.progress import ProgressBar, wanted
from hybridprof.errors import UsageError
from hybridprof.files.loader import DEFAULT_ENTRY, file_sha256, read_model_source
from hybridprof.files.revisions import Checkout
from hybridprof.runtime.basics.limits import DEFAULT_THREADS, default_threads_line
from hybridprof.runtime.basics.signals import sigterm_as_interrupt

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfileSession
    from hybridprof.diff import DiffResult, Floor
    from hybridprof.runtime.runs.lanes import LaneModel
    from hybridprof.runtime.runs.options import RunOptions

SEED = 1234  # the same for both models: same weights and random inputs for the same code
# Numbers each import's module name: a second paired run in one process (a test, a notebook)
# imports both files afresh instead of reusing the first run's modules and their state.
_IMPORTS = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Source:
    """One side's model file: where it is read from, and what the reports call it."""

    file: Path  # the file to import (a temporary copy for a git revision)
    label: str  # e.g. "net.py" or "net.py@main (3f2a1bc0de)"
    siblings: Path | None = None  # the checkout folder its imports come from (git revisions)


@dataclass(frozen=True, slots=True)
class PairedOutcome:
    """A paired run's comparison (None: stopped before a pair), and the exit code of a run
    stopped by Ctrl-C (130) or SIGTERM (143), None when it ran to its end."""

    result: DiffResult | None
    stopped: int | None = None
    sessions: tuple[ProfileSession, ...] = ()  # base's and new's (for --history)


def paired_diff(
    args: argparse.Namespace,
    argv: list[str],
    threshold: float,
    floor: Floor | None,
    outputs: list[Path],
) -> PairedOutcome:
    """The comparison of a paired run of the two models."""
    _check_values(args)
    check_pdf_support(outputs)
    with _sources(args) as (sources, notes):
        inputs = [source.file for source in sources] + [Path(name) for name in args.files]
        check_outputs(outputs, (), args.force, inputs)  # no report may replace a model file
        for source in sources:
            read_model_source(source.file)  # syntax errors said before anything runs
        with sigterm_as_interrupt() as sigterm, model_prints_to_stderr():
            try:
                result, sessions = _compare(args, argv, sources, threshold, floor, notes)
            except KeyboardInterrupt:
                how = "terminated (SIGTERM)" if sigterm.received else "interrupted"
                notice(f"{how} before a measured pair finished; nothing compared")
                return PairedOutcome(None, 143 if sigterm.received else 130)
    if args.threads is None:
        notice(default_threads_line())
    pairing = result.pairing
    if pairing is not None and pairing.stop_reason == "interrupted":
        return PairedOutcome(result, 143 if sigterm.received else 130)
    return PairedOutcome(result, sessions=sessions)


def _check_values(args: argparse.Namespace) -> None:
    """Option values that can be judged before torch or the models."""
    check_measuring_values(args)
    if args.backward and args.strategy not in (None, "session"):
        raise UsageError(
            f"--backward needs --strategy session (it attributes backward ops to layers); "
            f"'{args.strategy}' cannot: drop --strategy or drop --backward"
        )


@contextlib.contextmanager
def _sources(args: argparse.Namespace) -> Iterator[tuple[list[Source], list[str]]]:
    """Both sides' model files (and notes about them); revisions are written into a temporary
    folder of their own, removed when the block ends."""
    files = [Path(name) for name in args.files]
    if not args.rev:
        if len(files) != 2:
            raise UsageError(
                f"diff --run compares two model files, got {len(files)}: give base.py new.py, "
                "or one file with --rev main --rev HEAD"
            )
        yield [Source(f, str(f)) for f in files], []
        return
    if len(files) != 1 or len(args.rev) > 2:
        raise UsageError(
            f"--rev reads one model file at git revisions: give one file and one or two --rev "
            f"(got {len(files)} file(s), {len(args.rev)} --rev); e.g. hybridprof diff --run "
            "net.py --rev main --rev HEAD"
        )
    file = files[0]  # it need not exist in the working tree unless it is the new side
    checkout = Checkout.of(file)
    with tempfile.TemporaryDirectory(prefix="hybridprof-rev-") as folder:
        sources = [
            Source(
                checkout.write_at(rev, Path(folder)),
                f"{file}@{rev} ({checkout.commit(rev)[:10]})",
                file.resolve().parent,
            )
            for rev in args.rev
        ]
        if len(sources) == 1:
            sources.append(Source(file, f"{file} (working tree)"))
        changed = checkout.changed_beside(args.rev[0], args.rev[1] if len(args.rev) > 1 else None)
        notes = []
        if changed:
            shown = ", ".join(changed[:5]) + (" ..." if len(changed) > 5 else "")
            notes.append(
                f"only {checkout.path} is read at each revision; files beside it that differ "
                f"between them ({shown}) are imported from the working tree for both"
            )
        yield sources, notes


def _compare(
    args: argparse.Namespace,
    argv: list[str],
    sources: list[Source],
    threshold: float,
    floor: Floor | None,
    notes: list[str],
) -> tuple[DiffResult, tuple[ProfileSession, ProfileSession]]:
    """The torch part: load, plan, measure the per-op cost, run paired, compare."""
    from dataclasses import replace

    from hybridprof.diff import default_floor, diff_sessions
    from hybridprof.runtime.basics.workload import resolve_device, torch_threads
    from hybridprof.runtime.runs.interleaved import decided, run_paired
    from hybridprof.runtime.strategies.op_cost import profiler_op_cost_us

    resolve_device(args.device)  # no CUDA: said before the models are built
    base, new = (_side(args, sources[0], "base"), _side(args, sources[1], "new"))
    opts = _run_options(args, argv)
    if opts.threads is None:  # the default, said once the comparison is done (paired_diff)
        opts = replace(opts, threads=DEFAULT_THREADS)
    if floor is None:
        with torch_threads(opts.run_threads):
            floor = default_floor(profiler_op_cost_us())
    with ProgressBar(wanted()) as bar:
        sessions = run_paired(base, new, opts, settled=decided(threshold, floor), progress=bar)
    result = diff_sessions(
        *sessions,
        threshold,
        base_label=sources[0].label,
        new_label=sources[1].label,
        floor=floor,
        paired=True,
    )
    return replace(result, notes=result.notes + tuple(notes)), sessions


def _side(args: argparse.Namespace, source: Source, tag: str) -> LaneModel:
    import torch

    from hybridprof.files.loader import load_model
    from hybridprof.runtime.runs.lanes import LaneModel

    entry = args.entry or DEFAULT_ENTRY
    torch.manual_seed(SEED)
    loaded = load_model(
        source.file,
        entry,
        args.inputs,
        args.input_shape,
        tag=f"{tag}{next(_IMPORTS)}",
        siblings=source.siblings,
    )
    if loaded.inputs is None:
        raise UsageError(
            f"no inputs for the model in {source.label}: give --input-shape 1,3,224,224 (repeat "
            "per argument), --inputs NAME (a function in the file returning them), or define "
            "example_inputs() in the file"
        )
    plan = static_plan(args, loaded.module, source.file, entry)
    return LaneModel(loaded.module, loaded.inputs, plan, source.label, file_sha256(source.file))


def _run_options(args: argparse.Namespace, argv: list[str]) -> RunOptions:
    from hybridprof.cli.measure_options import command_run_options

    return command_run_options(args, "diff", command=("hybridprof", "diff", *argv))


__all__ = ["paired_diff"]
