"""zoo_attention.grouped: the grouped-matmul contract.

``grouped_matmul(lhs [M, K], rhs [G, K, N], group_sizes [G])`` is the one call a
mixture-of-experts layer multiplies its experts through; kernels plug in through the
``zoo.grouped_matmul_kernels`` entry-point group and are chosen per call like attention
kernels (``implementation=``, else ``ZOO_GROUPED_MATMUL``, else the platform's default order),
by the same registry and resolution machinery; ``zoo_attention.recording()`` collects what was
chosen (``log.grouped_matmul``). ``ragged_dot`` (``jax.lax.ragged_dot``) is the reference.
"""

from .._registry import KernelRegistrationError as KernelRegistrationError
from .._resolve import KernelUnavailableError as KernelUnavailableError
from ._api import grouped_matmul as grouped_matmul
from ._api import scope_name as scope_name
from ._kernel import GROUPED_MATMUL_CONTRACT_VERSION as GROUPED_MATMUL_CONTRACT_VERSION
from ._kernel import GroupedMatmulKernel as GroupedMatmulKernel
from ._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._registry import ENV_VAR as ENV_VAR
from ._registry import default_order as default_order
from ._registry import get_kernel as get_kernel
from ._registry import kernels as kernels
from ._registry import provide_kernel as provide_kernel
from ._registry import refused_kernels as refused_kernels
from ._registry import register_kernel as register_kernel
from ._registry import reload_kernels as reload_kernels
from ._registry import resolve as resolve
from ._registry import unregister_kernel as unregister_kernel
from ._spec import GroupedMatmulSpec as GroupedMatmulSpec
from ._spec import make_spec as make_spec
