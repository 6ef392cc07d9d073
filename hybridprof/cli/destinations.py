"""Where a command's outputs go, and the overwrite rule every command follows.

Files you name (-o, --report, --trace) are never overwritten without --force. Files hybridprof names
itself (./hybridprof-out/session.json, a session saved beside your report) are replaced on the next
run with a one-line note, as a build folder is, but only when hybridprof wrote the file there (never
a symlink, never a file of yours: files/own_files.py). Everything is checked before any work;
folders are created only when something is written, so a refused or failed command leaves nothing
behind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from hybridprof.cli.common import STDOUT, check_pdf_support, notice
from hybridprof.errors import OutputError, UsageError
from hybridprof.files.outputs import check_output_path, folders_locked
from hybridprof.reporting import renderer_for
from hybridprof.reporting.format import visible

DEFAULT_OUT_DIR = Path("hybridprof-out")


def check_outputs(
    paths: Sequence[Path], own: Collection[Path], force: bool, inputs: Iterable[Path] = ()
) -> None:
    """Each output can be written (its own files: folder creatable, or what is there is
    hybridprof's), is none of the inputs, and none is given twice."""
    check_distinct(paths)
    for path in paths:
        if path in own and not path.parent.exists():
            check_creatable(path.parent)
        else:
            check_output_path(path, force, inputs, own=path in own)


def check_distinct(paths: Iterable[Path]) -> None:
    seen: set[Path] = set()
    for path in paths:
        key = path.resolve()
        if key in seen:
            raise UsageError(f"'{path}' is given as two outputs; give each output its own file")
        seen.add(key)


def check_creatable(folder: Path) -> None:
    """`folder` exists or can be made: its nearest existing ancestor is a writable folder."""
    ancestor = folder
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"cannot create folder '{folder}': '{ancestor}' is a file; choose another")
    if ancestor != folder and not os.access(ancestor, os.W_OK):
        raise OutputError(f"cannot create folder '{folder}': '{ancestor}' is not writable")


def make_folders(paths: Iterable[Path]) -> None:
    """Create the folders the outputs go into (only now, when there is something to write)."""
    for path in paths:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputError(f"cannot create folder '{path.parent}': {exc.strerror}") from exc


def own_files_present(paths: Iterable[Path], own: Collection[Path]) -> list[Path]:
    """hybridprof's own files that an earlier run left and this one will replace (checked to be
    hybridprof's by `check_outputs`: anything else there was refused)."""
    return [p for p in paths if p in own and os.path.lexists(p)]


def say_replaced(paths: Sequence[Path], stream: TextIO | None = None) -> None:
    """One line for the own files replaced (on `stream`, default stdout, like other results)."""
    if paths:
        names = ", ".join(visible(str(p)) for p in paths)
        notice(
            f"replaced {names} from an earlier run (hybridprof reuses its own file names; "
            "files you name need --force)",
            sys.stdout if stream is None else stream,
        )


def is_stdout(name: str | None) -> bool:
    return name == STDOUT


@dataclass(frozen=True, slots=True)
class RunOutputs:
    """Every file `hybridprof run` will write, checked before any torch work."""

    session: Path | None  # None: the session JSON goes to stdout (-o -)
    reports: tuple[Path, ...]
    trace: Path | None
    own: frozenset[Path]  # files hybridprof named itself: replaced with a note, no --force needed
    inputs: tuple[Path, ...] = ()  # the model file and plan: never written over
    out_dir: Path | None = None  # holds own files: locked for the run, so two runs never mix
    speedup: tuple[Path, ...] = ()  # --compare-eager's comparison (own names): HTML, JSON

    def files(self) -> list[Path]:
        files = (self.session, *self.reports, self.trace, *self.speedup)
        return [p for p in files if p is not None]

    @property
    def human(self) -> TextIO:
        """Where the table and the lines for people go: stdout, unless it carries the session."""
        return sys.stdout if self.session is not None else sys.stderr


def plan_run_outputs(args: argparse.Namespace, inputs: tuple[Path, ...] = ()) -> RunOutputs:
    """Decide and check every output path (folder exists or can be made, writable, not there
    without --force unless hybridprof named it). Nothing is created here."""
    if any(is_stdout(name) for name in (*args.report, args.trace)):
        raise UsageError(
            "only -o takes - (the session JSON on stdout); --report and --trace need files"
        )
    reports = [Path(r) for r in args.report]
    out_dir = Path(args.out_dir) if args.out_dir else DEFAULT_OUT_DIR
    own: set[Path] = set()
    if args.output:
        session = None if is_stdout(args.output) else Path(args.output)
    else:
        session = _session_beside(reports[0]) if reports and not args.out_dir else None
        session = session or out_dir / "session.json"
        own.add(session)
    if not reports and not args.output:
        reports = [out_dir / "report.html"]
        own.update(reports)
    trace = Path(args.trace) if args.trace else None
    speedup = _speedup_files(reports, session, out_dir) if getattr(args, "compare_eager", 0) else ()
    own.update(speedup)
    in_out_dir = any(p.parent == out_dir for p in own)
    outputs = RunOutputs(
        session, tuple(reports), trace, frozenset(own), inputs, out_dir if in_out_dir else None,
        speedup,
    )  # fmt: skip
    if args.out_dir and out_dir.exists() and not out_dir.is_dir():
        raise UsageError(f"--out-dir '{out_dir}' exists and is not a folder; choose another")
    for report in reports:
        renderer_for(report)  # a known format, and its renderer importable, before any work
    check_pdf_support(reports)  # missing system libraries are said before a long run, not after
    check_outputs(outputs.files(), own, args.force, inputs)
    return outputs


def _speedup_files(reports: list[Path], session: Path | None, out_dir: Path) -> tuple[Path, ...]:
    """--compare-eager's comparison, named after the run's first named output (net.html ->
    net.compare.html and net.compare.json beside it), else OUT/compare.html and .json: names
    hybridprof picks, so replaced only over a comparison it wrote, never through a link."""
    named = reports[0] if reports else session
    if named is None or (named.parent == out_dir and named.stem in ("report", "session")):
        return (out_dir / "compare.html", out_dir / "compare.json")
    return (
        named.with_name(f"{named.stem}.compare.html"),
        named.with_name(f"{named.stem}.compare.json"),
    )


def _session_beside(report: Path) -> Path:
    """The session saved next to the user's first report: net.html -> net.session.json."""
    return report.with_name(f"{report.stem}.session.json")


@contextlib.contextmanager
def outputs_locked(outputs: RunOutputs) -> Iterator[None]:
    """Lock every folder the run writes into (two runs writing into one folder would leave a
    session from one and a report from the other, or one replacing the other's). The out dir is
    made now, after every check passed, and removed again if the run ends without writing into
    it."""
    folder = outputs.out_dir
    made = folder is not None and not folder.exists()
    if folder is not None:
        make_folders([folder / "session.json"])
    try:
        with folders_locked({p.parent for p in outputs.files()} | ({folder} if folder else set())):
            yield
    finally:
        if made and folder is not None:
            with contextlib.suppress(OSError):  # not empty: the run wrote there, keep it
                folder.rmdir()
