"""Choosing the kernel for a call: explicit name, the ``ZOO_ATTENTION`` override, or the default order."""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from typing import Literal

from ._kernel import AttentionKernel
from ._registry import get_kernel, kernels
from ._spec import AttentionSpec

ENV_VAR = "ZOO_ATTENTION"
REFERENCE = "xla"

logger = logging.getLogger("zoo_attention")

Source = Literal["argument", "environment", "default"]


class KernelUnavailableError(ValueError):
    """The kernel that was asked for by name cannot serve this call."""


@dataclasses.dataclass(frozen=True)
class Resolution:
    """Which kernel served a call, and why the ones before it did not.

    Attributes:
        kernel: the kernel's name.
        version: the kernel's distribution version.
        source: ``"argument"`` (``implementation=``), ``"environment"`` (``ZOO_ATTENTION``) or
            ``"default"`` (the platform's default order).
        skipped: ``(name, reason)`` for each kernel tried first that could not serve.
        spec: the call it was resolved for.
    """

    kernel: str
    version: str
    source: Source
    skipped: tuple[tuple[str, str], ...]
    spec: AttentionSpec

    @property
    def fallback_reason(self) -> str | None:
        """Why a preferred kernel was passed over, or ``None`` if the first choice served."""
        if not self.skipped:
            return None
        return "; ".join(f"{name}: {reason}" for name, reason in self.skipped)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready summary for metrics and checkpoints."""
        return {
            "kernel": self.kernel,
            "version": self.version,
            "source": self.source,
            "fallback_reason": self.fallback_reason,
        }


_lock = threading.Lock()
_history: dict[tuple[str, str, Source, tuple[tuple[str, str], ...]], Resolution] = {}
_last: Resolution | None = None
_warned: set[str] = set()


def default_order(platform: str) -> list[AttentionKernel]:
    """Kernels tried for ``platform`` when nothing is named: by priority, ``xla`` last.

    Kernels with priority 0 or below are opt-in: only used when named.
    """
    preferred = [
        k
        for k in kernels().values()
        if k.name != REFERENCE and k.priority > 0 and platform in k.platforms
    ]
    preferred.sort(key=lambda k: (-k.priority, k.name))
    return [*preferred, get_kernel(REFERENCE)]


def _env_order() -> list[AttentionKernel | str] | None:
    """The ``ZOO_ATTENTION`` list: kernels, or the names of ones not installed (kept to report)."""
    raw = os.environ.get(ENV_VAR, "").strip()
    if not raw:
        return None
    names = [n.strip() for n in raw.split(",") if n.strip()]
    known = kernels()
    if not any(n in known for n in names):
        raise ValueError(
            f"{ENV_VAR}={raw!r} names no installed kernel; known kernels: {', '.join(sorted(known))}."
        )
    # An entry that is not installed is passed over (and reported), so uninstalling a kernel
    # package leaves a list such as "flash_tpu,xla" working.
    return [known.get(n, n) for n in names]


def _warn_once(message: str) -> None:
    with _lock:
        if message in _warned:
            return
        _warned.add(message)
    logger.warning(message)


def resolve(spec: AttentionSpec, implementation: str | None = None) -> Resolution:
    """Pick the kernel for ``spec``.

    Args:
        spec: the validated call.
        implementation: a kernel name, or ``None`` for ``ZOO_ATTENTION`` or the default order.

    Raises:
        ValueError: ``implementation`` names no installed kernel, or ``ZOO_ATTENTION`` names
            none at all (entries that are not installed are passed over with a warning).
        KernelUnavailableError: the named kernel (or every ``ZOO_ATTENTION`` entry) cannot serve
            ``spec``; the message carries each kernel's reason.
    """
    global _last
    if implementation is not None:
        if not isinstance(implementation, str):
            raise ValueError(
                f"`implementation` must be a kernel name or None, got {implementation!r}."
            )
        kernel = get_kernel(implementation)
        reason = kernel.check(spec)
        if reason is not None:
            raise KernelUnavailableError(
                f"attention kernel {kernel.describe()} cannot serve this call: {reason}"
            )
        resolution = Resolution(kernel.name, kernel.version, "argument", (), spec)
    else:
        env = _env_order()
        order: list[AttentionKernel | str] = (
            env if env is not None else list(default_order(spec.platform))
        )
        source: Source = "environment" if env is not None else "default"
        skipped: list[tuple[str, str]] = []
        chosen = None
        installed = ", ".join(sorted(kernels()))
        for kernel in order:
            if isinstance(kernel, str):
                skipped.append((kernel, f"not installed (installed: {installed})"))
                continue
            reason = kernel.check(spec)
            if reason is None:
                chosen = kernel
                break
            skipped.append((kernel.name, reason))
        if chosen is None:
            detail = "; ".join(f"{n}: {r}" for n, r in skipped)
            raise KernelUnavailableError(
                f"no kernel in {ENV_VAR}={os.environ.get(ENV_VAR)!r} can serve this call ({detail}); "
                f"add {REFERENCE!r} to the list to allow the reference fallback."
            )
        resolution = Resolution(chosen.name, chosen.version, source, tuple(skipped), spec)
        if skipped:
            _warn_once(
                f"zoo_attention: using {chosen.describe()} instead of "
                f"{', '.join(n for n, _ in skipped)} ({resolution.fallback_reason})"
            )
    with _lock:
        key = (resolution.kernel, resolution.version, resolution.source, resolution.skipped)
        _history.setdefault(key, resolution)
        _last = resolution
    return resolution


def last_resolution() -> Resolution | None:
    """The most recent resolution in this process (calls resolve when traced)."""
    return _last


def resolutions() -> list[Resolution]:
    """Every distinct resolution made in this process, in order of first use."""
    with _lock:
        return list(_history.values())


def clear_resolutions() -> None:
    """Forget recorded resolutions and issued warnings (a new run, or a test)."""
    global _last
    with _lock:
        _history.clear()
        _warned.clear()
        _last = None
