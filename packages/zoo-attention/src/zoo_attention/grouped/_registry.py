"""The grouped-matmul kernels: the registry, its entry-point group and its resolution."""

from __future__ import annotations

from .._record import GROUPED_MATMUL, Resolution
from .._registry import KernelRegistry
from .._resolve import Resolver
from ._kernel import GROUPED_MATMUL_CONTRACT_VERSION, GroupedMatmulKernel
from ._spec import GroupedMatmulSpec

ENTRY_POINT_GROUP = "zoo.grouped_matmul_kernels"
ENV_VAR = "ZOO_GROUPED_MATMUL"
REFERENCE = "ragged_dot"

GROUPED: KernelRegistry[GroupedMatmulKernel] = KernelRegistry(
    kind="grouped matmul",
    group=ENTRY_POINT_GROUP,
    base=GroupedMatmulKernel,
    base_name="zoo_attention.grouped.GroupedMatmulKernel",
    contract_version=GROUPED_MATMUL_CONTRACT_VERSION,
    reference=REFERENCE,
    reference_path="zoo_attention.grouped._ragged_dot:KERNEL",
)
_RESOLVER: Resolver[GroupedMatmulKernel] = Resolver(
    GROUPED, env_var=ENV_VAR, kind=GROUPED_MATMUL, label="grouped matmul "
)


#: ``register_kernel(kernel, *, replace=False)``, ``unregister_kernel(name)``,
#: ``reload_kernels()``, ``get_kernel(name)``, ``kernels()`` and ``refused_kernels()``, as
#: ``zoo_attention``'s for attention; ``provide_kernel(name, "module:attribute",
#: distribution)`` registers a package's kernel where its entry point is not installed.
register_kernel = GROUPED.register
provide_kernel = GROUPED.provide
unregister_kernel = GROUPED.unregister
reload_kernels = GROUPED.reload
get_kernel = GROUPED.get
kernels = GROUPED.kernels
refused_kernels = GROUPED.refused


def default_order(platform: str) -> list[GroupedMatmulKernel]:
    """Grouped-matmul kernels tried for ``platform`` when nothing is named: by priority,
    ``ragged_dot`` last. Kernels with priority 0 or below are opt-in: only used when named."""
    return _RESOLVER.default_order(platform)


def resolve(spec: GroupedMatmulSpec, implementation: str | None = None) -> Resolution:
    """Pick the grouped-matmul kernel for ``spec`` and record it (kind ``"grouped_matmul"``) in
    the open ``zoo_attention.recording()`` blocks.

    Args:
        spec: the validated call.
        implementation: a kernel name, or ``None`` for ``ZOO_GROUPED_MATMUL`` (a comma list:
            the first that can serve; each one passed over is logged once with its reason),
            else the platform's default order.

    Raises:
        ValueError: ``implementation`` names no installed kernel, or ``ZOO_GROUPED_MATMUL``
            names none at all.
        KernelUnavailableError: the named kernel (or every ``ZOO_GROUPED_MATMUL`` entry) cannot
            serve ``spec``; the message carries each kernel's reason.
    """
    return _RESOLVER.resolve(spec, implementation)
