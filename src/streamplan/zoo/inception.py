"""Inception V3 (Szegedy et al., "Rethinking the Inception Architecture for Computer Vision", 2015).

Built as commonly implemented: ``BasicConv2d`` = conv without bias + BatchNorm (eps 0.001) + ReLU;
a stem of five convs and two max-pools, then blocks A x3, B, C x4 (factorised 1x7/7x1 branches),
D, E x2 (branches that split into 1x3 and 3x1), global average pool, dropout, a 1000-way linear.

The auxiliary classifier is left out: it only runs in training mode and the zoo's models are
captured in eval mode, so it would add parameters that no captured op reads. The count is
therefore the published figure without the aux head: **23,834,568** parameters
(27,161,264 with it). Input 3x299x299.
"""

from __future__ import annotations

import torch
from torch import nn

from streamplan.zoo._layers import ConvBNReLU, seeded

PARAM_COUNT = 23_834_568
INPUT_SIZE = 299
SEED = 0


def _conv(in_ch: int, out_ch: int, kernel, stride=1, padding=0) -> ConvBNReLU:
    return ConvBNReLU(in_ch, out_ch, kernel, stride, padding, eps=0.001)


class BlockA(nn.Module):
    """Four branches: 1x1; 1x1 -> 5x5; 1x1 -> 3x3 -> 3x3; avgpool -> 1x1. Out: 224 + pool_ch."""

    def __init__(self, in_ch: int, pool_ch: int) -> None:
        super().__init__()
        self.b1x1 = _conv(in_ch, 64, 1)
        self.b5x5 = nn.Sequential(_conv(in_ch, 48, 1), _conv(48, 64, 5, padding=2))
        self.b3x3dbl = nn.Sequential(
            _conv(in_ch, 64, 1), _conv(64, 96, 3, padding=1), _conv(96, 96, 3, padding=1)
        )
        self.bpool = _conv(in_ch, pool_ch, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pool = self.bpool(nn.functional.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([self.b1x1(x), self.b5x5(x), self.b3x3dbl(x), pool], 1)


class BlockB(nn.Module):
    """Grid reduction 35 -> 17: 3x3/2; 1x1 -> 3x3 -> 3x3/2; max-pool/2. Out: 768."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.b3x3 = _conv(in_ch, 384, 3, stride=2)
        self.b3x3dbl = nn.Sequential(
            _conv(in_ch, 64, 1), _conv(64, 96, 3, padding=1), _conv(96, 96, 3, stride=2)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pool = nn.functional.max_pool2d(x, 3, stride=2)
        return torch.cat([self.b3x3(x), self.b3x3dbl(x), pool], 1)


class BlockC(nn.Module):
    """17x17 block with factorised 7x7 convs (1x7 then 7x1). Out: 768."""

    def __init__(self, in_ch: int, mid: int) -> None:
        super().__init__()
        self.b1x1 = _conv(in_ch, 192, 1)
        self.b7x7 = nn.Sequential(
            _conv(in_ch, mid, 1),
            _conv(mid, mid, (1, 7), padding=(0, 3)),
            _conv(mid, 192, (7, 1), padding=(3, 0)),
        )
        self.b7x7dbl = nn.Sequential(
            _conv(in_ch, mid, 1),
            _conv(mid, mid, (7, 1), padding=(3, 0)),
            _conv(mid, mid, (1, 7), padding=(0, 3)),
            _conv(mid, mid, (7, 1), padding=(3, 0)),
            _conv(mid, 192, (1, 7), padding=(0, 3)),
        )
        self.bpool = _conv(in_ch, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pool = self.bpool(nn.functional.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([self.b1x1(x), self.b7x7(x), self.b7x7dbl(x), pool], 1)


class BlockD(nn.Module):
    """Grid reduction 17 -> 8: 1x1 -> 3x3/2; 1x1 -> 1x7 -> 7x1 -> 3x3/2; max-pool/2. Out: 1280."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.b3x3 = nn.Sequential(_conv(in_ch, 192, 1), _conv(192, 320, 3, stride=2))
        self.b7x7x3 = nn.Sequential(
            _conv(in_ch, 192, 1),
            _conv(192, 192, (1, 7), padding=(0, 3)),
            _conv(192, 192, (7, 1), padding=(3, 0)),
            _conv(192, 192, 3, stride=2),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pool = nn.functional.max_pool2d(x, 3, stride=2)
        return torch.cat([self.b3x3(x), self.b7x7x3(x), pool], 1)


class BlockE(nn.Module):
    """8x8 block whose 3x3 branches split into parallel 1x3 and 3x1 convs. Out: 2048."""

    def __init__(self, in_ch: int) -> None:
        super().__init__()
        self.b1x1 = _conv(in_ch, 320, 1)
        self.b3x3 = _conv(in_ch, 384, 1)
        self.b3x3_a = _conv(384, 384, (1, 3), padding=(0, 1))
        self.b3x3_b = _conv(384, 384, (3, 1), padding=(1, 0))
        self.b3x3dbl = nn.Sequential(_conv(in_ch, 448, 1), _conv(448, 384, 3, padding=1))
        self.b3x3dbl_a = _conv(384, 384, (1, 3), padding=(0, 1))
        self.b3x3dbl_b = _conv(384, 384, (3, 1), padding=(1, 0))
        self.bpool = _conv(in_ch, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.b3x3(x)
        a = torch.cat([self.b3x3_a(a), self.b3x3_b(a)], 1)
        d = self.b3x3dbl(x)
        d = torch.cat([self.b3x3dbl_a(d), self.b3x3dbl_b(d)], 1)
        pool = self.bpool(nn.functional.avg_pool2d(x, 3, stride=1, padding=1))
        return torch.cat([self.b1x1(x), a, d, pool], 1)


class InceptionV3(nn.Module):
    """Inception V3 without the auxiliary classifier (eval-mode graph)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            _conv(3, 32, 3, stride=2),
            _conv(32, 32, 3),
            _conv(32, 64, 3, padding=1),
            nn.MaxPool2d(3, stride=2),
            _conv(64, 80, 1),
            _conv(80, 192, 3),
            nn.MaxPool2d(3, stride=2),
        )
        self.blocks = nn.Sequential(
            BlockA(192, 32),
            BlockA(256, 64),
            BlockA(288, 64),
            BlockB(288),
            BlockC(768, 128),
            BlockC(768, 160),
            BlockC(768, 160),
            BlockC(768, 192),
            BlockD(768),
            BlockE(1280),
            BlockE(2048),
        )
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.dropout(x))


def build(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """Inception V3 in eval mode with random weights, and a (batch, 3, 299, 299) input."""
    seeded(SEED)
    model = InceptionV3().eval()
    return model, (torch.randn(batch, 3, INPUT_SIZE, INPUT_SIZE),)
