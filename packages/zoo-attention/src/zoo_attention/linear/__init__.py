"""zoo_attention.linear: the linear-attention contract (the gated delta rule).

``gated_delta_rule(query, key, value, log_decay, beta)`` is the one call a gated DeltaNet layer
(Qwen3.5, Qwen3-Next) makes for its recurrence; kernels plug in through the
``zoo.linear_attention_kernels`` entry-point group and are chosen per call like attention
kernels (``implementation=``, else ``ZOO_LINEAR_ATTENTION``, else the platform's default
order), by the same registry and resolution machinery; ``zoo_attention.recording()`` collects
what was chosen (``log.linear_attention``). ``recurrent`` (the token-by-token recurrence) is
the definition; ``chunked_xla`` (chunkwise parallel, plain XLA) is every platform's fallback.
"""

from .._registry import KernelRegistrationError as KernelRegistrationError
from .._resolve import KernelUnavailableError as KernelUnavailableError
from ._api import gated_delta_rule as gated_delta_rule
from ._api import scope_name as scope_name
from ._chunked import CHUNK as CHUNK
from ._chunked import chunk_size as chunk_size
from ._chunked import chunked_rule as chunked_rule
from ._chunked import segment_masks as segment_masks
from ._kernel import LINEAR_ATTENTION_CONTRACT_VERSION as LINEAR_ATTENTION_CONTRACT_VERSION
from ._kernel import LinearAttentionKernel as LinearAttentionKernel
from ._prepare import L2_EPS as L2_EPS
from ._prepare import document_starts as document_starts
from ._prepare import l2_normalize as l2_normalize
from ._prepare import prepare_qk as prepare_qk
from ._recurrent import recurrence as recurrence
from ._registry import ENTRY_POINT_GROUP as ENTRY_POINT_GROUP
from ._registry import ENV_VAR as ENV_VAR
from ._registry import FALLBACK as FALLBACK
from ._registry import default_order as default_order
from ._registry import get_kernel as get_kernel
from ._registry import kernels as kernels
from ._registry import provide_kernel as provide_kernel
from ._registry import refused_kernels as refused_kernels
from ._registry import register_kernel as register_kernel
from ._registry import reload_kernels as reload_kernels
from ._registry import resolve as resolve
from ._registry import unregister_kernel as unregister_kernel
from ._spec import LinearAttentionSpec as LinearAttentionSpec
from ._spec import make_spec as make_spec
