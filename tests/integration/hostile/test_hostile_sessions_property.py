"""Hostile session files, generated: random valid-JSON mutations of real files (sessions made by
`hybridprof run`, the comparison `hybridprof diff --report` saves, the rank sessions of a real
torchrun run). Every `report` (terminal, .txt, .html, .csv, .json), `diff` and `merge` of one
either renders (exit 0, its file valid UTF-8, a CSV of one width) or refuses in one line (exit 2:
one stderr line `hybridprof: error: ...` of at most 500 characters, no traceback, no internal
error, nothing written), within 10 s and 1.5 GB more memory. A value swapped for one of another
JSON type is refused naming its field.

Each command runs in a forked child of this process (its memory and time bounded there), after one
warm-up run of each in this process: a child then starts with every renderer imported, ~10-30 ms
a command instead of the ~300 ms of a fresh `hybridprof` process. The number of examples per
property is HYBRIDPROF_HOSTILE_EXAMPLES (default 25: well under a minute in all, for CI; a nightly
job can run thousands); the search is derandomized, so a failure reproduces, unless
HYBRIDPROF_HOSTILE_RANDOM=1 (a nightly job: new examples every run).
"""

from __future__ import annotations

import contextlib
import copy
import csv
import io
import json
import os
import resource
import signal
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hybridprof.cli import main
from tests.integration.cli_run import FIXTURES

EXAMPLES = int(os.environ.get("HYBRIDPROF_HOSTILE_EXAMPLES", "25"))
RANDOM = os.environ.get("HYBRIDPROF_HOSTILE_RANDOM") == "1"
TIME_S, MEMORY_MB, MAX_LINE = 10, 1500, 500
RANKS = FIXTURES / "ranks"  # the two rank sessions of a real torchrun run of ranked_net.py
FORMATS = ("", "txt", "html", "csv", "json")

# ----------------------------------------------------------------------------- running the CLI


@dataclass(frozen=True)
class Outcome:
    code: int | None  # None: killed (past its time or memory)
    out: str
    err: str
    seconds: float


def forked(argv: list[str], cwd: Path) -> Outcome:
    """`hybridprof ARGV` in a forked child, its stdout and stderr in files, killed past TIME_S
    seconds or MEMORY_MB more address space than this process holds."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: never returns into pytest
            code = 99
            try:
                os.chdir(cwd)
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                # pytest put its capture objects there: print to the real fds 1 and 2
                sys.stdout, sys.stderr = _text_stream(1), _text_stream(2)
                limit = _address_space() + (MEMORY_MB << 20)
                resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
                signal.alarm(TIME_S)
                code = main(argv)
            except BaseException:  # anything escaping main is reported
                traceback.print_exc()
            finally:
                with contextlib.suppress(Exception):
                    sys.stdout.flush()
                    sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        seconds = time.monotonic() - start
        code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Outcome(
            code if code >= 0 else None,
            out.read().decode("utf-8", "backslashreplace"),
            err.read().decode("utf-8", "backslashreplace"),
            seconds,
        )


def _text_stream(fd: int) -> io.TextIOWrapper:
    return io.TextIOWrapper(
        io.FileIO(fd, "w", closefd=False), encoding="utf-8", errors="backslashreplace"
    )


def _address_space() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def renders_or_refuses(argv: list[str], cwd: Path, output: Path | None = None) -> Outcome:
    """The command's outcome, after checking it rendered or refused in one line."""
    if output is not None:
        output.unlink(missing_ok=True)
    done = forked(argv, cwd)
    where = f"hybridprof {' '.join(argv)[:160]}: exit {done.code}, {done.seconds:.1f} s"
    assert done.code is not None, f"killed past {TIME_S} s or {MEMORY_MB} MB: {where}"
    assert "Traceback" not in done.out + done.err, f"{where}: {done.err[-2000:]}"
    assert "internal error" not in done.err, f"{where}: {done.err[-500:]}"
    assert done.code in (0, 2), f"{where}: {done.err[-500:]}"
    if done.code == 2:
        lines = [line for line in done.err.splitlines() if line.strip()]
        assert len(lines) == 1, f"{where}: not one line: {lines[:3]}"
        assert lines[0].startswith("hybridprof: error: "), f"{where}: {lines[0][:200]}"
        assert len(lines[0]) <= MAX_LINE, f"{where}: an error line of {len(lines[0])} chars"
        assert output is None or not output.exists(), f"{where}: refused, but wrote {output}"
    elif output is not None:
        text = output.read_bytes().decode("utf-8")  # valid UTF-8, or this raises
        if output.suffix == ".csv":
            rows = list(csv.reader(io.StringIO(text, newline="")))
            assert len({len(row) for row in rows}) == 1, f"{where}: rows of several widths"
    return done


