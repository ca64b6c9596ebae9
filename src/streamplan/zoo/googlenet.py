"""GoogLeNet (Szegedy et al., "Going Deeper with Convolutions", 2015; Inception v1).

The network of the paper's table 1: a stem (7x7/2 conv, max-pool, 1x1 and 3x3 convs, max-pool),
inception modules 3a, 3b, max-pool, 4a-4e, max-pool, 5a, 5b, global average pool, dropout and a
1000-way linear. An inception module runs four branches on one input and concatenates them: a
1x1 conv; 1x1 reduce -> 3x3; 1x1 reduce -> "5x5"; 3x3 max-pool -> 1x1 projection, with the
paper's widths per module.

Built as torchvision builds it, the variant the multi-stream papers (Opara, Nimble) measured:
every conv is conv (no bias) + BatchNorm (eps 0.001) + ReLU, the "5x5" branch uses a 3x3 conv
(torchvision's long-standing deviation from the paper), pools use ceil mode, and the two
auxiliary classifiers are left out (they only run in training and the zoo captures eval mode).
That gives **6,624,904** parameters (torchvision's count without the aux heads). Input 3x224x224.
"""

from __future__ import annotations

import torch
from torch import nn

from streamplan.zoo._layers import ConvBNReLU, seeded

PARAM_COUNT = 6_624_904
INPUT_SIZE = 224
SEED = 0

# module: (in, 1x1, 3x3 reduce, 3x3, 5x5 reduce, 5x5, pool proj) as in the paper's table 1
MODULES = {
    "3a": (192, 64, 96, 128, 16, 32, 32),
    "3b": (256, 128, 128, 192, 32, 96, 64),
    "4a": (480, 192, 96, 208, 16, 48, 64),
    "4b": (512, 160, 112, 224, 24, 64, 64),
    "4c": (512, 128, 128, 256, 24, 64, 64),
    "4d": (512, 112, 144, 288, 32, 64, 64),
    "4e": (528, 256, 160, 320, 32, 128, 128),
    "5a": (832, 256, 160, 320, 32, 128, 128),
    "5b": (832, 384, 192, 384, 48, 128, 128),
}


def _conv(in_ch: int, out_ch: int, kernel: int, stride: int = 1, padding: int = 0) -> ConvBNReLU:
    return ConvBNReLU(in_ch, out_ch, kernel, stride, padding, eps=0.001)


class InceptionModule(nn.Module):
    """Four branches concatenated: 1x1; 1x1 -> 3x3; 1x1 -> 3x3 (the "5x5"); max-pool -> 1x1."""

    def __init__(self, in_ch: int, ch1: int, red3: int, ch3: int, red5: int, ch5: int, proj: int) -> None:
        super().__init__()
        self.branch1 = _conv(in_ch, ch1, 1)
        self.branch2 = nn.Sequential(_conv(in_ch, red3, 1), _conv(red3, ch3, 3, padding=1))
        self.branch3 = nn.Sequential(_conv(in_ch, red5, 1), _conv(red5, ch5, 3, padding=1))
        self.branch4 = nn.Sequential(
            nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True), _conv(in_ch, proj, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch2(x), self.branch3(x), self.branch4(x)], 1)


class GoogLeNet(nn.Module):
    """GoogLeNet without the auxiliary classifiers (eval-mode graph)."""

    def __init__(self, num_classes: int = 1000) -> None:
        super().__init__()
        pool = lambda k, s: nn.MaxPool2d(k, stride=s, ceil_mode=True)  # noqa: E731
        self.stem = nn.Sequential(
            _conv(3, 64, 7, stride=2, padding=3),
            pool(3, 2),
            _conv(64, 64, 1),
            _conv(64, 192, 3, padding=1),
            pool(3, 2),
        )
        m = {name: InceptionModule(*widths) for name, widths in MODULES.items()}
        self.blocks = nn.Sequential(
            m["3a"],
            m["3b"],
            pool(3, 2),
            m["4a"],
            m["4b"],
            m["4c"],
            m["4d"],
            m["4e"],
            pool(2, 2),
            m["5a"],
            m["5b"],
        )
        self.dropout = nn.Dropout(0.2)
        self.fc = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.stem(x))
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1)
        return self.fc(self.dropout(x))


def build(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """GoogLeNet in eval mode with random weights, and a (batch, 3, 224, 224) input."""
    seeded(SEED)
    model = GoogLeNet().eval()
    return model, (torch.randn(batch, 3, INPUT_SIZE, INPUT_SIZE),)
