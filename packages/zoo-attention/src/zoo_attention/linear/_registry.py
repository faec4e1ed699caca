"""The linear-attention kernels: the registry, its entry-point group and its resolution."""

from __future__ import annotations

from .._record import LINEAR_ATTENTION, Resolution
from .._registry import KernelRegistry
from .._resolve import Resolver
from ._kernel import LINEAR_ATTENTION_CONTRACT_VERSION, LinearAttentionKernel
from ._spec import LinearAttentionSpec

ENTRY_POINT_GROUP = "zoo.linear_attention_kernels"
ENV_VAR = "ZOO_LINEAR_ATTENTION"
#: The kernel every default order ends with: the chunkwise-parallel XLA form, every platform.
FALLBACK = "chunked_xla"

LINEAR: KernelRegistry[LinearAttentionKernel] = KernelRegistry(
    kind="linear attention",
    group=ENTRY_POINT_GROUP,
    base=LinearAttentionKernel,
    base_name="zoo_attention.linear.LinearAttentionKernel",
    contract_version=LINEAR_ATTENTION_CONTRACT_VERSION,
    reference=FALLBACK,
    reference_path="zoo_attention.linear._chunked:KERNEL",
)
# The token-by-token recurrence, the definition the others are checked against: opt-in.
LINEAR.provide("recurrent", "zoo_attention.linear._recurrent:KERNEL", "zoo-attention")
_RESOLVER: Resolver[LinearAttentionKernel] = Resolver(
    LINEAR, env_var=ENV_VAR, kind=LINEAR_ATTENTION, label="linear attention "
)


#: ``register_kernel(kernel, *, replace=False)``, ``unregister_kernel(name)``,
#: ``reload_kernels()``, ``get_kernel(name)``, ``kernels()``, ``refused_kernels()`` and
#: ``provide_kernel(name, "module:attribute", distribution)``, as ``zoo_attention.grouped``'s.
register_kernel = LINEAR.register
provide_kernel = LINEAR.provide
unregister_kernel = LINEAR.unregister
reload_kernels = LINEAR.reload
get_kernel = LINEAR.get
kernels = LINEAR.kernels
refused_kernels = LINEAR.refused


def default_order(platform: str) -> list[LinearAttentionKernel]:
    """Linear-attention kernels tried for ``platform`` when nothing is named: by priority,
    ``chunked_xla`` last. Kernels with priority 0 or below (``recurrent``) are opt-in."""
    return _RESOLVER.default_order(platform)


def resolve(spec: LinearAttentionSpec, implementation: str | None = None) -> Resolution:
    """Pick the linear-attention kernel for ``spec`` and record it (kind
    ``"linear_attention"``) in the open ``zoo_attention.recording()`` blocks.

    Args:
        spec: the validated call.
        implementation: a kernel name, or ``None`` for ``ZOO_LINEAR_ATTENTION`` (a comma list:
            the first that can serve; each one passed over is logged once with its reason),
            else the platform's default order.

    Raises:
        ValueError: ``implementation`` names no installed kernel, or ``ZOO_LINEAR_ATTENTION``
            names none at all.
        KernelUnavailableError: the named kernel (or every ``ZOO_LINEAR_ATTENTION`` entry)
            cannot serve ``spec``; the message carries each kernel's reason.
    """
    return _RESOLVER.resolve(spec, implementation)
