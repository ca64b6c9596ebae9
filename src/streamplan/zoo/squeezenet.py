"""SqueezeNet 1.0 with simple bypass (Iandola et al., "SqueezeNet: AlexNet-level accuracy with 50x
fewer parameters and <0.5MB model size", 2016, section 6 / figure 2 middle).

conv1 7x7/2 (96) -> maxpool -> fire2..fire4 -> maxpool -> fire5..fire8 -> maxpool -> fire9 ->
dropout -> conv10 1x1 (1000) -> ReLU -> global average pool. A fire module squeezes with a 1x1
conv and expands with parallel 1x1 and 3x3 convs whose outputs are concatenated. Simple bypass
adds an identity shortcut around the fire modules whose input and output widths match (fire3,
fire5, fire7, fire9); it has no parameters, so the count stays **1,248,424**. Input 3x224x224.
"""

from __future__ import annotations

import torch
from torch import nn

from streamplan.zoo._layers import seeded

PARAM_COUNT = 1_248_424
SEED = 0


class Fire(nn.Module):
    """squeeze 1x1 -> ReLU -> {expand 1x1, expand 3x3} -> ReLU -> concat (+ input if bypass)."""

    def __init__(self, in_ch: int, squeeze: int, expand1: int, expand3: int, *, bypass: bool = False) -> None:
        super().__init__()
        self.squeeze = nn.Conv2d(in_ch, squeeze, 1)
        self.expand1x1 = nn.Conv2d(squeeze, expand1, 1)
        self.expand3x3 = nn.Conv2d(squeeze, expand3, 3, padding=1)
        self.bypass = bypass
        if bypass and in_ch != expand1 + expand3:
            raise ValueError("a simple bypass needs equal input and output widths")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        s = torch.relu(self.squeeze(x))
        out = torch.cat([torch.relu(self.expand1x1(s)), torch.relu(self.expand3x3(s))], 1)
        return out + x if self.bypass else out


class SqueezeNetBypass(nn.Module):
    """SqueezeNet 1.0 with identity bypasses around fire3, fire5, fire7 and fire9."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, 7, stride=2),
            nn.ReLU(),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
            Fire(96, 16, 64, 64),  # fire2
            Fire(128, 16, 64, 64, bypass=True),  # fire3
            Fire(128, 32, 128, 128),  # fire4
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
            Fire(256, 32, 128, 128, bypass=True),  # fire5
            Fire(256, 48, 192, 192),  # fire6
            Fire(384, 48, 192, 192, bypass=True),  # fire7
            Fire(384, 64, 256, 256),  # fire8
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
            Fire(512, 64, 256, 256, bypass=True),  # fire9
        )
        self.classifier = nn.Sequential(
            nn.Dropout(0.5), nn.Conv2d(512, num_classes, 1), nn.ReLU(), nn.AdaptiveAvgPool2d(1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.flatten(self.classifier(self.features(x)), 1)


def build(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """SqueezeNet-with-bypass in eval mode with random weights, and a (batch, 3, 224, 224) input."""
    seeded(SEED)
    model = SqueezeNetBypass().eval()
    return model, (torch.randn(batch, 3, 224, 224),)
