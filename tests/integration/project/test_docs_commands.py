"""Every command in README.md and docs/*.md runs as written, and every link there resolves.

Each Markdown file's fenced ```sh, ```bash and ```python blocks run in order, in a fresh temporary
folder per file, as a user would run them after set-up: shell blocks with bash (`set -euo
pipefail`, the venv's bin first on PATH), python blocks with the venv's python, each block in its
own process. Words after the language in a block's info string mark it:

- `file=NAME`: the block is a file the next blocks use (a model file). It is written to NAME in
  the folder, not run.
- `needs=cuda`: skipped without CUDA. `needs=torchrun`: skipped without `torchrun` or with fewer
  than 2 CPUs (it starts 2 processes).

Not run here: the set-up and test-suite commands (`bash scripts/setup.sh`, `bash scripts/test.sh`,
`scripts/test_torch214.sh`, `scripts/gpu_check.sh`, `TORCH_INDEX_URL=...`, `pip install`). They
install packages, run this suite, or need a GPU. CI runs `bash scripts/test.sh` itself (.ci/run),
which runs the set-up first. A block holding one of them must hold nothing else, so no other
command goes unrun. benchmarks/README.md is not run either: its commands take minutes each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.paths import ROOT

BIN = Path(sys.executable).parent  # the venv's bin: hybridprof, torchrun, python
RUN_DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINKED_DOCS = [*RUN_DOCS, ROOT / "CHANGELOG.md", ROOT / "benchmarks" / "README.md"]
LANGUAGES = {"sh": "shell", "bash": "shell", "python": "python"}
NEEDS = {"cuda", "torchrun"}
SETUP_COMMANDS = re.compile(
    r"bash scripts/setup\.sh|bash scripts/test\.sh|scripts/test_torch214\.sh|"
    r"scripts/gpu_check\.sh|TORCH_INDEX_URL=|pip install"
)
FENCE = re.compile(r"^```(.*)$")


@dataclass(frozen=True)
class Block:
    doc: Path
    line: int  # of the opening fence
    language: str  # as written: sh, bash, python, text, ...
    marks: dict[str, str]
    text: str

    def where(self) -> str:
        return f"{self.doc.relative_to(ROOT)}:{self.line}"

    @property
    def runnable(self) -> bool:
        return self.language in LANGUAGES

    @property
    def setup_only(self) -> bool:
        return self.language in LANGUAGES and bool(SETUP_COMMANDS.search(self.text))


def blocks_of(doc: Path) -> list[Block]:
    blocks: list[Block] = []
    lines = doc.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if opening is None:
            i += 1
            continue
        words = opening.group(1).split()
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith("```")), None)
        assert end is not None, f"{doc.relative_to(ROOT)}:{i + 1}: a block is never closed"
        marks = dict(w.partition("=")[::2] for w in words[1:])
        text = "\n".join(lines[i + 1 : end]) + "\n"
        blocks.append(Block(doc, i + 1, words[0] if words else "", marks, text))
        i = end + 1
    return blocks


def missing_need(block: Block) -> str | None:
    need = block.marks.get("needs")
    if need == "cuda":
        import torch

        return None if torch.cuda.is_available() else "needs CUDA"
    if need == "torchrun":
        if shutil.which("torchrun", path=str(BIN)) is None:
            return "needs torchrun"
        return None if (os.cpu_count() or 1) >= 2 else "needs 2 CPUs for torchrun"
    return None


def run_block(block: Block, folder: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        "XDG_CACHE_HOME": str(folder / ".cache"),  # --flops caches the machine's peak there
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if LANGUAGES[block.language] == "shell":
        argv = ["bash", "-c", "set -euo pipefail\n" + block.text]
    else:
        argv = [sys.executable, "-c", block.text]
    return subprocess.run(
        argv, cwd=folder, env=env, capture_output=True, text=True, timeout=300, check=False
    )


@pytest.mark.slow
@pytest.mark.parametrize("doc", RUN_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_block_runs_as_written(doc: Path, tmp_path: Path) -> None:
    skipped = []
    for block in blocks_of(doc):
        if "file" in block.marks:
            (tmp_path / block.marks["file"]).write_text(block.text, encoding="utf-8")
            continue
        if not block.runnable or block.setup_only:
            continue
        reason = missing_need(block)
        if reason is not None:
            skipped.append(f"{block.where()} ({reason})")
            continue
        done = run_block(block, tmp_path)
        assert done.returncode == 0, (
            f"{block.where()} failed (exit {done.returncode}):\n{block.text}\n"
            f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}"
        )
    if skipped:
        print("skipped:", *skipped, sep="\n  ")


@pytest.mark.parametrize("doc", RUN_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_blocks_are_marked_as_the_test_reads_them(doc: Path) -> None:
    for block in blocks_of(doc):
        assert block.language, f"{block.where()}: give the block a language (sh, python, text)"
        unknown = set(block.marks) - {"file", "needs"}
        assert not unknown, f"{block.where()}: unknown marks {unknown}"
        assert block.marks.get("needs", "cuda") in NEEDS, f"{block.where()}: needs= one of {NEEDS}"
        if block.setup_only:
            others = [
                line
                for line in block.text.splitlines()
                if line.strip() and not line.lstrip().startswith("#")
                if not SETUP_COMMANDS.search(line)
            ]
            assert others == [], f"{block.where()}: set-up blocks hold only set-up commands"


LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def anchors_of(doc: Path) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces to hyphens."""
    headings = re.findall(r"^#+ (.+)$", doc.read_text(encoding="utf-8"), flags=re.M)
    return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_resolve_inside_the_repository(doc: Path) -> None:
    for target in LINK.findall(doc.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        file = (doc.parent / path).resolve() if path else doc
        assert file.exists(), f"{doc.relative_to(ROOT)}: link to a missing file: {target}"
        assert ROOT in file.parents or file == ROOT, f"{doc.relative_to(ROOT)}: {target} leaves"
        if anchor and file.suffix == ".md":
            assert anchor in anchors_of(file), f"{doc.relative_to(ROOT)}: no heading #{anchor}"


MODULE_PATH = re.compile(
    r"`((?:hybridprof|scripts|benchmarks|tests|reports)/[\w/.]*|[\w/]+/\w+\.py)`"
)


@pytest.mark.parametrize("doc", LINKED_DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_named_source_files_exist(doc: Path) -> None:
    # `runtime/runs/driver.py` is a path under hybridprof/; `scripts/setup.sh` one under the root.
    for name in MODULE_PATH.findall(doc.read_text(encoding="utf-8")):
        name = name.rstrip("/.")
        assert (ROOT / name).exists() or (ROOT / "hybridprof" / name).exists(), (
            f"{doc.relative_to(ROOT)} names {name}, which does not exist"
        )


def test_readme_is_a_front_page() -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 220
    pictures = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert pictures and all((ROOT / p).is_file() for p in pictures)
    # CI and users run these two exactly as written.
    assert "bash scripts/setup.sh && .venv/bin/hybridprof run\n" in text
    assert "\nbash scripts/test.sh\n" in text


def test_the_architecture_page_names_every_folder_of_the_package() -> None:
    # Written from the tree: a folder the page does not name is one nobody explained.
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    package = ROOT / "hybridprof"
    folders = sorted(
        str(d.relative_to(package)) + "/"
        for d in package.rglob("*")
        if d.is_dir() and (d / "__init__.py").exists()
    )
    assert folders, "no packages found"
    unnamed = [f for f in folders if f"`{f}`" not in text and f"`{f[:-1]}.py`" not in text]
    assert unnamed == []
