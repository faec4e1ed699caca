"""zoo_tokamax: tokamax's TPU kernels behind the zoo contracts, one module per contract.

``tokamax`` (``_cross_entropy``): tokamax's Mosaic linear softmax cross entropy, registered
through ``zoo.cross_entropy_kernels``; a language model's loss reaches it through
``zoo_attention.cross_entropy.linear_cross_entropy``.
"""

from ._cross_entropy import CROSS_ENTROPY_KERNEL as CROSS_ENTROPY_KERNEL
from ._cross_entropy import TokamaxCrossEntropyKernel as TokamaxCrossEntropyKernel
from ._cross_entropy import tpu_generation as tpu_generation

__version__ = "0.1.0.dev0"
