"""A compiled wrapper around a profiled model: the caller keeps `compiled = torch.compile(model)`
and calls it, while `Profile(model)` (or a trainer callback) profiles the inner model. Before,
hybridprof patched the inner modules, the wrapper's guards failed on them, dynamo compiled again
inside the block and the session had no layer rows. Now the wrapper's compiled code is mapped as
if the wrapper were profiled, and nothing inside it is patched."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import nn

import hybridprof
from tests.compiled_models import counters, delta, fresh

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _train(compiled: nn.Module, x: torch.Tensor, optimizer: torch.optim.Optimizer) -> None:
    loss = compiled(x).sum()
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


def test_profile_of_the_model_inside_a_compiled_wrapper_maps_its_kernels() -> None:
    torch.manual_seed(0)
    model = fresh().MLP()
    compiled = torch.compile(model)
    x = torch.randn(4, 32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(3):  # warm: the user's loop compiled it at its first step
        _train(compiled, x, optimizer)
    attributes = {name: dict(vars(m)) for name, m in model.named_modules()}
    with hybridprof.Profile(model) as prof:
        for _ in range(4):
            _train(compiled, x, optimizer)
            prof.step()
    session = prof.session()
    assert session.compiled is not None and session.compiled.kernel_map == "mapped"
    linears = [name for name, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert linears
    for path in linears:
        record = session.record(path)
        assert record is not None and record.self_cpu_us.median > 0, path
        assert record.backward_self_cpu_us is not None, path
        assert record.backward_self_cpu_us.median > 0, path
    assert session.optimizer is not None and session.optimizer.self_cpu_us.median > 0
    assert not any("compiled 1 frame while the model was profiled" in w for w in session.warnings)
    # the user's compiled code is used again as it was: no compile, no patch left behind
    before = counters()
    _train(compiled, x, optimizer)
    assert delta(before, counters()) == (0, 0, 0, 0)
    for name, module in model.named_modules():
        assert "forward" not in vars(module), name
        assert set(vars(module)) == set(attributes[name]), name


def test_the_hf_trainer_with_torch_compile_and_the_callback_has_layer_rows(
    tmp_path: Path,
) -> None:
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("accelerate")
    from hybridprof.files.storage import load_session
    from hybridprof.integrations.hf import HybridprofCallback
    from tests.integration.training.test_integration_hf import Tokens

    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, vocab_size=100, n_positions=32, bos_token_id=0
    )
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=8,
        per_device_train_batch_size=4,
        learning_rate=1e-3,
        report_to=[],
        save_strategy="no",
        logging_strategy="no",
        use_cpu=True,
        dataloader_num_workers=0,
        disable_tqdm=True,
        seed=0,
        torch_compile=True,
    )
    recompiles: list[int] = []

    class Recompiles(transformers.TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, *args: Any, **kwargs: Any) -> None:
            recompiles.append(counters()[3])

    callback = HybridprofCallback(hybridprof.schedule(wait=2, warmup=2, active=3))
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=Tokens(), callbacks=[Recompiles(), callback]
    )
    trainer.train()
    assert len(set(recompiles)) == 1, recompiles  # dynamo recompiled nothing in the window
    session = load_session(tmp_path / "hybridprof" / "session.json")
    assert session.compiled is not None and session.compiled.kernel_map == "mapped"
    for path in ("transformer.h.0.attn.c_attn", "transformer.h.1.mlp.c_fc"):
        record = session.record(path)
        assert record is not None and record.self_cpu_us.median > 0, path
        assert record.backward_self_cpu_us is not None, path
        assert record.backward_self_cpu_us.median > 0, path
    assert session.optimizer is not None


def test_a_wrapper_kept_but_not_called_in_the_block_is_said_with_the_fix() -> None:
    torch.manual_seed(0)
    model = fresh().MLP()
    compiled = torch.compile(model)
    x = torch.randn(4, 32)
    compiled(x)  # compiled once, then the loop calls the model itself
    with hybridprof.Profile(model) as prof:
        for _ in range(2):
            model(x)
            prof.step()
    session = prof.session()
    assert session.warnings[0].startswith("the model has a torch.compile wrapper")
    assert "del compiled" in session.warnings[0]
    assert not any("no compiled code ran" in w for w in session.warnings)
    del compiled  # as the warning says: then the block profiles the eager model
    with hybridprof.Profile(model) as prof:
        for _ in range(2):
            model(x)
            prof.step()
    assert prof.session().records
