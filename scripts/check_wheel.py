"""Build a wheel of hybridprof and check it ships the report templates and renders from an install.

    .venv/bin/python scripts/check_wheel.py            # exit 0 and "wheel OK: ..." when all holds

Steps: copy the package sources to a temp folder (so the shared working tree gets no build/ or
egg-info), `pip wheel --no-deps --no-build-isolation`, list the wheel for
`hybridprof/_templates/*.j2|css|js`, `pip install --no-deps --target` it, then in a fresh
interpreter import hybridprof from that target (not the editable checkout) and render a small
session to HTML and PDF.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("pyproject.toml", "README.md", "hybridprof", "reports")
REQUIRED = ("report.html.j2", "base.html.j2", "report.css", "print.css", "report.js")

RENDER = r"""
import sys
from pathlib import Path
import hybridprof
from hybridprof.datamodel import (Environment, ModuleRecord, ModuleTarget, OpStat, ProfilePlan,
                                  ProfileSession, Stat)
from hybridprof.reporting import write_report

target, out = Path(sys.argv[1]).resolve(), Path(sys.argv[2])
where = Path(hybridprof.__file__).resolve()
assert target in where.parents, f"hybridprof imported from {where}, not from the wheel in {target}"
import importlib.resources as r
tpl = Path(str(r.files("hybridprof._templates"))).resolve()
assert target in tpl.parents, f"templates found at {tpl}, not in the wheel"
plan = ProfilePlan(root_class="Net", targets=(
    ModuleTarget("", "Net", "m.Net", 0, False, False, "root"),
    ModuleTarget("fc", "Linear", "torch.nn.Linear", 1, True, True, "leaf")))
rec = ModuleRecord("fc", "Linear", 2, Stat(12.5, 12.0, 13.0), Stat(15.0, 14.0, 16.0),
                   ops=(OpStat("aten::addmm", 2, 12.5, 15.0),))
env = Environment("0", "t", "3", "linux", "cpu", 1, "cpu")
session = ProfileSession(plan=plan, environment=env, records=(rec,), strategy="session")
for name in ("r.html", "r.pdf", "r.csv"):
    write_report(session, out / name)
html = (out / "r.html").read_text()
assert "aten::addmm" in html and "12.500us" in html, "HTML lacks the layer's numbers"
assert (out / "r.pdf").read_bytes().startswith(b"%PDF"), "not a PDF"
print("rendered from", tpl)
"""


def run(*cmd: str, cwd: Path | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"check_wheel: {' '.join(cmd[:4])} failed:\n{done.stdout}\n{done.stderr}")
    return done.stdout


def build_wheel(tmp: Path) -> Path:
    src = tmp / "src"
    src.mkdir()
    for name in SOURCES:
        origin = ROOT / name
        if origin.is_dir():
            shutil.copytree(
                origin, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
            )
        else:
            shutil.copy2(origin, src / name)
    run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "-q",
        "--no-deps",
        "--no-build-isolation",
        "-w",
        str(tmp / "dist"),
        str(src),
    )
    return next((tmp / "dist").glob("hybridprof-*.whl"))


def check_contents(wheel: Path) -> list[str]:
    names = zipfile.ZipFile(wheel).namelist()
    templates = sorted(n for n in names if n.startswith("hybridprof/_templates/"))
    missing = [f for f in REQUIRED if f"hybridprof/_templates/{f}" not in names]
    if missing:
        sys.exit(
            f"check_wheel: {wheel.name} lacks templates {missing}; "
            "fix package-data in pyproject.toml"
        )
    return templates


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="hp-wheel-") as name:
        tmp = Path(name)
        wheel = build_wheel(tmp)
        templates = check_contents(wheel)
        target = tmp / "site"
        run(
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(target),
            str(wheel),
        )
        (tmp / "out").mkdir()
        script = tmp / "render_check.py"
        script.write_text(RENDER)
        done = subprocess.run(
            [sys.executable, str(script), str(target), str(tmp / "out")],
            cwd=tmp,
            capture_output=True,
            text=True,
            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"},
        )
        if done.returncode != 0:
            sys.exit(
                "check_wheel: rendering from the installed wheel failed:\n"
                f"{done.stdout}{done.stderr}"
            )
        print(
            f"wheel OK: {wheel.name} ships {len(templates)} template files; {done.stdout.strip()}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
