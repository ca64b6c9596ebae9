"""The fusion rules in force: which of Inductor's decisions the transform makes (``docs/fusion.md``)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

from streamplan.errors import FileFormatError


@dataclass(frozen=True, slots=True)
class FusionRules:
    """Which fusions are allowed, besides pointwise chains and reductions with their
    prologue and epilogue (always on).

    - ``cse``: an op repeating an earlier op on the same inputs is not run again (the
      compiler's common subexpression elimination, before fusion);
    - ``fold_batch_norm``: an inference batch-norm right after a convolution is folded
      into its weights (Inductor does this when it freezes the weights);
    - ``gemm_epilogue``: pointwise ops after a convolution or matmul run in its epilogue
      (Inductor's GEMM templates under max-autotune; cuDNN conv-bias-activation). Off
      by default: Inductor's default calls the library kernel and fuses nothing into it;
    - ``horizontal``: kernels of the same size that read a common tensor are merged
      (Inductor's horizontal fusion; this is what can merge parallel branches);
    - ``concat_in_place``: a concatenation whose inputs all come from fusible kernels is
      written by them in place and launches nothing (Inductor's ``ConcatKernel``);
    - ``max_kernel_ops``: no kernel fuses more ops than this (Inductor's ``max_fusion_size``);
    - ``horizontal_window``: horizontal fusion only joins kernels whose ops lie within this many
      ops of each other in the graph's order (Inductor's guard against long-distance fusions,
      which would allocate outputs long before they are needed and raise the peak).
    """

    cse: bool = True
    fold_batch_norm: bool = True
    gemm_epilogue: bool = False
    horizontal: bool = True
    concat_in_place: bool = True
    max_kernel_ops: int = 64
    horizontal_window: int = 64

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @staticmethod
    def from_dict(data: Any, *, source: str = "<dict>") -> FusionRules:
        """Rules from their JSON form (unknown keys or wrong types are a ``FileFormatError``)."""
        names = {f.name: f.type for f in fields(FusionRules)}
        if not isinstance(data, dict) or set(data) - set(names):
            raise FileFormatError(
                f"malformed fusion rules {data!r:.80}", where=source, hint=f"known rules: {', '.join(names)}"
            )
        for k, v in data.items():
            is_int = names[k] == "int"  # the other rules are bools
            ok = isinstance(v, int) and not isinstance(v, bool) if is_int else isinstance(v, bool)
            if not ok:
                raise FileFormatError(f"fusion rule {k!r} has the wrong type: {v!r:.40}", where=source)
        return FusionRules(**data)


INDUCTOR_RULES = FusionRules()
