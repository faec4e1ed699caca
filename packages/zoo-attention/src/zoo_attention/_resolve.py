"""Choosing the kernel for a call: explicit name, the environment's override, or the default order.

One :class:`Resolver` per kind of kernel, over that kind's registry: ``ZOO_ATTENTION`` for
attention, ``ZOO_GROUPED_MATMUL`` for grouped matmuls, read the same way.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Generic

from ._kernel import AttentionKernel, contract_reason
from ._record import ATTENTION as ATTENTION_KIND
from ._record import Resolution, Source, record, warn_once
from ._registry import ATTENTION, K, KernelRegistry
from ._spec import AttentionSpec

ENV_VAR = "ZOO_ATTENTION"
REFERENCE = "xla"


class KernelUnavailableError(ValueError):
    """The kernel that was asked for by name cannot serve this call."""


class Resolver(Generic[K]):
    """Resolution for the kernels of one registry.

    Args:
        registry: the kind's kernels; its reference kernel is every default order's last entry.
        env_var: the environment variable that overrides the order (a comma list).
        kind: the kind recorded in each :class:`Resolution` (``"attention"``, ...).
        label: what the fallback warning calls the chosen kernel, before its name (``""`` for
            attention, whose warnings predate the other kinds; ``"grouped matmul "``).
        gate: asked before a kernel's own ``check``: a reason the kernel cannot serve the spec
            whatever it says (a feature newer than the contract it declares), or ``None``.
    """

    def __init__(
        self,
        registry: KernelRegistry[K],
        *,
        env_var: str,
        kind: str,
        label: str = "",
        gate: Callable[[K, Any], str | None] | None = None,
    ) -> None:
        self.registry = registry
        self.env_var = env_var
        self.kind = kind
        self.label = label
        self.gate = gate

    def _check(self, kernel: K, spec: Any) -> str | None:
        reason = None if self.gate is None else self.gate(kernel, spec)
        return reason if reason is not None else kernel.check(spec)

    def default_order(self, platform: str) -> list[K]:
        """Kernels tried for ``platform`` when nothing is named: by priority, the reference
        last. Kernels with priority 0 or below are opt-in: only used when named."""
        reference = self.registry.reference
        preferred = [
            k
            for k in self.registry.kernels().values()
            if k.name != reference and k.priority > 0 and platform in k.platforms
        ]
        preferred.sort(key=lambda k: (-k.priority, k.name))
        return [*preferred, self.registry.get(reference)]

    def env_order(self) -> list[K | str] | None:
        """The environment's list: kernels, or the names of ones not installed (kept to
        report)."""
        raw = os.environ.get(self.env_var, "").strip()
        if not raw:
            return None
        names = [n.strip() for n in raw.split(",") if n.strip()]
        known = self.registry.kernels()
        if not any(n in known for n in names):
            raise ValueError(
                f"{self.env_var}={raw!r} names no installed kernel; known kernels: "
                f"{', '.join(sorted(known))}."
            )
        # An entry that is not installed is passed over (and reported), so uninstalling a
        # kernel package leaves a list such as "flash_tpu,xla" working.
        return [known.get(n, n) for n in names]

    def _named(self, implementation: Any, spec: Any) -> Resolution:
        if not isinstance(implementation, str):
            raise ValueError(
                f"`implementation` must be a kernel name or None, got {implementation!r}."
            )
        kernel = self.registry.get(implementation)
        reason = self._check(kernel, spec)
        if reason is not None:
            raise KernelUnavailableError(
                f"{self.registry.kind} kernel {kernel.describe()} cannot serve this call: {reason}"
            )
        return Resolution(kernel.name, kernel.version, "argument", (), spec, self.kind)

    def _ordered(self, spec: Any) -> Resolution:
        env = self.env_order()
        order: list[K | str] = env if env is not None else list(self.default_order(spec.platform))
        source: Source = "environment" if env is not None else "default"
        skipped: list[tuple[str, str]] = []
        installed = ", ".join(sorted(self.registry.kernels()))
        for candidate in order:
            if isinstance(candidate, str):
                skipped.append((candidate, f"not installed (installed: {installed})"))
                continue
            reason = self._check(candidate, spec)
            if reason is None:
                resolution = Resolution(
                    candidate.name, candidate.version, source, tuple(skipped), spec, self.kind
                )
                if skipped:
                    warn_once(
                        f"zoo_attention: using {self.label}{candidate.describe()} instead of "
                        f"{', '.join(n for n, _ in skipped)} ({resolution.fallback_reason})"
                    )
                return resolution
            skipped.append((candidate.name, reason))
        detail = "; ".join(f"{n}: {r}" for n, r in skipped)
        raise KernelUnavailableError(
            f"no kernel in {self.env_var}={os.environ.get(self.env_var)!r} can serve this call "
            f"({detail}); add {self.registry.reference!r} to the list to allow the reference "
            "fallback."
        )

    def resolve(self, spec: Any, implementation: str | None = None) -> Resolution:
        """Pick the kernel for ``spec`` and record the choice in the open :func:`recording`
        blocks.

        Raises:
            ValueError: ``implementation`` names no installed kernel, or the environment's list
                names none at all (entries that are not installed are passed over with a
                warning).
            KernelUnavailableError: the named kernel (or every entry of the environment's list)
                cannot serve ``spec``; the message carries each kernel's reason.
        """
        if implementation is not None:
            resolution = self._named(implementation, spec)
        else:
            resolution = self._ordered(spec)
        record(resolution)
        return resolution


_ATTENTION: Resolver[AttentionKernel] = Resolver(
    ATTENTION, env_var=ENV_VAR, kind=ATTENTION_KIND, gate=contract_reason
)


def default_order(platform: str) -> list[AttentionKernel]:
    """Attention kernels tried for ``platform`` when nothing is named: by priority, ``xla``
    last. Kernels with priority 0 or below are opt-in: only used when named."""
    return _ATTENTION.default_order(platform)


def resolve(spec: AttentionSpec, implementation: str | None = None) -> Resolution:
    """Pick the attention kernel for ``spec``.

    Args:
        spec: the validated call.
        implementation: a kernel name, or ``None`` for ``ZOO_ATTENTION`` or the default order.

    Raises:
        ValueError: ``implementation`` names no installed kernel, or ``ZOO_ATTENTION`` names
            none at all (entries that are not installed are passed over with a warning).
        KernelUnavailableError: the named kernel (or every ``ZOO_ATTENTION`` entry) cannot serve
            ``spec``; the message carries each kernel's reason.
    """
    return _ATTENTION.resolve(spec, implementation)
