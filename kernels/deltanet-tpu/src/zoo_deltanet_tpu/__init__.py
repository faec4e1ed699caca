"""zoo_deltanet_tpu: the gated delta rule (gated DeltaNet's linear attention) as Pallas TPU
kernels behind the zoo linear-attention contract.

Registered as ``deltanet_tpu`` through the ``zoo.linear_attention_kernels`` entry point; a
gated DeltaNet layer reaches it through ``zoo_attention.linear.gated_delta_rule``.
``gated_delta_rule_tpu`` is the call with its own knob (interpret mode); ``chunk_step`` the
per-chunk math both kernels run; ``vmem_bytes`` and ``shape_problem`` the block-size policy.
"""

from ._chunk import chunk_step as chunk_step
from ._chunk import invert_unit_lower as invert_unit_lower
from ._interpret import INTERPRET_VAR as INTERPRET_VAR
from ._kernel import KERNEL as KERNEL
from ._kernel import DeltanetTpuKernel as DeltanetTpuKernel
from ._kernel import gated_delta_rule_tpu as gated_delta_rule_tpu
from ._policy import VMEM_BUDGET as VMEM_BUDGET
from ._policy import shape_problem as shape_problem
from ._policy import vmem_bytes as vmem_bytes

__version__ = "0.1.0.dev0"
