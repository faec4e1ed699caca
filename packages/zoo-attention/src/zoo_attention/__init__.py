"""zoo_attention: the attention contract of zoo.

``dot_product_attention`` is the only call models make; kernels plug in through the
``zoo.attention_kernels`` entry-point group and are chosen per call (see ``resolve``).
"""

from ._api import dot_product_attention as dot_product_attention
from ._api import scope_name as scope_name
from ._cli import format_table as format_table
from ._cli import kernel_rows as kernel_rows
from ._cli import verify as verify
from ._cli import verify_count as verify_count
from ._cli import verify_line as verify_line
from ._kernel import CONTRACT_VERSION as CONTRACT_VERSION
from ._kernel import AttentionKernel as AttentionKernel
from ._mask import soft_cap as soft_cap
from ._mask import visible as visible
from ._partition import PartitionAxes as PartitionAxes
from ._partition import current_partition_axes as current_partition_axes
from ._partition import partition_axes as partition_axes
from ._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._registry import KernelRegistrationError as KernelRegistrationError
from ._registry import RefusedKernel as RefusedKernel
from ._registry import get_kernel as get_kernel
from ._registry import kernels as kernels
from ._registry import refused_kernels as refused_kernels
from ._registry import register_kernel as register_kernel
from ._registry import reload_kernels as reload_kernels
from ._registry import unregister_kernel as unregister_kernel
from ._resolve import ENV_VAR as ENV_VAR
from ._resolve import KernelUnavailableError as KernelUnavailableError
from ._resolve import Resolution as Resolution
from ._resolve import clear_resolutions as clear_resolutions
from ._resolve import default_order as default_order
from ._resolve import last_resolution as last_resolution
from ._resolve import resolutions as resolutions
from ._resolve import resolve as resolve
from ._spec import AttentionSpec as AttentionSpec
from ._spec import make_spec as make_spec
from ._target import Target as Target
from ._target import find_target as find_target

__version__ = "1.1.4.dev0"
