"""zoo_attention.cross_entropy: the fused linear cross-entropy contract.

``linear_cross_entropy(hidden [..., D], head, targets [...])`` is the one call a language
model's loss makes on its output head: each token's cross entropy and log normaliser, with a
loss mask and a final logit soft cap, from a head laid out ``[D, V]`` or ``[V, D]`` (tied).
Kernels plug in through the ``zoo.cross_entropy_kernels`` entry-point group and are chosen per
call like attention kernels (``implementation=``, else ``ZOO_CROSS_ENTROPY``, else the
platform's default order); ``zoo_attention.recording()`` collects what was chosen
(``log.cross_entropy``). ``logits`` (the whole logits, then float32 cross entropy) is the
reference; ``fused_xla`` (token tiles under ``scan``) serves every platform without them.

``linear_cross_entropy_loss(hidden, head, targets, weights, *, z_loss)`` is the summed loss a
trainer takes, ``Σ w · (ce + z_loss · log_z²)``: knowing the weights up front, ``fused_xla``
computes its gradients in the forward pass (no logits recomputed).
"""

from .._registry import KernelRegistrationError as KernelRegistrationError
from .._resolve import KernelUnavailableError as KernelUnavailableError
from ._api import linear_cross_entropy as linear_cross_entropy
from ._api import linear_cross_entropy_loss as linear_cross_entropy_loss
from ._api import scope_name as scope_name
from ._kernel import CROSS_ENTROPY_CONTRACT_VERSION as CROSS_ENTROPY_CONTRACT_VERSION
from ._kernel import CrossEntropyKernel as CrossEntropyKernel
from ._kernel import sum_losses as sum_losses
from ._logits import head_logits as head_logits
from ._logits import spec_logits as spec_logits
from ._logits import token_losses as token_losses
from ._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._registry import ENV_VAR as ENV_VAR
from ._registry import REFERENCE as REFERENCE
from ._registry import default_order as default_order
from ._registry import get_kernel as get_kernel
from ._registry import kernels as kernels
from ._registry import provide_kernel as provide_kernel
from ._registry import refused_kernels as refused_kernels
from ._registry import register_kernel as register_kernel
from ._registry import reload_kernels as reload_kernels
from ._registry import resolve as resolve
from ._registry import unregister_kernel as unregister_kernel
from ._spec import HEAD_LAYOUTS as HEAD_LAYOUTS
from ._spec import CrossEntropySpec as CrossEntropySpec
from ._spec import HeadLayout as HeadLayout
from ._spec import make_spec as make_spec
