"""Files hybridprof names itself, and when it may replace one.

`run` saves OUT/session.json and OUT/report.html, `analyze` hybridprof-out/<model>.plan.json, a
run with --report saves net.session.json beside net.html, torchrun ranks OUT/session-rank<N>.json,
`run --compare-eager` OUT/compare.html and OUT/compare.json (net.compare.* beside a report):
names nobody typed, replaced on the next run without --force, as a build folder's files are. In a
folder others can write into, anyone could plant a symlink at such a name and make the next run
replace a file of their choosing; and a file of the user's own could sit there. So an own name is
replaced only when the file there is a regular file hybridprof wrote, recognised by its content (a
JSON file of the expected "kind" with a schema version; an HTML page with hybridprof's generator
tag), never a symlink or anything else. Files the user names keep the --force rule (outputs.py).
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from hybridprof.datamodel.schema import PLAN_KIND, SESSION_KIND
from hybridprof.diff.result import DIFF_KIND
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


def expected_kind(path: Path) -> str:
    """What hybridprof writes at an own name: <model>.plan.json a plan, any other .json a
    session, .html a report."""
    if path.name.endswith(".plan.json"):
        return PLAN_KIND
    if path.name.endswith(SPEEDUP_JSON):
        return DIFF_KIND
    return "html" if path.suffix.lower() in (".html", ".htm") else SESSION_KIND


def replaceable_own_file(path: Path) -> bool:
    """Whether an own name holds a file hybridprof wrote, which it may replace (False: nothing is
    there yet). OutputError for anything else there: a symlink, a folder, a special file, or a
    regular file hybridprof did not write."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise OutputError(f"cannot check output '{path}': {exc.strerror}") from exc
    if stat.S_ISLNK(mode):
        raise OutputError(
            f"'{path}' is a symbolic link; hybridprof never writes a name it picks itself through "
            f"a link: {_FIX}"
        )
    if not stat.S_ISREG(mode):
        raise OutputError(f"'{path}' exists and is not a regular file: {_FIX}")
    if not _written_by_hybridprof(path, expected_kind(path)):
        raise OutputError(
            f"'{path}' exists and is not a {_kind_name(expected_kind(path))} hybridprof wrote, "
            f"so it is not replaced: {_FIX}"
        )
    return True


def _written_by_hybridprof(path: Path, kind: str) -> bool:
    try:
        with open(path, "rb", opener=_no_follow) as handle:
            if kind == "html":
                return HTML_MARK in handle.read(HTML_HEAD_BYTES)
            data = handle.read(MAX_OWN_BYTES + 1)
    except OSError:
        return False
    if len(data) > MAX_OWN_BYTES:
        return False
    try:
        parsed = json.loads(data)
    except (ValueError, RecursionError):  # not JSON, not UTF-8, NaN, nested absurdly deep
        return False
    if not isinstance(parsed, dict):
        return False
    version = parsed.get("schema_version")
    return parsed.get("kind") == kind and type(version) is int


def _no_follow(path: str, flags: int) -> int:
    """open() that fails on a symlink, so a link planted since the check is not followed."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK)


def _kind_name(kind: str) -> str:
    return {SESSION_KIND: "session", PLAN_KIND: "plan", DIFF_KIND: "comparison"}.get(kind, "report")


__all__ = ["expected_kind", "replaceable_own_file"]
