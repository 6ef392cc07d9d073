"""Profile chosen steps of a PyTorch Lightning `Trainer.fit()` (extra `hybridprof[lightning]`):

    from hybridprof import schedule
    from hybridprof.integrations.lightning import HybridprofCallback
    trainer = Trainer(..., callbacks=[HybridprofCallback(schedule(wait=5, warmup=3, active=10))])

The session and an HTML report go to `<log_dir or default_root_dir>/hybridprof/` when training
ends, from the global-zero process. Importing this module imports nothing of Lightning: the
callback class is made when first asked for, on `lightning.pytorch.Callback` (or
`pytorch_lightning.Callback` where only that package is installed).
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "HybridprofCallback":
        try:
            from hybridprof.integrations.lightning_callback import HybridprofCallback
        except ImportError as exc:
            raise ImportError(
                f"hybridprof.integrations.lightning needs lightning ({exc}); install it with: "
                "pip install 'hybridprof[lightning]'"
            ) from exc
        return HybridprofCallback
    raise AttributeError(f"module 'hybridprof.integrations.lightning' has no attribute '{name}'")


def __dir__() -> list[str]:
    return ["HybridprofCallback"]
