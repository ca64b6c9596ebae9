"""NASNet-A Mobile, "4 @ 1056" (Zoph et al., "Learning Transferable Architectures for Scalable
Image Recognition", 2018), input 3x224x224.

Layout: a 3x3/2 stem conv (32) + BN; two stem reduction cells; three groups of four normal
cells (the first of each group a "first" cell that adapts a larger previous input) separated by
two reduction cells; ReLU, global average pool, dropout, a 1000-way linear. With F = 1056 / 24
= 44 the groups are F, 2F and 4F channels wide per branch.

Every cell first adapts its two inputs (the previous cell and the one before it) to the branch
width with ReLU -> 1x1 conv -> BN; where the older input is twice as large spatially it goes
through the *factorized reduction* instead: two stride-2 1x1 convs, one on a pixel-shifted copy,
concatenated, then BN. Branch ops are separable-conv stacks ("ReLU -> depthwise k x k ->
pointwise 1x1 -> BN", twice; k = 3, 5, 7), 3x3 average / max pools and identities; pairs are
added, and the cell concatenates five or six of the sums (normal cells) or four (reduction
cells). Parameter count: **5,289,978**, the figure of the widely used implementation
(published: 5.3M). Padding is plain "same"-style (``k // 2``) rather than TensorFlow's
asymmetric SAME emulation: it changes no parameter and no output shape.
"""

from __future__ import annotations

import torch
from torch import nn

from streamplan.zoo._layers import SeparableConv, seeded

PARAM_COUNT = 5_289_978
PENULTIMATE_FILTERS = 1056
STEM_FILTERS = 32
BN_EPS = 0.001
SEED = 0


def _bn(ch: int) -> nn.BatchNorm2d:
    return nn.BatchNorm2d(ch, eps=BN_EPS)


def _avg3(stride: int = 1) -> nn.AvgPool2d:
    return nn.AvgPool2d(3, stride=stride, padding=1, count_include_pad=False)


def _max3(stride: int = 2) -> nn.MaxPool2d:
    return nn.MaxPool2d(3, stride=stride, padding=1)


