"""Files hybridprof names itself, and when it may replace one.

`run` saves OUT/session.json and OUT/report.html, `analyze` hybridprof-out/<model>.plan.json, a
run with --report saves net.session.json beside net.html, torchrun ranks OUT/session-rank<N>.json,
`run --compare-eager` OUT/compare.html and OUT/compare.json (net.compare.* beside a report):
names nobody typed, replaced on the next run without --force, as a build folder's files are. In a
folder others can write into, anyone could plant a symlink at such a name and make the next run
replace a file of their choosing; and a file of the user's own could sit there. So an own name is
replaced only when the file there is a regular file hybridprof wrote, recognised by its content (a
JSON file of the expected "kind" with a schema version; an HTML page with hybridprof's generator
tag; a text report's first line, a CSV report's header, a JSON report's rows, a PDF report's
Creator), never a symlink or anything else. Files the user names keep the --force rule
(outputs.py); a trainer callback's `overwrite=True` also replaces a regular file of the user's at
its names (`replace_users`), still never through a link.
"""

from __future__ import annotations

import json
import os
import re
import stat
import zlib
from pathlib import Path

from hybridprof.datamodel.schema import PLAN_KIND, SESSION_KIND
from hybridprof.diff.result import DIFF_KIND
from hybridprof.diff.speedup import SPEEDUP_KIND
from hybridprof.errors import OutputError

# The tag every HTML report of hybridprof's carries in its <head> (reports/templates/base.html.j2).
HTML_MARK = b'<meta name="generator" content="hybridprof '
# An own file is read whole to recognise it; a session of 10,000 layers is 6.5 MB, so a bigger
# file at an own name is not one hybridprof wrote.
MAX_OWN_BYTES = 256 * 1024 * 1024
HTML_HEAD_BYTES = 1024 * 1024  # the <head> holds the title: a model's name, up to 100,000 chars
_FIX = "move it away, or name the output yourself (-o)"
# --compare-eager's comparison: OUT/compare.json, or net.compare.json beside net.html
SPEEDUP_JSON = "compare.json"
# How each report format starts (reporting/text/text_report.py, reporting/dataframe.py).
TEXT_MARK = re.compile(rb"hybridprof \d[^\n]*: ")
CSV_MARK = b"path,name,class_name,"
PDF_CREATOR = re.compile(rb"/Creator \(hybridprof ")  # the HTML's generator tag, in the PDF
_STREAM = re.compile(rb"stream\r?\n")
_REPORT_KINDS = {".html": "html", ".htm": "html", ".txt": "text", ".csv": "csv", ".pdf": "pdf"}


def expected_kind(path: Path) -> str:
    """What hybridprof writes at an own name: <model>.plan.json a plan, any other .json a
    session (or a JSON report), .html/.txt/.csv/.pdf a report of that format."""
    if path.name.endswith(".plan.json"):
        return PLAN_KIND
    if path.name.endswith(SPEEDUP_JSON):
        return SPEEDUP_KIND
    return _REPORT_KINDS.get(path.suffix.lower(), SESSION_KIND)


def replaceable_own_file(path: Path, replace_users: bool = False, fix: str = _FIX) -> bool:
    """Whether an own name holds a file hybridprof wrote, which it may replace (False: nothing is
    there yet). OutputError for anything else there: a symlink, a folder, a special file, or a
    regular file hybridprof did not write (allowed with `replace_users`). `fix`: what the
    error line advises."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise OutputError(f"cannot check output '{path}': {exc.strerror}") from exc
    if stat.S_ISLNK(mode):
        raise OutputError(
            f"'{path}' is a symbolic link; hybridprof never writes a name it picks itself through "
            f"a link: {fix}"
        )
    if not stat.S_ISREG(mode):
        raise OutputError(f"'{path}' exists and is not a regular file: {fix}")
    if not replace_users and not _written_by_hybridprof(path, expected_kind(path)):
        raise OutputError(
            f"'{path}' exists and is not a {_kind_name(expected_kind(path))} hybridprof wrote, "
            f"so it is not replaced: {fix}"
        )
    return True


def _written_by_hybridprof(path: Path, kind: str) -> bool:
    try:
        with open(path, "rb", opener=_no_follow) as handle:
            if kind in ("html", "text", "csv"):
                return _starts_as(handle.read(HTML_HEAD_BYTES), kind)
            data = handle.read(MAX_OWN_BYTES + 1)
    except OSError:
        return False
    if len(data) > MAX_OWN_BYTES:
        return False
    if kind == "pdf":
        return _pdf_by_hybridprof(data)
    return _json_by_hybridprof(data, kind)


def _starts_as(head: bytes, kind: str) -> bool:
    if kind == "html":
        return HTML_MARK in head
    if kind == "text":
        return TEXT_MARK.match(head) is not None
    return head.startswith(CSV_MARK)


def _pdf_by_hybridprof(data: bytes) -> bool:
    """The PDF's Creator is hybridprof (WeasyPrint keeps the document information in compressed
    object streams, so each stream is inflated until it is found; the last ones first)."""
    if not data.startswith(b"%PDF-"):
        return False
    if PDF_CREATOR.search(data):
        return True
    for start in reversed([m.end() for m in _STREAM.finditer(data)]):
        end = data.find(b"endstream", start)
        try:
            inflated = zlib.decompressobj().decompress(data[start:end], MAX_OWN_BYTES)
        except zlib.error:
            continue
        if PDF_CREATOR.search(inflated):
            return True
    return False


def _json_by_hybridprof(data: bytes, kind: str) -> bool:
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, NaN, nested absurdly deep
        return False
    if kind == SESSION_KIND and _json_report_rows(parsed):
        return True
    if not isinstance(parsed, dict):
        return False
    version = parsed.get("schema_version")
    # a compare.json of an older hybridprof was the two-session diff
    kinds = (SPEEDUP_KIND, DIFF_KIND) if kind == SPEEDUP_KIND else (kind,)
    return parsed.get("kind") in kinds and type(version) is int


def _json_report_rows(parsed: object) -> bool:
    """A JSON report: a list of layer rows, each starting with path, name and class_name."""
    if not isinstance(parsed, list) or not parsed:
        return False
    return all(isinstance(row, dict) and list(row)[:3] == list(_ROW_KEYS) for row in parsed)


_ROW_KEYS = ("path", "name", "class_name")


def _no_follow(path: str, flags: int) -> int:
    """open() that fails on a symlink, so a link planted since the check is not followed."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def _kind_name(kind: str) -> str:
    names = {
        SESSION_KIND: "session",
        PLAN_KIND: "plan",
        DIFF_KIND: "comparison",
        SPEEDUP_KIND: "comparison",
        "html": "report",
    }
    return names.get(kind, f"{kind} report")


__all__ = ["expected_kind", "replaceable_own_file"]
