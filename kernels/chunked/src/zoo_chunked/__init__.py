"""zoo_chunked: portable blockwise attention with online softmax and O(T) memory.

Registered with ``zoo_attention`` as the kernel ``"chunked"`` (opt-in: pass
``implementation="chunked"`` or set ``ZOO_ATTENTION=chunked``).
"""

from ._chunked import KERNEL as KERNEL
from ._chunked import ChunkedKernel as ChunkedKernel
from ._policy import DEFAULT_BLOCKS as DEFAULT_BLOCKS
from ._policy import ENV_BLOCK_KV as ENV_BLOCK_KV
from ._policy import ENV_BLOCK_Q as ENV_BLOCK_Q
from ._policy import BlockSizes as BlockSizes
from ._policy import Plan as Plan
from ._policy import make_plan as make_plan
from ._policy import resolve_block_sizes as resolve_block_sizes
from ._policy import split_length as split_length
from ._vjp import chunked_attention as chunked_attention

__version__ = "0.2.2.dev0"
