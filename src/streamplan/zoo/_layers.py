"""Building blocks shared by the zoo's CNNs (torch is imported here, never by the registry)."""

from __future__ import annotations

import torch
from torch import nn


class ConvBNReLU(nn.Module):
    """Conv (no bias) -> BatchNorm -> ReLU: Inception's ``BasicConv2d`` and ResNet's stem."""

    def __init__(self, in_ch: int, out_ch: int, kernel, stride=1, padding=0, *, eps: float = 1e-5) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_ch, eps=eps)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class SeparableConv(nn.Module):
    """Depthwise ``k x k`` conv followed by a pointwise 1x1 conv, both without bias."""

    def __init__(self, in_ch: int, out_ch: int, kernel: int, stride: int = 1) -> None:
        super().__init__()
        self.depthwise = nn.Conv2d(
            in_ch, in_ch, kernel, stride=stride, padding=kernel // 2, groups=in_ch, bias=False
        )
        self.pointwise = nn.Conv2d(in_ch, out_ch, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pointwise(self.depthwise(x))


def seeded(seed: int) -> None:
    """Fix torch's RNG so a factory always builds the same random weights and inputs."""
    torch.manual_seed(seed)


def param_count(module: nn.Module) -> int:
    """Number of parameters (buffers such as BN running stats excluded)."""
    return sum(p.numel() for p in module.parameters())
