"""The fused linear cross-entropy kernels: the registry, its entry-point group and its
resolution."""

from __future__ import annotations

from .._record import CROSS_ENTROPY, Resolution
from .._registry import KernelRegistry
from .._resolve import Resolver
from ._kernel import CROSS_ENTROPY_CONTRACT_VERSION, CrossEntropyKernel
from ._spec import CrossEntropySpec

ENTRY_POINT_GROUP = "zoo.cross_entropy_kernels"
ENV_VAR = "ZOO_CROSS_ENTROPY"
#: The reference: the logits, then float32 cross entropy.
REFERENCE = "logits"

CROSS_ENTROPY_KERNELS: KernelRegistry[CrossEntropyKernel] = KernelRegistry(
    kind="cross entropy",
    group=ENTRY_POINT_GROUP,
    base=CrossEntropyKernel,
    base_name="zoo_attention.cross_entropy.CrossEntropyKernel",
    contract_version=CROSS_ENTROPY_CONTRACT_VERSION,
    reference=REFERENCE,
    reference_path="zoo_attention.cross_entropy._logits:KERNEL",
)
# The fused XLA kernel ships here too: registered even where the entry points are not installed.
CROSS_ENTROPY_KERNELS.provide(
    "fused_xla", "zoo_attention.cross_entropy._fused_xla:KERNEL", "zoo-attention"
)
_RESOLVER: Resolver[CrossEntropyKernel] = Resolver(
    CROSS_ENTROPY_KERNELS, env_var=ENV_VAR, kind=CROSS_ENTROPY, label="cross entropy "
)


#: ``register_kernel(kernel, *, replace=False)``, ``unregister_kernel(name)``,
#: ``reload_kernels()``, ``get_kernel(name)``, ``kernels()`` and ``refused_kernels()``, as
#: ``zoo_attention``'s for attention; ``provide_kernel(name, "module:attribute",
#: distribution)`` registers a package's kernel where its entry point is not installed.
register_kernel = CROSS_ENTROPY_KERNELS.register
provide_kernel = CROSS_ENTROPY_KERNELS.provide
unregister_kernel = CROSS_ENTROPY_KERNELS.unregister
reload_kernels = CROSS_ENTROPY_KERNELS.reload
get_kernel = CROSS_ENTROPY_KERNELS.get
kernels = CROSS_ENTROPY_KERNELS.kernels
refused_kernels = CROSS_ENTROPY_KERNELS.refused


def default_order(platform: str) -> list[CrossEntropyKernel]:
    """Cross-entropy kernels tried for ``platform`` when nothing is named: by priority,
    ``logits`` last. Kernels with priority 0 or below are opt-in: only used when named."""
    return _RESOLVER.default_order(platform)


def resolve(spec: CrossEntropySpec, implementation: str | None = None) -> Resolution:
    """Pick the cross-entropy kernel for ``spec`` and record it (kind ``"cross_entropy"``) in
    the open ``zoo_attention.recording()`` blocks.

    Args:
        spec: the validated call.
        implementation: a kernel name, or ``None`` for ``ZOO_CROSS_ENTROPY`` (a comma list:
            the first that can serve; each one passed over is logged once with its reason),
            else the platform's default order.

    Raises:
        ValueError: ``implementation`` names no installed kernel, or ``ZOO_CROSS_ENTROPY``
            names none at all.
        KernelUnavailableError: the named kernel (or every ``ZOO_CROSS_ENTROPY`` entry) cannot
            serve ``spec``; the message carries each kernel's reason.
    """
    return _RESOLVER.resolve(spec, implementation)