class SepStack(nn.Module):
    """ReLU -> separable conv -> BN -> ReLU -> separable conv -> BN (stride on the first)."""

    def __init__(
        self, in_ch: int, out_ch: int, kernel: int, stride: int = 1, *, widen_first: bool = False
    ) -> None:
        super().__init__()
        mid = out_ch if widen_first else in_ch
        self.sep1 = SeparableConv(in_ch, mid, kernel, stride)
        self.bn1 = _bn(mid)
        self.sep2 = SeparableConv(mid, out_ch, kernel)
        self.bn2 = _bn(out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.bn1(self.sep1(torch.relu(x)))
        return self.bn2(self.sep2(torch.relu(x)))


class Adapter(nn.Module):
    """ReLU -> 1x1 conv -> BN: brings a cell input to the branch width."""

    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(in_ch, out_ch, 1, bias=False)
        self.bn = _bn(out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(torch.relu(x)))


class FactorizedReduction(nn.Module):
    """ReLU, then two stride-2 1x1 convs (one on the input shifted by a pixel), concat, BN."""

    def __init__(self, in_ch: int, out_ch: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch // 2, 1, bias=False)
        self.conv2 = nn.Conv2d(in_ch, out_ch // 2, 1, bias=False)
        self.bn = _bn(out_ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(x)
        path1 = self.conv1(x[:, :, ::2, ::2])
        shifted = nn.functional.pad(x, (0, 1, 0, 1))[:, :, 1:, 1:]
        path2 = self.conv2(shifted[:, :, ::2, ::2])
        return self.bn(torch.cat([path1, path2], 1))


class NormalCell(nn.Module):
    """Five pairwise sums over the adapted inputs, concatenated with the adapted older input.

    ``reduce_prev`` selects the factorized reduction for an older input at twice the spatial
    size (the first cell after a reduction). Output: 6 x ``width`` channels.
    """

    def __init__(self, prev_ch: int, in_ch: int, width: int, *, reduce_prev: bool = False) -> None:
        super().__init__()
        self.adapt_prev = FactorizedReduction(prev_ch, width) if reduce_prev else Adapter(prev_ch, width)
        self.adapt = Adapter(in_ch, width)
        self.sep5_cur = SepStack(width, width, 5)
        self.sep3_prev = SepStack(width, width, 3)
        self.sep5_prev = SepStack(width, width, 5)
        self.sep3_prev_b = SepStack(width, width, 3)
        self.sep3_cur = SepStack(width, width, 3)
        self.avg = _avg3()

    def forward(self, x: torch.Tensor, x_prev: torch.Tensor) -> torch.Tensor:
        left = self.adapt_prev(x_prev)
        right = self.adapt(x)
        s0 = self.sep5_cur(right) + self.sep3_prev(left)
        s1 = self.sep5_prev(left) + self.sep3_prev_b(left)
        s2 = self.avg(right) + left
        s3 = self.avg(left) + self.avg(left)
        s4 = self.sep3_cur(right) + right
        return torch.cat([left, s0, s1, s2, s3, s4], 1)


class ReductionCell(nn.Module):
    """Stride-2 cell: four sums of separable convs and pools, concatenated (4 x ``width``).

    ``prev_ch`` is the width of the older input ``x_prev``, adapted by a 1x1 conv. The two stem
    cells differ: ``stem="first"`` reads the raw 32-channel stem conv as both inputs, and its
    7x7/5x5 branches on the unadapted copy widen 32 -> ``width`` in their first separable conv;
    ``stem="second"`` sees the stem conv (twice its spatial size) through the factorized
    reduction.
    """

    def __init__(self, prev_ch: int, in_ch: int, width: int, *, stem: str = "") -> None:
        super().__init__()
        if stem == "first":  # older input == current input == the 32-channel stem conv
            self.adapt_prev = nn.Identity()
            other_ch, widen = prev_ch, True
        elif stem == "second":
            self.adapt_prev = FactorizedReduction(prev_ch, width)
            other_ch, widen = width, False
        else:
            self.adapt_prev = Adapter(prev_ch, width)
            other_ch, widen = width, False
        self.adapt = Adapter(in_ch, width)
        self.sep5_cur = SepStack(width, width, 5, 2)
        self.sep7_prev = SepStack(other_ch, width, 7, 2, widen_first=widen)
        self.sep7_prev_b = SepStack(other_ch, width, 7, 2, widen_first=widen)
        self.sep5_prev = SepStack(other_ch, width, 5, 2, widen_first=widen)
        self.sep3_s0 = SepStack(width, width, 3)
        self.max_cur = _max3()
        self.avg_cur = _avg3(2)
        self.avg_s0 = _avg3()

    def forward(self, x: torch.Tensor, x_prev: torch.Tensor) -> torch.Tensor:
        left = self.adapt_prev(x_prev)
        right = self.adapt(x)
        s0 = self.sep5_cur(right) + self.sep7_prev(left)
        s1 = self.max_cur(right) + self.sep7_prev_b(left)
        s2 = self.avg_cur(right) + self.sep5_prev(left)
        s3 = self.avg_s0(s0) + s1
        s4 = self.sep3_s0(s0) + self.max_cur(right)
        return torch.cat([s1, s2, s3, s4], 1)


class NASNetA(nn.Module):
    """NASNet-A "N @ penultimate" for 1000 classes (mobile: 4 @ 1056, stem 32; large: 6 @ 4032, stem 96)."""

    def __init__(
        self,
        num_classes: int = 1000,
        penultimate: int = PENULTIMATE_FILTERS,
        cells_per_group: int = 4,
        stem_filters: int = STEM_FILTERS,
    ) -> None:
        super().__init__()
        f = penultimate // 24
        self.conv0 = nn.Conv2d(3, stem_filters, 3, stride=2, bias=False)
        self.conv0_bn = _bn(stem_filters)
        self.stem0 = ReductionCell(stem_filters, stem_filters, f // 4, stem="first")
        self.stem1 = ReductionCell(stem_filters, f, f // 2, stem="second")
        cells: list[nn.Module] = []
        prev_ch, in_ch = f, 2 * f
        for group, width in enumerate((f, 2 * f, 4 * f)):
            if group > 0:
                cells.append(ReductionCell(prev_ch, in_ch, width))
                prev_ch, in_ch = in_ch, 4 * width
            for i in range(cells_per_group):
                cells.append(NormalCell(prev_ch, in_ch, width, reduce_prev=(i == 0)))
                prev_ch, in_ch = in_ch, 6 * width
        self.cells = nn.ModuleList(cells)
        self.dropout = nn.Dropout(0.5)
        self.fc = nn.Linear(in_ch, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        conv0 = self.conv0_bn(self.conv0(x))
        stem0 = self.stem0(conv0, conv0)
        prev, cur = stem0, self.stem1(stem0, conv0)
        for cell in self.cells:
            prev, cur = cur, cell(cur, prev)
        x = torch.flatten(nn.functional.adaptive_avg_pool2d(torch.relu(cur), 1), 1)
        return self.fc(self.dropout(x))


def build(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """NASNet-A Mobile in eval mode with random weights, and a (batch, 3, 224, 224) input."""
    seeded(SEED)
    model = NASNetA().eval()
    return model, (torch.randn(batch, 3, 224, 224),)


NASNetAMobile = NASNetA  # the default configuration is the mobile one
LARGE_PARAM_COUNT = 88_753_150  # the widely used implementation's figure (published: 88.9M)


def build_large(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """NASNet-A Large (6 @ 4032, stem 96) with a (batch, 3, 331, 331) input — what IOS measured."""
    seeded(SEED)
    model = NASNetA(penultimate=4032, cells_per_group=6, stem_filters=96).eval()
    return model, (torch.randn(batch, 3, 331, 331),)
