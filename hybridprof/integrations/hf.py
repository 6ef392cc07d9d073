"""Profile chosen steps of a Hugging Face `Trainer.train()` (extra `hybridprof[hf]`):

    from hybridprof import schedule
    from hybridprof.integrations.hf import HybridprofCallback
    trainer = Trainer(..., callbacks=[HybridprofCallback(schedule(wait=5, warmup=3, active=10))])

The session and an HTML report go to `<output_dir>/hybridprof/` (`session.json`, `report.html`)
when training ends, from the main process. Importing this module imports nothing of
transformers: the callback class is made when first asked for (it must subclass transformers'
`TrainerCallback`, whose handler calls every event on it).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "HybridprofCallback":
        try:
            from hybridprof.integrations.hf_callback import HybridprofCallback
        except ImportError as exc:
            raise ImportError(
                f"hybridprof.integrations.hf needs transformers ({exc}); install it with: "
                "pip install 'hybridprof[hf]'"
            ) from exc
        return HybridprofCallback
    raise AttributeError(f"module 'hybridprof.integrations.hf' has no attribute '{name}'")


def __dir__() -> list[str]:
    return ["HybridprofCallback"]
