"""An AlexNet-like model (torchvision's layer layout, no torchvision needed): the bundled demo.

This file is also a model file for the CLI: `hybridprof run` with no model profiles it through
`build_model` and `example_inputs`.
"""

from __future__ import annotations

import torch
from torch import nn


class AlexNet(nn.Module):
    """torchvision.models.AlexNet's structure: features.0..12, avgpool, classifier.0..6."""

    def __init__(self, num_classes: int = 1000, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((6, 6))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * 6 * 6, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def build_model() -> nn.Module:
    """The CLI entry: an AlexNet in eval mode with fixed weights (seeded), so runs are
    comparable."""
    torch.manual_seed(0)
    return AlexNet().eval()


def example_inputs() -> tuple[torch.Tensor]:
    """One 224x224 RGB image, as torchprof's README used."""
    return (torch.rand(1, 3, 224, 224),)
