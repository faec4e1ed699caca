"""Attention over a sequence split across devices (context parallelism), behind the contract.

Models call :func:`zoo_attention.dot_product_attention` as always; under a mesh with a
sequence axis (``context``, or the axes :func:`zoo_attention.partition_axes` names) it runs
:func:`sequence_sharded_call`. :func:`dual_chunk_order` lays out a sequence for causal load
balancing.
"""

from ._order import dual_chunk_chunks as dual_chunk_chunks
from ._order import dual_chunk_order as dual_chunk_order
from ._order import from_dual_chunk as from_dual_chunk
from ._order import natural_order as natural_order
from ._order import to_dual_chunk as to_dual_chunk
from ._sharded import CONTEXT_AXIS as CONTEXT_AXIS
from ._sharded import SequencePlan as SequencePlan
from ._sharded import sequence_plan as sequence_plan
from ._sharded import sequence_sharded_call as sequence_sharded_call
