"""``random:N[:seed]``: network-like random DAGs built without torch, for scale tests.

Like real models: bounded fan-in (1-3), mostly local edges (inputs drawn from the
previous few ops, with an occasional long skip), a mix of 3x3 convs (shared
weights) and elementwise ops, all on one activation shape so every graph is also
executable. Deterministic for a given N and seed.
"""

from __future__ import annotations

import random

from streamplan.errors import ModelSpecError
from streamplan.frontends.argcodec import tensor_ref
from streamplan.ir.dtypes import tensor_bytes
from streamplan.ir.graph import Graph, Node, Value

WINDOW = 8
MAX_OPS = 200_000  # random:N's largest N (about 10 s and 0.5 GB to build; a million took 55 s and 2.7 GB)
LONG_EDGE_PROB = 0.05
WEIGHT_POOL = 16


def parse_spec(spec: str) -> tuple[int, int]:
    """'random:N[:seed]' -> (N, seed)."""
    parts = spec.split(":")
    try:
        n = int(parts[1])
        seed = int(parts[2]) if len(parts) > 2 else 0
        if n < 1 or len(parts) > 3:
            raise ValueError
    except (IndexError, ValueError):
        raise ModelSpecError(
            f"bad random model spec {spec!r}",
            hint="write random:N or random:N:SEED with N >= 1, e.g. random:1000",
        ) from None
    check_size(spec, n, MAX_OPS)
    return n, seed


def check_size(spec: str, n: int, cap: int) -> None:
    """Refuse a random graph larger than ``cap`` ops before building any of it."""
    if n > cap:
        raise ModelSpecError(
            f"{n} ops is more than a random graph may have (at most {cap})",
            where=spec,
            hint=f"ask for at most {cap} ops",
        )


def random_dag(
    n: int, seed: int = 0, *, batch: int = 1, dtype: str = "float32", channels: int = 64, size: int = 28
) -> Graph:
    rng = random.Random(seed)
    shape = (batch, channels, size, size)
    nbytes = tensor_bytes(shape, dtype)
    values: dict[str, Value] = {"x": Value("x", shape, dtype, nbytes, "input")}
    params = []
    for k in range(min(WEIGHT_POOL, n)):
        wid = f"w{k}"
        wshape = (channels, channels, 3, 3)
        values[wid] = Value(wid, wshape, dtype, tensor_bytes(wshape, dtype), "param")
        params.append(wid)
    nodes: list[Node] = []
    consumed: set[str] = set()
    numel = nbytes // (tensor_bytes((1,), dtype))
    conv_flops = 2 * numel * channels * 9
    for i in range(n):
        vid = f"v{i}"
        if i == 0:
            ins = ["x"]
        else:
            fan_in = min(i, rng.choices((1, 2, 3), weights=(0.6, 0.3, 0.1))[0])
            picks: set[int] = set()
            # Real networks have few dead ends: prefer a recent op nobody reads yet.
            fresh = [j for j in range(max(0, i - WINDOW), i) if f"v{j}" not in consumed]
            if fresh and rng.random() < 0.8:
                picks.add(fresh[0])
            while len(picks) < fan_in:
                if rng.random() < LONG_EDGE_PROB:
                    picks.add(rng.randrange(i))
                else:
                    picks.add(rng.randrange(max(0, i - WINDOW), i))
            ins = [f"v{j}" for j in sorted(picks)]
        if len(ins) == 1 and rng.random() < 0.5:
            w = params[rng.randrange(len(params))]
            op, reads, flops = "aten.convolution.default", [ins[0], w], conv_flops
            args = [tensor_ref(ins[0]), tensor_ref(w), None, [1, 1], [1, 1], [1, 1], False, [0, 0], 1]
        elif len(ins) == 1:
            op, reads, flops = "aten.relu.default", ins, numel
            args = [tensor_ref(ins[0])]
        elif len(ins) == 2:
            op, reads, flops = "aten.add.Tensor", ins, numel
            args = [tensor_ref(ins[0]), tensor_ref(ins[1])]
        else:
            op, reads, flops = "aten.addcmul.default", ins, 2 * numel
            args = [tensor_ref(x) for x in ins]
        consumed.update(ins)
        values[vid] = Value(vid, shape, dtype, nbytes, "activation")
        read_bytes = sum(values[r].nbytes for r in reads)
        nodes.append(
            Node(f"n{i}", op, tuple(reads), (vid,), {"args": args, "kwargs": {}}, flops, read_bytes, nbytes)
        )
    outputs = tuple(f"v{i}" for i in range(n) if f"v{i}" not in consumed)
    return Graph(
        f"random:{n}:{seed}",
        tuple(nodes),
        values,
        ("x",),
        tuple(params),
        outputs,
        meta={"generator": "random_dag", "seed": seed, "batch": batch},
    )
