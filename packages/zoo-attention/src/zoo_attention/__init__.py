"""zoo_attention: the kernel contracts of zoo.

``dot_product_attention`` is the only attention call models make; kernels plug in through the
``zoo.attention_kernels`` entry-point group and are chosen per call (see ``resolve``);
``recording()`` collects what was chosen. ``zoo_attention.grouped`` is the grouped-matmul
contract (mixture-of-experts layers), ``zoo_attention.cross_entropy`` the fused linear
cross-entropy contract (a language model's loss on its output head, without its logits) and
``zoo_attention.linear`` the linear-attention contract (the gated delta rule of gated DeltaNet
layers), each with its own kernels chosen by the same machinery.
"""

import importlib
import warnings
from typing import Any

from . import context as context
from . import cross_entropy as cross_entropy
from . import grouped as grouped
from . import linear as linear
from ._api import dot_product_attention as dot_product_attention
from ._api import scope_name as scope_name
from ._kernel import CONTRACT_VERSION as CONTRACT_VERSION
from ._kernel import AttentionKernel as AttentionKernel
from ._mask import soft_cap as soft_cap
from ._mask import visible as visible
from ._partition import PartitionAxes as PartitionAxes
from ._partition import current_partition_axes as current_partition_axes
from ._partition import partition_axes as partition_axes
from ._record import Resolution as Resolution
from ._record import ResolutionLog as ResolutionLog
from ._record import recording as recording
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
from ._resolve import default_order as default_order
from ._resolve import resolve as resolve
from ._spec import AttentionSpec as AttentionSpec
from ._spec import make_spec as make_spec
from ._target import Target as Target
from ._target import find_target as find_target

__version__ = "1.3.0.dev0"

# Names that left the API in 1.2, kept working (with a DeprecationWarning) for code written
# against 1.1, zoo-train 0.9.0 among it, until contract 2: name -> (module, what replaces it).
_DEPRECATED = {
    "last_resolution": ("._record", "`with zoo_attention.recording() as log:` then `log.last`"),
    "resolutions": ("._record", "`with zoo_attention.recording() as log:` then `log.resolutions`"),
    "clear_resolutions": ("._record", "`zoo_attention.recording()`: nothing global to reset"),
    "verify": (".testing", "`zoo_attention.testing.verify`"),
    "verify_count": (".testing", "`zoo_attention.testing.verify_count`"),
    "kernel_rows": ("._cli", "`zoo kernels` (zoo-train)"),
    "format_table": ("._cli", "`zoo kernels` (zoo-train)"),
    "verify_line": ("._cli", "`zoo kernels verify` (zoo-train)"),
}


def __getattr__(name: str) -> Any:
    if name not in _DEPRECATED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, instead = _DEPRECATED[name]
    warnings.warn(
        f"zoo_attention.{name} is deprecated since zoo-attention 1.2 and goes at contract 2; "
        f"use {instead}.",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(importlib.import_module(module, __name__), name)
