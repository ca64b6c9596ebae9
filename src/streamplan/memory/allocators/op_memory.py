"""Device memory that ops take beyond the graph's tensors, for the ``torch-cuda`` replay.

The graph knows every tensor a schedule makes, but on a GPU an op also allocates
from the caching allocator behind the graph's back:

* **scratch**: cuDNN convolution workspaces, temporaries inside composite ops
  (``matmul`` copying a transposed operand, ``linear`` reshaping, ``layer_norm``'s
  statistics), per-call cuBLAS workspaces. Allocated after the op's outputs on the
  op's stream and freed when it returns, so they raise the peak of the moment
  without outliving the op.
* **stream workspaces**: cuBLAS/cuBLASLt keep a workspace per (handle, stream),
  made at a stream's first BLAS call and kept: a schedule with k streams running
  matmuls holds k of them. Whether they come from the caching allocator (and how big
  they are: 32 MiB on Hopper by default) depends on the torch version and
  ``CUBLAS_WORKSPACE_CONFIG``, so the size is measured, not assumed.

Neither can be derived from shapes; both are measured on the device
(``runtime.op_timing.op_scratch_bytes`` and ``stream_workspace_bytes``) and stored
in the measured table next to the op times. ``OpMemory.from_table`` turns a table
into what ``replay(..., op_memory=...)`` adds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from streamplan.cost.measured import MeasuredTable, op_signature
from streamplan.cost.op_classes import op_base_name
from streamplan.ir.fused import kernel_op
from streamplan.ir.graph import Graph

# ops that call cuBLAS/cuBLASLt on CUDA (convolutions go to cuDNN, whose workspaces are scratch)
BLAS_OPS = frozenset(
    {"mm", "addmm", "bmm", "baddbmm", "addbmm", "addmv", "mv", "dot", "matmul", "linear", "einsum"}
)


@dataclass(frozen=True)
class OpMemory:
    """What the replay allocates besides the graph's storages.

    ``scratch_bytes`` maps node ids to transient bytes (allocated after the op's
    outputs on its stream, freed when it returns); ``stream_workspace_bytes`` is held
    by each stream that runs an op in ``workspace_ops`` (made by its first BLAS call
    and kept, so every later run holds it from the start).
    """

    scratch_bytes: Mapping[str, int] = field(default_factory=dict)
    stream_workspace_bytes: int = 0
    workspace_ops: frozenset[str] = frozenset()

    @staticmethod
    def from_table(graph: Graph, table: MeasuredTable) -> OpMemory:
        """Scratch per node from the table's signatures; workspaces for the graph's BLAS ops."""
        scratch = {}
        for node in graph.nodes:
            n = table.scratch_bytes.get(op_signature(graph, node), 0)
            if n > 0:
                scratch[node.id] = n
        blas = frozenset(n.id for n in graph.nodes if op_base_name(kernel_op(n)) in BLAS_OPS)
        return OpMemory(scratch, table.stream_workspace_bytes, blas)

    @property
    def empty(self) -> bool:
        return not self.scratch_bytes and not (self.stream_workspace_bytes and self.workspace_ops)