# ----------------------------------------------------------------------------- seeds


@dataclass(frozen=True)
class Seeds:
    folder: Path
    files: dict[str, Any]  # name -> parsed JSON: s (session), t (with memory), d (diff), r0, r1


@pytest.fixture(scope="module")
def seeds(tmp_path_factory: pytest.TempPathFactory) -> Seeds:
    """Real files: two runs of a small model (one with --profile-memory), their saved comparison,
    the rank sessions of a torchrun run; then one warm-up run of every command."""
    folder = tmp_path_factory.mktemp("hostile")
    model = str(FIXTURES / "run_small.py")
    quick = ["--warmup", "0", "--iters", "6", "--threads", "1"]
    with _quiet():
        assert main(["run", model, *quick, "-o", str(folder / "s.json")]) == 0
        assert main(["run", model, *quick, "--profile-memory", "-o", str(folder / "t.json")]) == 0
        assert main(["diff", str(folder / "s.json"), str(folder / "t.json"), "--report",
                     str(folder / "d.json")]) == 0  # fmt: skip
    for rank in (0, 1):
        (folder / f"r{rank}.json").write_bytes((RANKS / f"session-rank{rank}.json").read_bytes())
    files = {name: json.loads((folder / f"{name}.json").read_text()) for name in _SEED_NAMES}
    _warm_up(folder)
    return Seeds(folder, files)


_SEED_NAMES = ("s", "t", "d", "r0", "r1")


def _warm_up(folder: Path) -> None:
    """Each command once in this process, so the renderers it imports lazily are imported
    before the children are forked."""
    s, d = str(folder / "s.json"), str(folder / "d.json")
    runs = [["report", s], ["report", d], ["diff", s, s], ["merge", str(folder / "r0.json"),
            str(folder / "r1.json")]]  # fmt: skip
    runs += [["report", s, "-o", str(folder / f"warm.{ext}"), "--force"] for ext in FORMATS[1:]]
    with _quiet():
        for argv in runs:
            assert main(argv) == 0, argv


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        yield


# ----------------------------------------------------------------------------- mutations

HOSTILE_TEXTS = [
    "", "\ud800", "a\udfffb", "x" * 100_001, "\x1b]0;pwned\x07", "a\nFORGED", "\r=1+1",
    '=HYPERLINK("http://x")', "\u202eevil", "\U000e0041tag", ".".join("a" * 3000), "a" * 5_000,
    "NaN", "../../etc/passwd", "\x00",
]  # fmt: skip
HOSTILE_NUMBERS = [
    0, -1, 1, 2**31, 2**63, 10**18, 10**18 + 1, 10**19, -(10**18), 1e308, 5e-324, 0.5, -0.0,
    10**6, 10**9,
]  # fmt: skip
HOSTILE_VALUES: list[Any] = [None, True, False, [], {}, [[]], {"": None}, "1", 1, 1.5, [1] * 1000]
OPS = ("type_swap", "number", "text", "remove", "duplicate", "grow_list", "unknown_field", "deep",
       "constant", "dup_key")  # fmt: skip
# Where each mutation bites: texts where texts are, numbers where numbers are (a uniform pick over
# every place would almost never reach a record's path or the world size).
FITS = {
    "text": lambda v: isinstance(v, str),
    "number": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "grow_list": lambda v: isinstance(v, list) and bool(v),
    "unknown_field": lambda v: isinstance(v, dict),
}
Place = tuple[str | int, ...]


@dataclass(frozen=True)
class Mutation:
    op: str
    place: Place
    retyped: bool = False  # a value swapped for one of another JSON type


@dataclass(frozen=True)
class HostileFile:
    text: str
    mutations: tuple[Mutation, ...]

    def retyped_field(self) -> str | None:
        """The field a lone type swap hit (its innermost name), which a refusal must name."""
        if len(self.mutations) != 1 or not self.mutations[0].retyped:
            return None
        names = [part for part in self.mutations[0].place if isinstance(part, str)]
        return names[-1] if names else None


def places(data: Any, prefix: Place = ()) -> list[Place]:
    """Every place in the JSON tree, the first items of long lists only (they would dominate)."""
    found = [prefix]
    if isinstance(data, dict):
        for key, value in list(data.items())[:60]:
            found += places(value, (*prefix, key))
    elif isinstance(data, list):
        for index, value in enumerate(data[:8]):
            found += places(value, (*prefix, index))
    return found


def at(data: Any, place: Place) -> Any:
    for part in place:
        data = data[part]
    return data


