"""The trainer integrations without their framework: importing them is light, and asking for the
callback names the extra to install."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.paths import ROOT


@pytest.mark.parametrize(
    ("module", "blocked", "extra"),
    [
        ("hf", ("transformers",), "hf"),
        ("lightning", ("lightning", "lightning.pytorch", "pytorch_lightning"), "lightning"),
    ],
)
def test_a_missing_framework_is_one_line_naming_the_extra(
    module: str, blocked: tuple[str, ...], extra: str
) -> None:
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None  # as if not installed\n"
        f"import hybridprof.integrations.{module} as facade\n"
        "try:\n"
        "    facade.HybridprofCallback\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert f"pip install 'hybridprof[{extra}]'" in done.stdout
    assert len(done.stdout.strip().splitlines()) == 1
