"""zoo-flash-tpu: a Pallas (Mosaic) flash-attention kernel for TPU behind the zoo contract.

Registered as ``flash_tpu`` through the ``zoo.attention_kernels`` entry point; models reach it
through ``zoo_attention.dot_product_attention``. ``flash_attention`` and
``sharded_flash_attention`` expose the kernel's own knobs (block sizes, target generation);
``plan_call`` says what a call would use (blocks, VMEM, modelled HBM traffic) without compiling.
"""

from ._api import INTERPRET_VAR as INTERPRET_VAR
from ._api import flash_attention as flash_attention
from ._kernel import KERNEL as KERNEL
from ._kernel import FlashTpuKernel as FlashTpuKernel
from ._plan import CallPlan as CallPlan
from ._plan import plan_call as plan_call
from ._policy import GENERATIONS as GENERATIONS
from ._policy import BlockSizes as BlockSizes
from ._policy import Generation as Generation
from ._policy import choose_block_sizes as choose_block_sizes
from ._policy import generation_for as generation_for
from ._shard import sharded_flash_attention as sharded_flash_attention

__version__ = "0.3.3.dev0"
