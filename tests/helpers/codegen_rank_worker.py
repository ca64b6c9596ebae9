"""One rank of a generated rank program, with torch only: ``python codegen_rank_worker.py RANK RANKS JOB``.

``JOB`` holds the generated module (``module.py``) and ``rank<RANK>.in.pt`` (the rank's inputs
in ``forward``'s order and its weights by the names ``load_weights`` takes). The rank joins a
gloo group through a file store in ``JOB``, runs one call of the module (one training step)
and writes what ``forward`` returned (in the order of ``OUTPUTS``) to ``rank<RANK>.out.pt``.
Nothing of streamplan is imported: the module must run as a user would run it.
"""

from __future__ import annotations

import importlib.util
import pickle
import sys
from pathlib import Path

import torch
import torch.distributed as dist


def main(rank: int, ranks: int, job: Path) -> None:
    torch.set_num_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=ranks, init_method=f"file://{job / 'store'}")
    try:
        spec = importlib.util.spec_from_file_location("generated_rank_program", job / "module.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        cls = next(
            v for v in vars(module).values() if isinstance(v, type) and v.__module__ == module.__name__
        )
        with open(job / f"rank{rank}.in.pt", "rb") as f:
            given = pickle.load(f)
        program = cls()  # makes its process groups: every rank in the same order
        program.load_weights(given["weights"])
        outputs = program(*given["inputs"])
        with open(job / f"rank{rank}.out.pt", "wb") as f:
            pickle.dump([t.detach().clone() for t in outputs], f)
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))
