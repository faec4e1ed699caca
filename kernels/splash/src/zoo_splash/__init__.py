"""zoo-splash: JAX's own splash attention (Pallas, TPU) behind the zoo attention contract.

Registered as ``splash`` through the ``zoo.attention_kernels`` entry point, second in the TPU
default order (after ``flash_tpu``); models reach it through
``zoo_attention.dot_product_attention``, first with ``implementation="splash"`` or
``ZOO_ATTENTION=splash``. ``splash_attention`` is the functional entry point with splash's own
knobs; ``choose_block_sizes`` and ``multi_head_mask`` say what a call would use.
"""

from ._attention import EMPTY_ROW_SINK as EMPTY_ROW_SINK
from ._attention import splash_attention as splash_attention
from ._blocks import BLOCK_CHOICES as BLOCK_CHOICES
from ._blocks import LANES as LANES
from ._blocks import choose_block_sizes as choose_block_sizes
from ._blocks import length_reason as length_reason
from ._check import MAX_HEAD_DIM as MAX_HEAD_DIM
from ._check import SUPPORTED_DTYPES as SUPPORTED_DTYPES
from ._interpret import INTERPRET_VAR as INTERPRET_VAR
from ._kernel import KERNEL as KERNEL
from ._kernel import SplashKernel as SplashKernel
from ._mask import head_mask as head_mask
from ._mask import multi_head_mask as multi_head_mask

__version__ = "0.1.1.dev0"
