"""ResNet-50 (He et al., "Deep Residual Learning for Image Recognition", 2015), the common
"v1.5" form that strides in the 3x3 conv of each bottleneck.

Stem 7x7/2 conv + BN + ReLU + 3x3/2 max-pool, then bottleneck stages of 3, 4, 6, 3 blocks
(widths 64, 128, 256, 512, expansion 4) with a 1x1 conv + BN projection shortcut on the first
block of each stage, global average pool and a 1000-way linear: **25,557,032** parameters.
Input 3x224x224. A control model: almost a chain, little to run in parallel.
"""

from __future__ import annotations

import torch
from torch import nn

from streamplan.zoo._layers import ConvBNReLU, seeded

PARAM_COUNT = 25_557_032
SEED = 0
EXPANSION = 4


class Bottleneck(nn.Module):
    """1x1 reduce -> 3x3 (stride here) -> 1x1 expand + BN, added to the (projected) shortcut, ReLU."""

    def __init__(self, in_ch: int, width: int, stride: int) -> None:
        super().__init__()
        out_ch = width * EXPANSION
        self.reduce = ConvBNReLU(in_ch, width, 1)
        self.conv3x3 = ConvBNReLU(width, width, 3, stride=stride, padding=1)
        self.expand = nn.Conv2d(width, out_ch, 1, bias=False)
        self.expand_bn = nn.BatchNorm2d(out_ch)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_ch != out_ch:
            self.shortcut = nn.Sequential(
                nn.Conv2d(in_ch, out_ch, 1, stride=stride, bias=False), nn.BatchNorm2d(out_ch)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.expand_bn(self.expand(self.conv3x3(self.reduce(x))))
        return torch.relu(y + self.shortcut(x))


class ResNet50(nn.Module):
    """ResNet-50 for 1000 classes."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(ConvBNReLU(3, 64, 7, stride=2, padding=3), nn.MaxPool2d(3, 2, padding=1))
        blocks: list[nn.Module] = []
        in_ch = 64
        for i, (width, depth) in enumerate(((64, 3), (128, 4), (256, 6), (512, 3))):
            for j in range(depth):
                blocks.append(Bottleneck(in_ch, width, stride=2 if (j == 0 and i > 0) else 1))
                in_ch = width * EXPANSION
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def build(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """ResNet-50 in eval mode with random weights, and a (batch, 3, 224, 224) input."""
    seeded(SEED)
    model = ResNet50().eval()
    return model, (torch.randn(batch, 3, 224, 224),)
