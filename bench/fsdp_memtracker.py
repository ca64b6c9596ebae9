"""PyTorch's ``FSDPMemTracker`` beside streamplan's figures, on the same model and settings.

PyTorch side: the model under ``fully_shard`` (one FSDP unit per decoder layer, the root
holding the rest, ``reshard_after_forward=True``) over 8 ranks of the fake process group,
built and run under ``FakeTensorMode`` (the device mesh made outside it), one step of
forward, loss, backward and Adam tracked by ``FSDPMemTracker``: its peak is the total of
the categories it tracks, in one program order.

streamplan side: the same step captured and turned into one rank's program under
``fsdp=8`` with FSDP2's knobs (no record_stream, prefetch 1, no host waits), scheduled by
``overlap``; parameters (shards), optimizer state and inputs counted. Printed: the
host-order figure (one program order, what a tracker sees), the held worst case over every
timing (the same here: without record_stream nothing is held back), the ``torch-cuda``
replay under maximal run-ahead (allocated and reserved: rounding and segments), and the
device worst case.

Needs torch >= 2.6 with ``torch.distributed._tools`` (the zoo environment):

    PYTHONPATH=src HF_HUB_OFFLINE=1 OMP_NUM_THREADS=1 /work/venvs/zoo/bin/python bench/fsdp_memtracker.py
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

import torch

MIB = 1 << 20
RANKS = 8


def load_models():
    spec = importlib.util.spec_from_file_location(
        "llama_models", Path(__file__).parent / "models" / "llama.py"
    )
    mod = importlib.util.module_from_spec(spec)
    sys.modules["llama_models"] = mod
    spec.loader.exec_module(mod)
    return mod


def pytorch_peak(name: str, batch: int) -> dict[str, int]:
    import torch.distributed as dist
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.distributed._tools.fsdp2_mem_tracker import FSDPMemTracker
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from torch.testing._internal.distributed.fake_pg import FakeStore

    if not dist.is_initialized():
        dist.init_process_group("fake", rank=0, world_size=RANKS, store=FakeStore())
    mesh = init_device_mesh("cpu", (RANKS,))
    models = load_models()
    with FakeTensorMode():
        model, (tokens,), loss_fn, (targets,) = getattr(models, name)(batch)
        for layer in model.model.layers:
            fully_shard(layer, mesh=mesh, reshard_after_forward=True)
        fully_shard(model, mesh=mesh, reshard_after_forward=True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3, foreach=False)
        tracker = FSDPMemTracker(model, opt)
        tracker.track_inputs((tokens, targets))
        with tracker:
            loss = loss_fn(model(tokens), targets)
            loss.backward()
            opt.step()
            opt.zero_grad()
        snap = tracker.get_tracker_snapshot("peak")
    return next(iter(snap.values()))


def streamplan_figures(spec: str, batch: int) -> dict[str, int]:
    from streamplan.cache import CaptureCache
    from streamplan.cost.simulate import simulate
    from streamplan.ir.includes import EVERYTHING
    from streamplan.memory.allocators import replay
    from streamplan.memory.host_order import trace_from_liveness
    from streamplan.memory.launch_time import held_peak
    from streamplan.memory.liveness import liveness
    from streamplan.memory.worst_case import worst_case_peak
    from streamplan.models import ModelRequest
    from streamplan.schedule.registry import make_schedule

    plan = f"fsdp={RANKS},record_stream=false,in_flight=none,prefetch=1"
    g = ModelRequest(spec, batch=batch, train=True, optimizer="adam", parallel=plan).load(
        cache=CaptureCache()
    )
    s = make_schedule(g, "overlap")
    simulate(g, s, "h100")
    live = liveness(g, s, includes=EVERYTHING)
    tc = replay(g, s, "torch-cuda", includes=EVERYTHING, live=live, run_ahead=True)
    wc = worst_case_peak(g, s, live=live, time_limit_s=20)
    return {
        "host order": trace_from_liveness(live, s).peak_bytes,
        "held, worst case": held_peak(live, s).peak_bytes,
        "torch-cuda allocated": tc.allocated_peak_bytes,
        "torch-cuda reserved": tc.reserved_peak_bytes,
        "device worst case": wc.upper_bytes,
        "resident (shards, state, inputs)": sum(life.nbytes for life in live.lives if life.creator is None),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="tiny,small")
    ap.add_argument("--batch", type=int, default=2)
    args = ap.parse_args()
    for name in args.models.split(","):
        theirs = pytorch_peak(name, args.batch)
        ours = streamplan_figures(f"bench/models/llama.py:{name}", args.batch)
        print(f"\n{name} (batch {args.batch} per rank, FSDP over {RANKS} ranks, Adam):")
        print(f"  FSDPMemTracker peak: {theirs['Total'] / MIB:.3f} MiB")
        for k, v in theirs.items():
            if k != "Total" and v:
                print(f"    {k:<22} {v / MIB:10.3f} MiB")
        for k, v in ours.items():
            print(f"  streamplan {k:<34} {v / MIB:10.3f} MiB")


if __name__ == "__main__":
    main()
