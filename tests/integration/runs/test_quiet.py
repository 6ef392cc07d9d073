"""No kineto chatter on file descriptor 2 and no warnings caused by hybridprof, seen from
outside."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from hybridprof.runtime.basics.quiet import filter_chatter

MODEL = """
import torch
from torch import nn
model = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
x = torch.ones(1, 4)
"""


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "KINETO_LOG_LEVEL"}
    return subprocess.run(
        [
            sys.executable,
            "-W",
            "error::DeprecationWarning",
            "-W",
            "error::FutureWarning",
            "-c",
            code,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_bare_profiler_chatters_and_filter_drops_only_chatter() -> None:
    bare = run_python(MODEL + "with torch.autograd.profiler.profile():\n    model(x)\n")
    assert bare.returncode == 0, bare.stderr
    if "USDT" not in bare.stderr:
        pytest.skip("this torch build prints no kineto chatter")
    kept = filter_chatter(bare.stderr.encode() + b"a real error line\n")
    assert b"USDT" not in kept and kept.endswith(b"a real error line\n")


@pytest.mark.parametrize("strategy", ["session", "per-call"])
def test_profile_prints_no_chatter_or_warnings(strategy: str) -> None:
    code = MODEL + textwrap.dedent(
        f"""
        import hybridprof
        with hybridprof.Profile(model, profile_memory=True, strategy={strategy!r}) as prof:
            model(x)
            model(x)
        print(prof.display(show_events=True))
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "", result.stderr
    assert "Number of Calls" in result.stdout


def test_other_fd2_output_inside_the_window_is_replayed() -> None:
    code = textwrap.dedent(
        """
        import os, torch
        from hybridprof.runtime.basics.quiet import quiet_fd2
        with quiet_fd2():
            os.write(2, b"before start\\n")
            prof = torch.autograd.profiler.profile()
            prof.__enter__()
            prof.__exit__(None, None, None)
            os.write(2, b"after stop\\n")
        os.write(2, b"outside\\n")
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "before start\nafter stop\noutside\n"


def test_filter_drops_gpu_probe_error_of_cuda_builds_without_driver() -> None:
    line = (
        b"ERROR:2026-11-30 11:16:25 21500:21500 DeviceProperties.cpp:56] "
        b"gpuGetDeviceCount failed with code 35\n"
    )
    other = b"ERROR:2026-11-30 11:16:25 1:1 CuptiActivityApi.cpp:1] something else\n"
    assert filter_chatter(line + other) == other


@pytest.mark.parametrize("strategy", ["session", "per-call"])
def test_freeing_a_tensor_made_before_the_block_prints_no_allocator_warning(strategy: str) -> None:
    """torch warns once, from C++, when a block allocated before the profiler started is freed
    while it runs with profile_memory: a training loop's tensors made before the block are."""
    code = MODEL + textwrap.dedent(
        f"""
        import os
        import hybridprof
        made_before = [torch.rand(1000) for _ in range(5)]
        with hybridprof.Profile(model, profile_memory=True, strategy={strategy!r}) as prof:
            model(x)
            made_before.clear()  # freed inside the block
            os.write(2, b"the user's own line\\n")
            model(x)
        print(prof.display())
        """
    )
    result = run_python(code)
    assert result.returncode == 0, result.stderr
    assert result.stderr == "the user's own line\n"  # nothing else lost, nothing of torch's


def test_filter_drops_the_allocator_warning_only() -> None:
    line = (
        b"[W1202 00:56:39.461973235 CPUAllocator.cpp:245] Memory block of unknown size was "
        b"allocated before the profiling started, profiler results will not include the "
        b"deallocation event\n"
    )
    other = b"[W1202 00:56:39.461973235 CPUAllocator.cpp:245] another warning\n"
    assert filter_chatter(line + other) == other
