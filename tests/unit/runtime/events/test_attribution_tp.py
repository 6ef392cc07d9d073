"""Tensor-parallel collectives in the walk (hand-made events): a layer's hooks range is its own
time and no extra call, its collectives its communication with their bytes, a wait run in the
next layer moved back to the layer it waits for, and the backend's thread no time of the step."""

from __future__ import annotations

from hybridprof.runtime.events.attribution import BACKWARD_PREFIX, attribute
from hybridprof.runtime.events.kineto import Event
from hybridprof.runtime.events.tp_names import first_input_bytes, tp_hooks_path, tp_hooks_range

NAMES = {"mlp.down": "mlp.down", "next.up": "next.up"}
REDUCE, WAIT = "_c10d_functional::all_reduce", "_c10d_functional::wait_tensor"


def cpu(
    name: str, start: int, end: int, *, seq: int = -1, thread: int = 1, nbytes: int = 0
) -> Event:
    return Event("cpu", name, start * 1000, end * 1000, thread, seq, 1, 0, 0, nbytes)


def step() -> list[Event]:
    return [
        cpu(tp_hooks_range("mlp.down"), 0, 40),
        cpu("_FromTorchTensor", 1, 3, seq=1),  # the pre-hook: its gradient's node is down's
        cpu("mlp.down", 5, 25),
        cpu("aten::addmm", 6, 24, seq=2),
        cpu("Redistribute", 26, 39, seq=3),  # the forward hook: partial sums all-reduced
        cpu(REDUCE, 27, 35, nbytes=1024),
        cpu("gloo:all_reduce", 28, 60, thread=2),  # the backend's worker thread
        cpu("next.up", 45, 75),
        cpu("aten::addmm", 46, 74, seq=4),
        cpu(WAIT, 50, 70, nbytes=1024),  # the first use of down's output waits for it
        cpu(BACKWARD_PREFIX + "_FromTorchTensorBackward", 100, 130, seq=1),
        cpu(REDUCE, 101, 110, nbytes=512),
        cpu(WAIT, 111, 125, nbytes=512),
        cpu("gloo:all_reduce", 102, 120, thread=2),
    ]


def test_a_layers_collectives_and_their_waits_are_its_communication() -> None:
    comm = attribute(step(), NAMES, backward=True).measure.comm
    found = {key: (m.calls, m.time_us, m.nbytes) for key, m in comm.items()}
    assert found == {
        ("mlp.down", "tp_forward"): (1, 8.0 + 20.0, 1024),  # the wait in next.up is down's
        ("mlp.down", "tp_backward"): (1, 9.0 + 14.0, 512),  # in its input's gradient node
    }


def test_the_hooks_are_the_layers_time_and_the_wait_moves_to_the_layer_it_serves() -> None:
    measure = attribute(step(), NAMES, backward=True).measure
    down, up = measure.paths["mlp.down"], measure.paths["next.up"]
    assert down.calls == 1 and up.calls == 1  # the hooks range is no call of its own
    assert (down.self_cpu_us, down.total_cpu_us) == (40.0 + 20.0, 40.0 + 20.0)
    assert (up.self_cpu_us, up.total_cpu_us) == (10.0, 10.0)
    assert WAIT in down.ops and WAIT not in up.ops
    assert {"_FromTorchTensor", "Redistribute", REDUCE} <= set(down.ops)
    assert down.backward_self_cpu_us == 30.0
    assert measure.outside_cpu_us == 0.0
    assert measure.total_cpu_us == 100.0  # the rank's thread alone: gloo's thread is no step time


def test_names_and_bytes() -> None:
    assert tp_hooks_path(tp_hooks_range("a.b")) == "a.b" and tp_hooks_path("a.b") is None
    assert first_input_bytes([[8, 32], []], ["float", ""]) == 8 * 32 * 4
    assert first_input_bytes([[4]], ["c10::BFloat16"]) == 8
    assert first_input_bytes([], []) == 0
