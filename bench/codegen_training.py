"""Training steps written by ``streamplan codegen --train``: the generated step's time on the CPU
beside eager PyTorch's step (forward, loss, ``loss.backward()``, ``torch.optim``), side by side.

Each repeat runs one eager step and one generated step, alternately, so that both see the
same load on a shared machine; the figures are medians. The eager optimizer is
``torch.optim`` with ``foreach=False`` (the single-tensor code the graph's update replays;
on the CPU it is torch's default too). The first step's loss of both is printed as a check
(dropout draws differ, so models with dropout differ slightly).

    OMP_NUM_THREADS=1 python bench/codegen_training.py --models squeezenet googlenet --optimizers sgd adam
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import statistics
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="*", default=["squeezenet", "googlenet"])
    ap.add_argument("--optimizers", nargs="*", default=["sgd", "adam"])
    ap.add_argument("--policy", default="nimble")
    ap.add_argument("--batch", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=7)
    args = ap.parse_args(argv)

    import torch

    from streamplan.app.codegen import codegen_policy
    from streamplan.app.context import make_context
    from streamplan.frontends.training import capture_training
    from streamplan.ir.training import training_step
    from streamplan.runtime.training import _optimizer
    from streamplan.zoo.training import training_problem

    torch.set_num_threads(1)
    ctx = make_context(device="v100", max_streams=4, time_limit_s=5.0)
    tmp = Path(tempfile.mkdtemp())
    print(
        f"training step (batch {args.batch}, CPU, one thread; medians of {args.repeat} alternating steps; "
        f"{args.policy} schedule, max 4 streams)"
    )
    print(
        f"{'model':12} {'optimizer':9} {'write s':>8} {'lines':>6} {'eager ms':>9} {'module ms':>10} "
        f"{'ratio':>6} {'loss diff':>10}"
    )
    for name in args.models:
        for opt in args.optimizers:
            problem = training_problem(name, args.batch)
            graph = capture_training(problem, optimizer=opt, name=name)
            t0 = time.perf_counter()
            generated = codegen_policy(graph, args.policy, ctx, model=name)
            write_s = time.perf_counter() - t0
            path = tmp / f"{name}_{opt}.py"
            path.write_text(generated.source)
            spec = importlib.util.spec_from_file_location(path.stem, path)
            code = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(code)
            step = getattr(code, generated.class_name)()

            eager = copy.deepcopy(problem.module).train()
            step.load_weights(eager)
            optimizer = _optimizer(training_step(graph), list(eager.parameters())) if opt != "none" else None
            inputs = tuple(problem.inputs)
            targets = tuple(problem.targets)

            def eager_step(m=eager, o=optimizer, x=inputs, p=problem):
                m.zero_grad(set_to_none=True)
                loss = p.compute_loss(m(*x))
                loss.backward()
                if o is not None:
                    o.step()
                return loss.detach()

            def generated_step(s=step, x=inputs, y=targets):
                return s(*x, *y)[0]

            first_diff = abs(float(eager_step()) - float(generated_step()))  # also the warm-up
            eager_ms, module_ms = [], []
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                eager_step()
                eager_ms.append((time.perf_counter() - t0) * 1e3)
                t0 = time.perf_counter()
                generated_step()
                module_ms.append((time.perf_counter() - t0) * 1e3)
            e, g = statistics.median(eager_ms), statistics.median(module_ms)
            lines = generated.source.count("\n")
            print(
                f"{name:12} {opt:9} {write_s:8.2f} {lines:6d} {e:9.1f} {g:10.1f} {g / e:6.2f} {first_diff:10.2e}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
