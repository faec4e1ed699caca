"""What every kernel of every kind has: a name, a version, a contract and a support check.

Attention kernels and grouped-matmul kernels differ in what they compute (their ``__call__``)
and in the spec their ``check`` reads; the registry and the resolution read only this.
"""

from __future__ import annotations

import abc
from typing import Any, ClassVar


class Kernel(abc.ABC):
    """The part of a kernel the registry and the resolution use.

    Attributes:
        name: the name users pass as ``implementation=`` and in the kind's environment variable.
        version: the version of the distribution that ships the kernel (filled in by the
            registry from the entry point's distribution when the kernel does not set it).
        contract_version: the contract version (``"MAJOR.MINOR"``) the kernel implements.
        priority: place in the default order on its platforms; higher is tried first, and 0 or
            below means opt-in (used only when named).
    """

    name: ClassVar[str]
    contract_version: ClassVar[str]
    priority: ClassVar[int] = 0
    version: str = "0+unknown"

    @property
    def platforms(self) -> tuple[str, ...]:
        """JAX backends this kernel serves by default."""
        return ("cpu", "gpu", "tpu")

    @abc.abstractmethod
    def check(self, spec: Any) -> str | None:
        """Return ``None`` if the kernel can serve ``spec``, else one sentence saying why not.

        Runs before tracing, so it may only look at the spec and the environment.
        ``spec.platform`` and ``spec.device_kind`` are the target's (the active mesh's when
        there is one), not necessarily the host's.
        """

    def describe(self) -> str:
        """``name version`` as shown in logs, scopes and checkpoints."""
        return f"{self.name} {self.version}"
