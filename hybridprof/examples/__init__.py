"""Bundled example models: `hybridprof.examples.alexnet()` (`hybridprof run` with no model file
profiles the same file, examples/alexnet.py)."""

from __future__ import annotations

from torch import nn

from hybridprof.examples.alexnet import AlexNet


def alexnet(num_classes: int = 1000) -> nn.Module:
    """An AlexNet-like model laid out as torchvision's (features.0..12, avgpool,
    classifier.0..6)."""
    return AlexNet(num_classes=num_classes)


__all__ = ["AlexNet", "alexnet"]
