"""RandWire-WS (Xie et al., "Exploring Randomly Wired Neural Networks for Image Recognition",
ICCV 2019), regular regime, input 3x224x224.

conv1: 3x3/2 conv (C/2) + BN; then four randomly wired stages conv2..conv5 with N/2, N, N, N
nodes and C, 2C, 4C, 8C channels; classifier: ReLU -> 1x1 conv (1280) -> BN -> ReLU -> global
average pool -> 1000-way linear. Each stage's wiring is a Watts-Strogatz graph WS(n, k=4, p=0.75)
generated here with ``random.Random`` (no networkx), its edges oriented from the lower to the
higher node index. A node takes a weighted sum of its inputs (one learned scalar per incoming
edge, through a sigmoid) -> ReLU -> separable conv (3x3 depthwise + 1x1) -> BN. Nodes without
inputs read the stage input, at stride 2; the stage output is the plain average of the nodes
without outputs.

Two configurations (the parameter count depends on the sampled graphs, through the number of
input nodes, which read the narrower previous stage, and of multi-input nodes, which carry edge
weights):
- ``build`` (the zoo's ``randwire``): C = 154, N = 32, stage graphs seeded 0, 1, 2, 3 — the width
  IOS benchmarked: **62,566,821** parameters. The paper reports 61.5M for its own graphs; over
  100 graph seeds this construction averages 61.86M (range 59.3M-64.9M).
- ``build_paper_c109``: C = 109, the paper's smaller regular-regime model (published 31.9M
  parameters): **32,462,957** parameters with seeds 0-3; the average over 100 graph seeds is
  32.11M (range 30.8M-33.7M). The published figure is for the paper's own random graphs, which
  cannot be regenerated here, so it is matched only to about 1.8% (0.7% on average), not exactly.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
from torch import nn

from streamplan.zoo._layers import SeparableConv, seeded

PARAM_COUNT = 62_566_821
PAPER_C109_PARAM_COUNT = 32_462_957
PAPER_C109_PUBLISHED = 31_900_000
WS_K = 4
WS_P = 0.75
SEED = 0


@dataclass(frozen=True, slots=True)
class RandWireConfig:
    """Channel width ``channels`` (C), nodes per full stage ``nodes`` (N), graph seed offset."""

    channels: int = 154
    nodes: int = 32
    graph_seed: int = 0
    k: int = WS_K
    p: float = WS_P


def watts_strogatz(n: int, k: int, p: float, seed: int) -> list[tuple[int, int]]:
    """Undirected WS(n, k, p) edges as sorted ``(low, high)`` pairs, deterministic for ``seed``.

    Ring lattice (each node joined to its k/2 nearest neighbours on each side); then, for each
    lattice offset 1..k/2 in turn and each node u, the edge (u, u+offset) is rewired with
    probability p to (u, w), w chosen uniformly among nodes that are neither u nor already
    joined to u.
    """
    if k % 2 or not 0 < k < n:
        raise ValueError(f"WS needs an even k with 0 < k < n, got n={n}, k={k}")
    rng = random.Random(seed)
    adj: list[set[int]] = [set() for _ in range(n)]
    for u in range(n):
        for off in range(1, k // 2 + 1):
            v = (u + off) % n
            adj[u].add(v)
            adj[v].add(u)
    for off in range(1, k // 2 + 1):
        for u in range(n):
            v = (u + off) % n
            if v not in adj[u] or rng.random() >= p or len(adj[u]) >= n - 1:
                continue
            choices = [w for w in range(n) if w != u and w not in adj[u]]
            w = choices[rng.randrange(len(choices))]
            adj[u].discard(v)
            adj[v].discard(u)
            adj[u].add(w)
            adj[w].add(u)
    return sorted((u, v) for u in range(n) for v in adj[u] if u < v)


class WiredNode(nn.Module):
    """Weighted sum of inputs (sigmoid weights) -> ReLU -> separable 3x3 conv -> BN."""

    def __init__(self, fan_in: int, in_ch: int, out_ch: int, stride: int) -> None:
        super().__init__()
        self.edge_weights = nn.Parameter(torch.zeros(fan_in)) if fan_in > 1 else None
        self.conv = SeparableConv(in_ch, out_ch, 3, stride)
        self.bn = nn.BatchNorm2d(out_ch)

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        if self.edge_weights is None:
            x = inputs[0]
        else:
            # unbind: one multi-output op rather than a select per edge in the captured graph
            w = torch.sigmoid(self.edge_weights).unbind(0)
            x = inputs[0] * w[0]
            for xi, wi in zip(inputs[1:], w[1:], strict=True):
                x = x + xi * wi
        return self.bn(self.conv(torch.relu(x)))


class WiredStage(nn.Module):
    """One randomly wired stage: nodes in index order over a WS graph oriented low -> high."""

    def __init__(self, n: int, in_ch: int, out_ch: int, cfg: RandWireConfig, seed: int) -> None:
        super().__init__()
        edges = watts_strogatz(n, cfg.k, cfg.p, seed)
        self.preds: list[list[int]] = [[] for _ in range(n)]
        has_succ = [False] * n
        for u, v in edges:
            self.preds[v].append(u)
            has_succ[u] = True
        self.sinks = [i for i in range(n) if not has_succ[i]]
        self.nodes = nn.ModuleList(
            WiredNode(len(p), out_ch, out_ch, 1) if p else WiredNode(1, in_ch, out_ch, 2) for p in self.preds
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outs: list[torch.Tensor] = []
        for node, preds in zip(self.nodes, self.preds, strict=True):
            outs.append(node([outs[j] for j in preds] if preds else [x]))
        y = outs[self.sinks[0]]
        for i in self.sinks[1:]:
            y = y + outs[i]
        return y / len(self.sinks)


class RandWireWS(nn.Module):
    """RandWire-WS, regular regime."""

    def __init__(self, cfg: RandWireConfig = RandWireConfig(), num_classes: int = 1000) -> None:
        super().__init__()
        c = cfg.channels
        self.conv1 = nn.Conv2d(3, c // 2, 3, stride=2, padding=1, bias=False)
        self.conv1_bn = nn.BatchNorm2d(c // 2)
        widths = (c // 2, c, 2 * c, 4 * c, 8 * c)
        sizes = (cfg.nodes // 2, cfg.nodes, cfg.nodes, cfg.nodes)
        self.stages = nn.Sequential(
            *(WiredStage(sizes[i], widths[i], widths[i + 1], cfg, cfg.graph_seed + i) for i in range(4))
        )
        self.head = nn.Conv2d(8 * c, 1280, 1, bias=False)
        self.head_bn = nn.BatchNorm2d(1280)
        self.fc = nn.Linear(1280, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stages(self.conv1_bn(self.conv1(x)))
        x = torch.relu(self.head_bn(self.head(torch.relu(x))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


def _build(cfg: RandWireConfig, batch: int) -> tuple[nn.Module, tuple[torch.Tensor]]:
    seeded(SEED)
    model = RandWireWS(cfg).eval()
    return model, (torch.randn(batch, 3, 224, 224),)


def build(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """RandWire-WS, C = 154 (the IOS benchmark width), in eval mode with random weights."""
    return _build(RandWireConfig(channels=154), batch)


def build_paper_c109(batch: int = 1) -> tuple[nn.Module, tuple[torch.Tensor]]:
    """RandWire-WS, C = 109 (the paper's smaller regular-regime model), in eval mode."""
    return _build(RandWireConfig(channels=109), batch)
