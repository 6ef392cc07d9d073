"""Bundled example models: `hybridprof.examples.alexnet()` and the path of its model file."""

from __future__ import annotations

from pathlib import Path

from torch import nn

from hybridprof.examples.alexnet import AlexNet

ALEXNET_FILE = Path(__file__).with_name("alexnet.py")


def alexnet(num_classes: int = 1000) -> nn.Module:
    """An AlexNet-like model laid out as torchvision's (features.0..12, avgpool, classifier.0..6)."""
    return AlexNet(num_classes=num_classes)


__all__ = ["ALEXNET_FILE", "AlexNet", "alexnet"]