def _json_type(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return repr(value)
    return "number" if isinstance(value, int | float) else type(value).__name__


def mutate(data: Any, place: Place, op: str, draw: Any) -> tuple[Mutation | None, Any]:
    """Apply `op` at `place`; returns what was done and a raw-text patch (or None)."""
    parent, key = at(data, place[:-1]), place[-1]
    old = parent[key]
    if op == "type_swap":
        new = copy.deepcopy(draw(st.sampled_from([*HOSTILE_VALUES, str(old), [old], {"v": old}])))
        parent[key] = new
        return Mutation(op, place, _json_type(new) != _json_type(old)), None
    if op == "number":
        parent[key] = draw(st.sampled_from(HOSTILE_NUMBERS))
    elif op == "text":
        parent[key] = draw(st.sampled_from(HOSTILE_TEXTS))
    elif op == "remove" and isinstance(parent, dict):
        del parent[key]
    elif op == "duplicate" and isinstance(parent, list):
        parent.insert(int(key), copy.deepcopy(old))
    elif op == "grow_list" and isinstance(old, list):
        parent[key] = old * draw(st.sampled_from([2, 50]))
    elif op == "unknown_field" and isinstance(old, dict):
        old["zz_unknown"] = 1
    elif op == "deep":  # [[[...0...]]] written as raw text: json.dumps cannot nest that deep
        depth = draw(st.sampled_from([50, 5_000, 200_000]))
        return Mutation(op, place), (place, "[" * depth + "0" + "]" * depth)
    elif op == "constant":  # NaN, Infinity: JSON tokens Python reads, hybridprof refuses
        token = draw(st.sampled_from(["NaN", "Infinity", "-Infinity", "1e999"]))
        return Mutation(op, place), (place, token)
    elif op == "dup_key" and isinstance(parent, dict):  # {"a": 1, "a": "dup"}
        return Mutation(op, place), (place, "DUPKEY")
    else:
        return None, None
    return Mutation(op, place), None


def dumped(data: Any, patch: Any, compact: bool) -> str:
    layout: dict[str, Any] = {"separators": (",", ":")} if compact else {"indent": 1}
    if patch is None:
        return json.dumps(data, **layout)
    place, token = patch
    marker = "__HYBRIDPROF_HOSTILE_MARK__"
    try:
        parent = at(data, place[:-1])
        saved = parent[place[-1]]
    except (KeyError, IndexError, TypeError):  # a later mutation removed the patched place
        return json.dumps(data, **layout)
    parent[place[-1]] = marker
    text = json.dumps(data, **layout)
    parent[place[-1]] = saved
    if token == "DUPKEY":
        key = place[-1]
        token = json.dumps(saved) + (f',{json.dumps(key)}:"dup"' if isinstance(key, str) else "")
    return text.replace(json.dumps(marker), token, 1)


@st.composite
def hostile_files(draw: Any, seed: Any) -> HostileFile:
    data = copy.deepcopy(seed)
    patch = None
    done: list[Mutation] = []
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(OPS))
        if op == "grow_list" and any(m.op == op for m in done):
            continue  # growth compounds (50 x 50 layers): a file stays within 50 times its seed
        fits = FITS.get(op, lambda v: True)
        choices = [p for p in places(data) if p and fits(at(data, p))]
        if not choices:
            continue
        mutation, raw = mutate(data, draw(st.sampled_from(choices)), op, draw)
        done += [mutation] if mutation else []
        patch = patch or raw
    return HostileFile(dumped(data, patch, compact=draw(st.booleans())), tuple(done))


def _write(path: Path, hostile: HostileFile) -> Path:
    path.write_text(hostile.text, encoding="utf-8", errors="surrogatepass")
    return path


def _names_the_field(done: Outcome, hostile: HostileFile) -> None:
    field = hostile.retyped_field()
    if done.code == 2 and field is not None:
        assert field[:50] in done.err, f"the refusal does not name {field!r}: {done.err.strip()}"


SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the bound is the child's alarm
    derandomize=not RANDOM,
    database=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)

# ----------------------------------------------------------------------------- the properties


@SETTINGS
@given(data=st.data())
def test_a_hostile_session_renders_or_is_refused_in_one_line(seeds: Seeds, data: Any) -> None:
    seed = data.draw(st.sampled_from(["s", "t"]))
    hostile = data.draw(hostile_files(seeds.files[seed]))
    path = _write(seeds.folder / "hostile.json", hostile)
    fmt = data.draw(st.sampled_from(FORMATS))
    output = seeds.folder / f"out.{fmt}" if fmt else None
    done = renders_or_refuses(
        ["report", str(path), *(["-o", str(output)] if output else [])], seeds.folder, output
    )
    _names_the_field(done, hostile)
    good = str(seeds.folder / f"{seed}.json")
    _names_the_field(renders_or_refuses(["diff", good, str(path)], seeds.folder), hostile)


