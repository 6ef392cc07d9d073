"""scripts/setup.sh as a user without root: it sets up what it can, names the rest in one warning.

The script runs for real on a copy of itself, as a non-root user (an `id` that answers 1000 and a
`sudo` that refuses, first on PATH), with a stand-in venv whose `python` only records what it was
asked (a real torch install takes minutes; the README's set-up is checked for real by hand).
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from tests.paths import ROOT

FAKE = "hybridprof-test-no-such-package"

pytestmark = pytest.mark.skipif(
    shutil.which("dpkg-query") is None or shutil.which("bash") is None,
    reason="the set-up script is for Debian-like systems",
)


def executable(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    copy = tmp_path / "repo"
    (copy / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "setup.sh", copy / "scripts" / "setup.sh")
    executable(
        copy / ".venv" / "bin" / "python",
        '#!/bin/sh\necho "$*" >> "$PIP_LOG"\n',
    )
    executable(copy / ".venv" / "bin" / "hybridprof", "#!/bin/sh\necho 'hybridprof 0.1.0'\n")
    stubs = tmp_path / "stubs"
    executable(
        stubs / "id",
        '#!/bin/sh\n[ "$1" = "-u" ] && { echo 1000; exit 0; }\nexec /usr/bin/id "$@"\n',
    )
    executable(stubs / "sudo", "#!/bin/sh\necho 'sudo: a password is required' >&2\nexit 1\n")
    return copy


def setup(repo: Path, *args: str, extra: str = "") -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PATH": f"{repo.parent / 'stubs'}:{os.environ['PATH']}",
        "PIP_LOG": str(repo.parent / "pip.log"),
        "HYBRIDPROF_SETUP_EXTRA_APT": extra,
    }
    return subprocess.run(
        ["bash", str(repo / "scripts" / "setup.sh"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def not_installed(*packages: str) -> list[str]:
    def installed(pkg: str) -> bool:
        status = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}", pkg], capture_output=True, text=True
        ).stdout
        return "install ok installed" in status

    return sorted(p for p in packages if not installed(p))


def warnings_in(done: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in done.stderr.splitlines() if "warning" in line]


def test_without_root_missing_packages_are_one_warning_and_the_rest_is_set_up(repo: Path) -> None:
    done = setup(repo, extra=FAKE)
    assert done.returncode == 0, done.stderr
    missing = sorted([*not_installed("libharfbuzz-subset0"), FAKE])
    assert done.stderr.splitlines() == warnings_in(done)  # nothing else on stderr: no debconf
    [warning] = warnings_in(done)
    assert warning.startswith(
        f"setup: warning: optional Debian packages not installed: {' '.join(missing)} "
    )
    assert warning.endswith(f"add them with: sudo apt-get install -y {' '.join(missing)}")
    assert "everything else is set up" in warning
    assert "setup: done (.venv/bin/hybridprof --version: hybridprof 0.1.0)" in done.stdout
    pip = (repo.parent / "pip.log").read_text()
    assert "-e ." in pip and "torch==2.13.0" in pip  # the package was installed all the same


def test_without_root_and_nothing_missing_it_is_quiet(repo: Path) -> None:
    done = setup(repo)
    assert done.returncode == 0, done.stderr
    missing = not_installed("libharfbuzz-subset0")
    assert len(warnings_in(done)) == (1 if missing else 0)
    assert "debconf" not in done.stdout + done.stderr


def test_test_extras_are_named_in_the_same_one_warning(repo: Path) -> None:
    done = setup(repo, "--test", extra=FAKE)
    assert done.returncode == 0, done.stderr
    [warning] = warnings_in(done)
    expected = not_installed(
        "libharfbuzz-subset0", "poppler-utils", "chromium", "chromium-driver", FAKE
    )
    assert f"sudo apt-get install -y {' '.join(expected)}" in warning
    assert "-e .[test]" in (repo.parent / "pip.log").read_text()


def test_the_apt_step_says_what_it_does_while_it_runs(repo: Path) -> None:
    """As root, apt-get (a stand-in that reports progress the way apt does, on the status fd it
    is given) takes minutes for chromium: a line before each step and its progress as it goes."""
    stubs = repo.parent / "stubs"
    executable(
        stubs / "id", '#!/bin/sh\n[ "$1" = "-u" ] && { echo 0; exit 0; }\nexec /usr/bin/id "$@"\n'
    )
    executable(
        stubs / "apt-get",
        "#!/bin/sh\n"
        'case "$*" in *update*) exit 0;; esac\n'
        "fd=$(echo \"$*\" | sed -n 's/.*APT::Status-Fd=\\([0-9]*\\).*/\\1/p')\n"
        '[ -n "$fd" ] || exit 0\n'
        "for line in 'dlstatus:x:20.0:Retrieving file 1 of 2' 'pmstatus:x:45.5:Unpacking x' "
        "'pmstatus:x:100:Installed x'; do eval \"echo '$line' >&$fd\"; done\n",
    )
    done = setup(repo, extra=FAKE)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert f"setup: installing Debian packages: {FAKE}" in lines[0]
    assert "setup: apt-get update: reading the package lists" in lines
    assert "setup: apt-get: downloading 20% (Retrieving file 1 of 2)" in lines
    assert "setup: apt-get: installing 45% (Unpacking x)" in lines
    assert "setup: apt-get: installing 100% (Installed x)" in lines
