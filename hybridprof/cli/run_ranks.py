"""`hybridprof run` under torchrun: one session per rank, merged on rank 0.

torchrun starts one `hybridprof run` per rank with RANK, WORLD_SIZE and LOCAL_RANK set. Each rank
loads the model (inputs seeded by its rank), joins the process group, runs on its device, wraps the
model in DistributedDataParallel with --ddp, is profiled like a single process and writes
OUT_DIR/session-rank{N}.json. Rank 0 then gathers every rank's session through torch.distributed
(no shared file system needed) and writes the merged session (OUT_DIR/session-merged.json, or -o)
and the reports. A rank that fails tells the others, and every rank ends with one line naming it.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hybridprof.cli.common import model_prints_to_stderr, one_line, table_choice
from hybridprof.cli.terminal import emit, terminal_table
from hybridprof.errors import DistributedError, HybridprofError, UsageError
from hybridprof.files.outputs import check_output_path, write_atomic

if TYPE_CHECKING:
    from hybridprof.datamodel import ProfileSession
    from hybridprof.runtime.distributed.rank import Launch

RANK_SEED = 1234  # random inputs of rank N come from seed RANK_SEED + N
GATHER_TIMEOUT_S = 300.0
STEP_TIMEOUT_S = 600.0  # far beyond any real step: only a hung rank runs past it
STOPPED_WAIT_S = 5.0  # how long an interrupted rank 0 waits to hear which ranks saved a session


def add_rank_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("under torchrun (data-parallel, FSDP2)")
    group.add_argument(
        "--ddp",
        action="store_true",
        help="wrap the model in DistributedDataParallel "
        "(default: profile it as the entry returns it)",
    )
    group.add_argument(
        "--fsdp",
        action="store_true",
        help="shard the model with FSDP2 (fully_shard): each child of every ModuleList, then "
        "the root (default: profile it as the entry returns it)",
    )
    group.add_argument(
        "--fsdp-wrap",
        metavar="NAME",
        help="shard through your function, FILE.py:FUNCTION or module:FUNCTION, called with "
        "the model: it calls fully_shard on it (implies --fsdp) (default: --fsdp's units)",
    )
    group.add_argument(
        "--gather-timeout",
        type=float,
        default=GATHER_TIMEOUT_S,
        metavar="SECONDS",
        help="seconds rank 0 waits for the other ranks' sessions at the end "
        f"(default: {GATHER_TIMEOUT_S:g})",
    )
    group.add_argument(
        "--step-timeout",
        type=float,
        default=STEP_TIMEOUT_S,
        metavar="SECONDS",
        help="end the run, naming the rank that hung, when a step (forward, backward) runs "
        f"longer than this on any rank (default: {STEP_TIMEOUT_S:g})",
    )


def torchrun_launch(env: dict[str, str] | None = None) -> Launch | None:
    """The rank torchrun started this process as; None outside torchrun."""
    values = os.environ if env is None else env
    names = ("RANK", "WORLD_SIZE", "LOCAL_RANK")
    if not all(values.get(n) for n in names):
        return None
    from hybridprof.runtime.distributed.rank import Launch

    try:
        rank, world, local = (int(values[n]) for n in names)
    except ValueError as exc:
        raise UsageError(
            "RANK, WORLD_SIZE and LOCAL_RANK must be integers (torchrun sets them); "
            f"got {', '.join(f'{n}={values[n]!r}' for n in names)}"
        ) from exc
    if not 0 <= rank < world:
        raise UsageError(f"RANK {rank} is outside WORLD_SIZE {world}; start it with torchrun")
    return Launch(rank, world, local)


@dataclass(frozen=True, slots=True)
class RankOutputs:
    """This rank's session file, and rank 0's merged session and reports."""

    rank_session: Path
    merged: Path | None
    reports: tuple[Path, ...]
    trace: Path | None
    own: frozenset[Path]  # names hybridprof chose: replaced only over files it wrote


def plan_rank_outputs(args: argparse.Namespace, launch: Launch) -> RankOutputs:
    from hybridprof.cli.destinations import DEFAULT_OUT_DIR
    from hybridprof.cli.profiling import check_report_paths, make_out_dir

    folder = Path(args.out_dir or (Path(args.output).parent if args.output else DEFAULT_OUT_DIR))
    make_out_dir(folder)
    rank_session = folder / f"session-rank{launch.rank}.json"
    own = {rank_session}
    merged: Path | None = None
    reports: tuple[Path, ...] = ()
    if launch.rank == 0:
        merged = Path(args.output) if args.output else folder / "session-merged.json"
        reports = tuple(Path(r) for r in args.report) or (folder / "report.html",)
        own.update(p for p in (merged, *reports) if not (args.output or args.report))
        check_report_paths(reports)
    trace = None
    if args.trace:
        given = Path(args.trace)
        trace = given.with_name(f"{given.stem}-rank{launch.rank}{given.suffix}")
    for path in (rank_session, merged, *reports, trace):
        if path is not None:
            check_output_path(path, args.force, own=path in own)
    return RankOutputs(rank_session, merged, reports, trace, frozenset(own))


def run_rank(args: argparse.Namespace, argv: list[str], launch: Launch) -> int:
    """The body of `run` on one rank (the cheap checks of `run` are done)."""
    from hybridprof.cli.profiling import model_and_entry
    from hybridprof.runtime.basics.signals import sigterm_as_interrupt

    timeouts = {"--gather-timeout": args.gather_timeout, "--step-timeout": args.step_timeout}
    for option, value in timeouts.items():
        if not 0 < value < float("inf"):
            raise UsageError(f"{option} must be above 0 seconds, got {value:g}")
    model_file, entry = model_and_entry(args, None)
    outputs = plan_rank_outputs(args, launch)
    # Schedulers stop jobs with SIGTERM, which torchrun passes to every rank: each then saves
    # what it measured, as on Ctrl-C, instead of dying with nothing saved.
    with sigterm_as_interrupt() as sigterm:
        rank = _Rank(args, argv, launch, outputs, sigterm=sigterm)
        return rank.run(model_file, entry)


@dataclass
class _Rank:
    args: argparse.Namespace
    argv: list[str]
    launch: Launch
    outputs: RankOutputs
    board: Any = None
    group: Any = None
    sigterm: Any = None  # the TerminateHandler: whether SIGTERM stopped the run
    started: float = field(default_factory=time.time)

    def run(self, model_file: Path, entry: str) -> int:
        from hybridprof.runtime.distributed.failures import FailureBoard

        self.board = FailureBoard.connect(self.launch.rank, self.launch.world_size)
        if self.board is not None:
            self.board.start()
        try:
            with model_prints_to_stderr():
                session = self._profiled(model_file, entry)
        except HybridprofError as exc:
            raise self._failed(exc) from exc
        except Exception as exc:
            error = HybridprofError(f"{type(exc).__name__}: {exc}")
            raise self._failed(error) from exc
        except KeyboardInterrupt:  # stopped before a measured iteration finished
            self._unless_the_watcher_is_ending()
            if self.board is not None:
                self.board.note_stopped(saved=False)
            raise
        try:
            return self._finish(session)
        finally:
            self._close()

    def _failed(self, exc: HybridprofError) -> HybridprofError:
        """This rank's error, posted for the others, renamed with the rank; or, when another
        rank failed first (this one then fails in a collective with it), that rank's error."""
        message = f"rank {self.launch.rank}: {exc}"
        if self.board is None:  # no store to tell the others through: a plain error
            return type(exc)(message)
        from hybridprof.runtime.distributed.failures import leave

        # From here the rank only tells the others and ends: torchrun's SIGTERM (sent once
        # another rank exits) must not cut that short, nor land in the interpreter's teardown.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        self._unless_the_watcher_is_ending()  # then this error is a consequence, no news
        first = self.board.other_failure()
        if first is not None:
            line = f"rank {first.rank} failed: {first.message} (rank {self.launch.rank} stopped)"
            print(f"hybridprof: error: {one_line(line)}", file=sys.stderr, flush=True)
            leave(DistributedError.exit_code)
        # Said before the others hear of it: once they exit, torchrun stops this rank too.
        print(f"hybridprof: error: {one_line(message)}", file=sys.stderr, flush=True)
        self.board.post(one_line(str(exc)))
        self.board.close()
        leave(exc.exit_code)
        raise AssertionError("unreachable")  # pragma: no cover (leave ends the process)

    def _close(self) -> None:
        if self.board is not None:
            self.board.close()
        if self.group is not None:
            self.group.close()

    def _profiled(self, model_file: Path, entry: str) -> ProfileSession:
        import torch

        from hybridprof.cli.profiling import profile_loaded
        from hybridprof.files.loader import load_model
        from hybridprof.runtime.distributed import rank as d

        device = d.rank_device(self.launch, self.args.device)
        torch.manual_seed(RANK_SEED + self.launch.rank)
        loaded = load_model(model_file, entry, self.args.inputs, self.args.input_shape)
        self.group = d.join_group(self.launch, device, self.args.gather_timeout)
        through = loaded.module.to(device)
        ddp = d.is_ddp(through)  # the entry may return its own DistributedDataParallel
        inner = through.module if ddp else through
        clock = d.CommClock(d.owners(inner))
        if self.board is not None:
            self.board.steps = clock.step_watch(self.args.step_timeout)
        if ddp:
            d.time_buckets(through, clock)
        elif self.args.ddp:
            through, ddp = d.wrap_ddp(inner, device, clock), True
        elif self.args.fsdp or self.args.fsdp_wrap:
            self._shard(inner, device)
        session = profile_loaded(
            self.args,
            self.argv,
            model_file,
            entry,
            replace(loaded, module=inner),
            trace=self.outputs.trace,
            device=str(device),
            step=clock.step_fn(through, self.args.backward),
            progress=False,
            exclude_stolen=False,  # the ranks' steps meet in collectives: one for one
        )
        info = d.rank_info(self.group, device, ddp)
        warmup, iterations = session.warmup, session.iterations
        run = clock.rank_run(info, warmup, iterations)
        if session.fsdp:  # no DDP buckets: the units' collectives are the communication
            run = replace(run, comm_us=d.fsdp_comm_us(session))
        return replace(
            session,
            rank=run,
            collectives=clock.bucket_rows(warmup, iterations) + d.model_collectives(session),
        )

    def _shard(self, model: Any, device: Any) -> None:
        """--fsdp: the model sharded in place, by default or by the user's wrap function."""
        from hybridprof.runtime.distributed.fsdp_wrap import load_wrap, shard

        spec = self.args.fsdp_wrap
        shard(model, device, load_wrap(spec) if spec else None, spec or "")

    def _finish(self, session: ProfileSession) -> int:
        out = self.outputs
        own = out.rank_session in out.own
        write_atomic(out.rank_session, session.to_json(), self.args.force, own=own)
        if session.interrupted:
            return self._interrupted(session)
        from hybridprof.runtime.distributed.rank import gather_to_rank0

        gathered = gather_to_rank0(self.group, session.to_json(), self.args.gather_timeout)
        if gathered is None:
            emit([f"rank {self.launch.rank}: session: {out.rank_session}"])
            return 0
        return self._merge_and_report(gathered)

    def _unless_the_watcher_is_ending(self) -> None:
        """A SIGTERM that comes while the watcher ends this rank (a step timed out, another rank
        failed) is torchrun stopping the ranks left because of it: the watcher's line is the
        news, so this rank lets it finish and leaves with it, saying nothing of the signal."""
        if self.board is not None and self.board.ending.is_set():
            self.board.wait_for_the_end()

    def _interrupted(self, session: ProfileSession) -> int:
        """Ctrl-C or SIGTERM: this rank's session is saved; rank 0 says which ranks' are."""
        self._unless_the_watcher_is_ending()
        out = self.outputs
        by_sigterm = bool(self.sigterm and self.sigterm.received)
        stopped_by = "terminated (SIGTERM)" if by_sigterm else "interrupted"
        print(
            f"hybridprof: rank {self.launch.rank} {stopped_by} after {session.iterations} "
            f"iterations; its session is saved to {out.rank_session}",
            file=sys.stderr,
            flush=True,
        )
        if self.board is not None:
            self.board.note_stopped(saved=True)
        if self.launch.rank == 0:
            print(f"hybridprof: {self._saved_sessions()}", file=sys.stderr, flush=True)
        return 143 if by_sigterm else 130

    def _saved_sessions(self) -> str:
        """Which ranks' sessions this run saved: those that said so through the store (waited
        for a few seconds), else those whose file was written since this rank started."""
        heard = self.board.stopped_ranks(STOPPED_WAIT_S) if self.board is not None else {}
        folder = self.outputs.rank_session.parent
        saved: list[int] = []
        missing: list[int] = []
        for rank in range(self.launch.world_size):
            file = folder / f"session-rank{rank}.json"
            fresh = file.is_file() and file.stat().st_mtime >= self.started
            (saved if heard.get(rank, fresh) and file.is_file() else missing).append(rank)
        names = [str(folder / f"session-rank{r}.json") for r in saved]
        said = f"rank sessions saved: {', '.join(names) or 'none'}"
        if missing:
            said += f"; missing: rank {', '.join(map(str, missing))} (saved nothing)"
        return said + " (merge the saved ones with hybridprof merge)"

    def _merge_and_report(self, payloads: list[str]) -> int:
        from hybridprof.analysis.rank_merge import merge_sessions
        from hybridprof.cli.merge import write_merged
        from hybridprof.datamodel import ProfileSession
        from hybridprof.reporting.text.ranks_text import rank_lines

        merged = merge_sessions([ProfileSession.from_json(p) for p in payloads])
        out = self.outputs
        assert out.merged is not None
        write_merged(merged, out.merged, out.reports, self.args.force, out.own)
        lines = [*terminal_table(merged, table_choice(self.args)), *rank_lines(merged)]
        lines.append(f"rank sessions: {out.rank_session.parent}/session-rank*.json (one per host)")
        lines.append(f"merged: {out.merged}")
        lines += [f"report:  {r}" for r in out.reports]
        emit(lines)
        return 0


__all__ = ["add_rank_options", "plan_rank_outputs", "run_rank", "torchrun_launch"]