@SETTINGS
@given(data=st.data())
def test_a_hostile_comparison_renders_or_is_refused_in_one_line(seeds: Seeds, data: Any) -> None:
    hostile = data.draw(hostile_files(seeds.files["d"]))
    path = _write(seeds.folder / "hostile-diff.json", hostile)
    fmt = data.draw(st.sampled_from(FORMATS))
    output = seeds.folder / f"diff-out.{fmt}" if fmt else None
    done = renders_or_refuses(
        ["report", str(path), *(["-o", str(output)] if output else [])], seeds.folder, output
    )
    _names_the_field(done, hostile)


@SETTINGS
@given(data=st.data())
def test_a_hostile_rank_session_merges_or_is_refused_in_one_line(seeds: Seeds, data: Any) -> None:
    which = data.draw(st.sampled_from(["r0", "r1"]))
    other = seeds.folder / ("r1.json" if which == "r0" else "r0.json")
    hostile = data.draw(hostile_files(seeds.files[which]))
    path = _write(seeds.folder / "hostile-rank.json", hostile)
    output = seeds.folder / "merged.html"
    done = renders_or_refuses(
        ["merge", str(path), str(other), "--report", str(output)], seeds.folder, output
    )
    _names_the_field(done, hostile)


# ----------------------------------------------------------------------------- targeted cases
# Besides the random search, the files the second hostile pass broke on, each through every
# command that reads it.


def _edited(seeds: Seeds, name: str, edit: Any) -> str:
    data = copy.deepcopy(seeds.files[name])
    edit(data)
    return json.dumps(data)


def _set(*place: str | int, value: Any) -> Any:
    def edit(data: Any) -> None:
        at(data, place[:-1])[place[-1]] = value

    return edit


TARGETED = {
    "a lone surrogate in a path": ("s", _set("records", 1, "path", value="fc\ud800")),
    "a lone surrogate in a class name": ("s", _set("records", 1, "class_name", value="L\udfffn")),
    "a 3,000-part path": ("s", _set("records", 1, "path", value=".".join(["a"] * 3000))),
    "a 100,000-character value of a fixed set": ("s", _set("stop_reason", value="x" * 100_000)),
    "world size 10**18 in a rank": ("r1", _set("rank", "info", "world_size", value=10**18)),
    "rank 10**18": ("r1", _set("rank", "info", "rank", value=10**18)),
    "a record's calls as text": ("s", _set("records", 1, "calls", value="2")),
}


@pytest.mark.parametrize("case", TARGETED)
def test_the_files_the_hostile_pass_broke_on_are_refused_in_one_line(
    seeds: Seeds, case: str
) -> None:
    seed, edit = TARGETED[case]
    path = seeds.folder / "targeted.json"
    path.write_text(_edited(seeds, seed, edit), encoding="utf-8")
    if seed == "s":
        for fmt in FORMATS:
            output = seeds.folder / f"targeted.{fmt}" if fmt else None
            argv = ["report", str(path), *(["-o", str(output)] if output else [])]
            assert renders_or_refuses(argv, seeds.folder, output).code == 2
        assert renders_or_refuses(["diff", str(seeds.folder / "s.json"), str(path)], seeds.folder)
    else:
        other = str(seeds.folder / "r0.json")
        assert renders_or_refuses(["merge", other, str(path)], seeds.folder).code == 2


def test_a_merged_session_claiming_10_to_the_18_ranks_is_refused(seeds: Seeds) -> None:
    merged = seeds.folder / "merged.json"
    with _quiet():
        assert main(["merge", str(seeds.folder / "r0.json"), str(seeds.folder / "r1.json"),
                     "-o", str(merged), "--force"]) == 0  # fmt: skip
    data = json.loads(merged.read_text())
    data["ranks"]["world_size"] = 10**18
    merged.write_text(json.dumps(data))
    for fmt in FORMATS:
        output = seeds.folder / f"wide.{fmt}" if fmt else None
        argv = ["report", str(merged), *(["-o", str(output)] if output else [])]
        assert renders_or_refuses(argv, seeds.folder, output).code == 2


def test_huge_endless_and_empty_files_are_refused_in_one_line(seeds: Seeds) -> None:
    sparse = seeds.folder / "sparse.json"
    sparse.write_bytes((seeds.folder / "s.json").read_bytes())
    os.truncate(sparse, 3 * 1024**3)  # 3 GiB of NUL bytes after the JSON, none on disk
    fifo = seeds.folder / "fifo.json"
    if not fifo.exists():
        os.mkfifo(fifo)
    for bad in (sparse, Path("/dev/zero"), fifo):
        for argv in (["report", str(bad)], ["diff", str(seeds.folder / "s.json"), str(bad)],
                     ["merge", str(bad)]):  # fmt: skip
            assert renders_or_refuses(argv, seeds.folder).code == 2
    sparse.unlink()
