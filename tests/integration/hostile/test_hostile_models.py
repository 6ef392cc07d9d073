"""Models that bend torch's rules, profiled through the library (issue 25: M-3, M-4, M-5, L-4,
L-5, B4, B6): each is measured right, or said to be not measurable, and left as it was."""

from __future__ import annotations

import dataclasses
import warnings

import pytest
import torch
from torch import nn

import hybridprof
from hybridprof.errors import UsageError
from hybridprof.runtime.basics.patching import live_patches

X = torch.randn(2, 8)


def profiled(model: nn.Module, inputs: object = (X,), **options: object):
    options = {"iters": 2, "warmup": 1, "threads": 1, **options}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # noisy-machine warnings are not what these test
        session = hybridprof.profile(model, inputs, **options)
    assert live_patches() == ()
    return session, {r.path: r for r in session.records}


class SelfCalling(nn.Module):
    """forward calls itself 20 deep: through `self.forward` and through `self(...)`."""

    def __init__(self, through_call: bool) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.through_call = through_call

    def forward(self, x: torch.Tensor, depth: int = 20) -> torch.Tensor:
        x = self.fc(x)
        if depth == 1:
            return x
        return self(x, depth - 1) if self.through_call else self.forward(x, depth - 1)


class Recursive(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rec = SelfCalling(through_call=False)
        self.rec2 = SelfCalling(through_call=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.rec2(self.rec(x))


@pytest.mark.parametrize(
    "options",
    [
        {"strategy": "session"},
        {"strategy": "session", "profile_memory": True},  # the event-by-event walk
        {"strategy": "session", "backward": True},
        {"strategy": "per-call"},
        {"strategy": "timer"},
    ],
    ids=["session", "session-memory", "session-backward", "per-call", "timer"],
)
def test_a_recursive_forward_counts_every_call_and_its_time_once(options) -> None:
    model = nn.Sequential(Recursive(), nn.Linear(8, 2))
    _, records = profiled(model, **options)
    block = records["0"].total_cpu_us.median
    for path in ("0.rec", "0.rec2"):
        record = records[path]
        assert record.calls == 2 * 20  # 20 calls in each of the 2 iterations
        # inside its parent, and containing its 20 Linear calls (was ~10x its parent's total)
        assert records[f"{path}.fc"].total_cpu_us.median <= record.total_cpu_us.median <= block


class PropertyForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    @property
    def forward(self):  # type: ignore[override]
        return self._fwd

    def _fwd(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) * 2


class Pinned:
    """A data descriptor that ignores assignments."""

    def __init__(self, fn) -> None:
        self.fn = fn

    def __get__(self, obj, owner=None):
        return self.fn if obj is None else self.fn.__get__(obj, owner)

    def __set__(self, obj, value) -> None:
        pass


class DescriptorForward(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def _fwd(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 1

    forward = Pinned(_fwd)


def test_a_forward_that_cannot_be_patched_is_named_in_a_warning() -> None:
    model = nn.Sequential(PropertyForward(), DescriptorForward())
    session, records = profiled(model)
    said = "\n".join(session.warnings)
    assert "0: its forward is a property of PropertyForward, which hybridprof cannot patch" in said
    assert "1: its forward is a Pinned descriptor of DescriptorForward" in said
    assert "its time counts in its parent's self time" in said
    assert records["0.inner"].calls == 2 and records["1.inner"].calls == 2
    assert "forward" not in vars(model[0]) and "forward" not in vars(model[1])


class Swapping(nn.Module):
    """Replaces its own forward on its first call, as lazy-initialising modules do."""

    def __init__(self) -> None:
        super().__init__()
        self.inner = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.forward = self._fast
        return self.inner(x)

    def _fast(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x) + 0


def test_a_forward_replaced_in_warm_up_is_measured_in_every_iteration() -> None:
    model = nn.Sequential(Swapping())
    session, records = profiled(model)
    assert records["0"].calls == 2 and records["0.inner"].calls == 2
    assert not [w for w in session.warnings if "replaced its own forward" in w]
    # the model keeps what it did to itself, as it would have without hybridprof
    assert model[0].forward == model[0]._fast


def test_a_forward_replaced_while_measured_is_said() -> None:
    # no warm-up, no warm step: its first measured call replaces it; the next ones are measured
    session, records = profiled(nn.Sequential(Swapping()), warmup=0, iters=3, warm_step=False)
    assert records["0"].calls == 3
    assert any("0 replaced its own forward (self.forward = ...) during 1 measured" in w
               for w in session.warnings)  # fmt: skip


def test_a_forward_replaced_in_a_profile_block_is_said() -> None:
    model = nn.Sequential(Swapping())
    with hybridprof.Profile(model, leaves_only=False) as prof:
        model(X)
        model(X)
    calls = {r.path: r.calls for r in prof.session().records}
    assert calls["0"] == 1 and calls["0.inner"] == 2  # the 2nd call ran the model's new forward
    assert any("replaced its own forward" in w for w in prof.session().warnings)
    assert model[0].forward == model[0]._fast


class Leafy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def test_a_cyclic_model_is_profiled_once_per_module() -> None:
    import torch._dynamo  # noqa: F401  (compiled parts are looked for once dynamo is imported)

    model = nn.Sequential(Leafy(), Leafy())
    model[0].root = model  # a child that refers back to the root
    _, records = profiled(model)
    assert sorted(records) == ["", "0", "0.fc", "1", "1.fc"]
    assert records[""].aliases == ("0.root",) and records["1.fc"].calls == 2


@dataclasses.dataclass(frozen=True, eq=False)
class Frozen(nn.Module):
    width: int = 8

    def __post_init__(self) -> None:
        nn.Module.__init__(self)
        self._modules["fc"] = nn.Linear(self.width, self.width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self._modules["fc"](x)


def test_a_frozen_dataclass_module_cannot_train_and_says_so() -> None:
    model = nn.Sequential(Frozen(), nn.Linear(8, 1))
    model[1].eval()  # a flag that the training step would change, and that must come back
    profiled(model)  # forward-only runs
    with pytest.raises(UsageError) as caught:
        profiled(model, backward=True)
    message = str(caught.value)
    assert message.startswith(
        "--backward needs train mode, but model.train() fails on '0' (Frozen): "
        "FrozenInstanceError: cannot assign to field 'training'"
    )
    assert "plain torch's model.train() fails the same way" in message
    assert model.training and not model[1].training  # put back as it was


def nested_tensor_model() -> tuple[nn.Module, tuple[torch.Tensor, torch.Tensor]]:
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, dropout=0.0)
    encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True).eval()
    x = torch.randn(2, 5, 8)
    mask = torch.tensor([[False, False, False, True, True], [False] * 4 + [True]])
    return encoder, (x, mask)


def test_nested_tensors_between_layers_are_recorded_as_nested() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, dropout=0.0)
    encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=True).eval()
    mask = torch.tensor([[False, False, False, True, True], [False] * 4 + [True]])
    inputs = {"src": torch.randn(2, 5, 8), "src_key_padding_mask": mask}
    _, records = profiled(encoder, inputs, iters=1, warmup=0)
    assert records["layers.0"].calls == 1 and records["layers.1"].calls == 1
    # torch's fast path hands the second layer a nested tensor, whose .shape raises
    assert records["layers.1"].input_shapes[0] == "nested(2 x 2-d)"


def test_a_profile_whose_leaves_never_run_warns_naming_the_fix() -> None:
    layer = nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, dropout=0.0)
    layer.eval()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.no_grad(), hybridprof.Profile(layer) as prof:
            layer(torch.randn(2, 5, 8))
        str(prof)
        session = prof.session()
    said = [str(w.message) for w in caught if "leaves_only=False" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("none of the")
    assert said[0] in session.warnings and session.records == ()
