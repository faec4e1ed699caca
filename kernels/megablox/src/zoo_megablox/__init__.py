"""zoo_megablox: JAX's Pallas megablox grouped matmul (TPU) behind the zoo grouped-matmul
contract.

Registered as ``megablox`` through the ``zoo.grouped_matmul_kernels`` entry point; a
mixture-of-experts layer reaches it through ``zoo_attention.grouped.grouped_matmul``.
``megablox_gmm`` is the call with its own knobs (tiling, interpret mode); ``choose_tiling`` is
the tiling policy.
"""

from ._call import megablox_gmm as megablox_gmm
from ._interpret import INTERPRET_VAR as INTERPRET_VAR
from ._kernel import KERNEL as KERNEL
from ._kernel import MegabloxKernel as MegabloxKernel
from ._policy import MAX_TILES as MAX_TILES
from ._policy import Tiling as Tiling
from ._policy import choose_tiling as choose_tiling
from ._policy import tiling_problem as tiling_problem

__version__ = "0.1.0"
