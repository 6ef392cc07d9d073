"""torchprof's tests build `torchvision.models.alexnet(pretrained=False)`.

Where torchvision imports, the real one is used. This project's test machines have no usable
torchvision (PyPI's wheel for torch 2.13 is a CUDA build that fails to import on the CPU torch the
suite pins, and the CPU wheel index is out of reach), so a stand-in named `torchvision` is put in
`sys.modules` before the copied tests are collected. It holds only what they call:
`models.alexnet(pretrained=False)`, an untrained `hybridprof.examples.alexnet.AlexNet`, which has
torchvision's AlexNet's layers and forward (features.0-12, avgpool, classifier.0-6). The stand-in
refuses `pretrained=True`: there are no weights to load.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

from torch import nn


def _real_torchvision() -> types.ModuleType | None:
    try:
        return importlib.import_module("torchvision")
    except Exception:  # absent, or a build for another torch that fails while importing
        sys.modules.pop("torchvision", None)
        return None


def _alexnet(pretrained: bool = False, **kwargs: Any) -> nn.Module:
    if pretrained:
        raise ValueError("the torchvision stand-in has no pretrained weights")
    from hybridprof.examples.alexnet import AlexNet

    return AlexNet(**kwargs)


def _stand_in() -> types.ModuleType:
    torchvision = types.ModuleType("torchvision", "stand-in: see tests/torchprof_suite/conftest.py")
    models = types.ModuleType("torchvision.models")
    models.alexnet = _alexnet  # type: ignore[attr-defined]
    torchvision.models = models  # type: ignore[attr-defined]
    return torchvision


if _real_torchvision() is None:
    sys.modules["torchvision"] = _stand_in()
    sys.modules["torchvision.models"] = sys.modules["torchvision"].models
