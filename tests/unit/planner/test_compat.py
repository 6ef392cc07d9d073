"""The compat probe on the installed torch, and on simulated older torch APIs (fakes allowed
here)."""

from __future__ import annotations

import types

import pytest
import torch
import torch.autograd.profiler as autograd_profiler
from torch.autograd import profiler_util

from hybridprof.planner import compat
from hybridprof.planner.compat import probe, probe_now


class OldProfile:  # torch 1.x autograd profiler signature: no use_device, no profile_memory
    def __init__(self, enabled: bool = True, use_cuda: bool = False, record_shapes: bool = False):
        pass


class OldEvent:
    self_cuda_time_total = 0.0


class OldEventList(list):
    def populate_cpu_children(self) -> None:
        pass


def test_installed_torch_decisions_have_reasons() -> None:
    found = probe()
    assert found is probe()  # cached: decided once
    assert found.torch_version == torch.__version__
    assert all(choice.reason for choice in found.choices())
    assert found.cuda_available == torch.cuda.is_available()
    major_minor = tuple(int(p) for p in torch.__version__.split(".")[:2])
    if major_minor >= (2, 13):
        assert found.profiler_device_arg == "use_device" and found.event_fields == "device"
        assert found.children == "lazy_tree" and found.profile_memory


def test_simulated_old_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autograd_profiler, "profile", OldProfile)
    monkeypatch.setattr(profiler_util, "FunctionEvent", OldEvent)
    monkeypatch.setattr(profiler_util, "EventList", OldEventList)
    old = probe_now()
    assert old.profiler_device_arg == "use_cuda"
    assert old.event_fields == "cuda"
    assert not old.profile_memory
    assert old.children == "populate_cpu_children"
    assert "use_device" in dict(old.reasons)["profiler_device_arg"]


def test_simulated_torch_214_without_use_cuda() -> None:
    class NewProfile:
        def __init__(self, enabled: bool = True, *, use_device: str | None = None) -> None:
            pass

    value, reason = compat.decide_device_arg(NewProfile)
    assert value == "use_device" and "removed" in reason


def test_missing_private_apis_fall_back() -> None:
    fake_c = types.SimpleNamespace(_profiler=types.SimpleNamespace(), _autograd=None)
    fake_torch = types.SimpleNamespace(_C=fake_c)
    assert compat.decide_fast_ranges(fake_torch)[0] == "record_function"
    assert compat.decide_raw_events(fake_torch)[0] == "function_events"
    event = types.SimpleNamespace(name=1, start_ns=1)  # fields missing
    result = types.SimpleNamespace(events=1)
    fake_c._autograd = types.SimpleNamespace(_ProfilerResult=result, _KinetoEvent=event)
    value, reason = compat.decide_raw_events(fake_torch)
    assert value == "function_events" and "end_ns" in reason
