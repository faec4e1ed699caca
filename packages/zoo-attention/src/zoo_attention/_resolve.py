"""Choosing the kernel for a call: explicit name, the ``ZOO_ATTENTION`` override, or the default order."""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import os
import threading
from collections.abc import Iterator
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


class ResolutionLog:
    """The kernel resolutions made inside one :func:`recording` block.

    Attributes:
        resolutions: every distinct resolution (kernel, version, source, kernels passed over),
            in order of first use.
        last: the most recent resolution, or ``None`` if none was made.
    """

    def __init__(self) -> None:
        self._distinct: dict[tuple[str, str, Source, tuple[tuple[str, str], ...]], Resolution] = {}
        self.last: Resolution | None = None
        # Fallback warnings already logged in this block: each is logged once per block.
        self.warned: set[str] = set()

    @property
    def resolutions(self) -> list[Resolution]:
        return list(self._distinct.values())

    def __iter__(self) -> Iterator[Resolution]:
        return iter(self.resolutions)

    def __len__(self) -> int:
        return len(self._distinct)

    def _add(self, resolution: Resolution) -> None:
        key = (resolution.kernel, resolution.version, resolution.source, resolution.skipped)
        self._distinct.setdefault(key, resolution)
        self.last = resolution


# The open recording blocks of this thread (or asyncio task), outermost first. Per thread, as
# JAX's trace state is: tracing runs in the calling thread, so a block sees the calls it traces
# and never another thread's.
_open_logs: contextvars.ContextVar[tuple[ResolutionLog, ...]] = contextvars.ContextVar(
    "zoo_attention_open_logs", default=()
)
_lock = threading.Lock()
# Fallback warnings logged outside every recording block: once per process.
_warned: set[str] = set()
# Every resolution of the process, read only by the names deprecated in 1.2 (``resolutions()``,
# ``last_resolution()``, ``clear_resolutions()``); it goes with them at contract 2.
_process_log = ResolutionLog()


@contextlib.contextmanager
def recording() -> Iterator[ResolutionLog]:
    """Collect the kernel resolutions made inside the block (calls resolve when traced).

    ``with zoo_attention.recording() as log:`` then ``log.resolutions`` / ``log.last``. A nested
    block gets its own log; what it records is also recorded by the blocks around it. The log
    keeps what was recorded before an exception leaves the block. Per thread: a block sees the
    calls of its own thread (and of contexts copied from it, as ``asyncio`` tasks are), not
    those of other threads. A fallback warning is logged once per block (the innermost open
    one), and once per process outside every block; one logged in a block is not logged again
    in the blocks around it or outside them.
    """
    log = ResolutionLog()
    token = _open_logs.set((*_open_logs.get(), log))
    try:
        yield log
    finally:
        _open_logs.reset(token)


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
    # Once per block (the innermost open one: a run opens one while it resolves its kernel),
    # and once per process outside every block. A message logged in a block counts as logged
    # for the blocks around it and outside them: the calls traced after a run's block do not
    # repeat it.
    logs = _open_logs.get()
    warned = logs[-1].warned if logs else _warned
    with _lock:
        if message in warned:
            return
        for seen in (_warned, *(log.warned for log in logs)):
            seen.add(message)
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
        for candidate in order:
            if isinstance(candidate, str):
                skipped.append((candidate, f"not installed (installed: {installed})"))
                continue
            reason = candidate.check(spec)
            if reason is None:
                chosen = candidate
                break
            skipped.append((candidate.name, reason))
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
    for log in (_process_log, *_open_logs.get()):
        log._add(resolution)
    return resolution


def last_resolution() -> Resolution | None:
    """Deprecated (use :func:`recording`): the most recent resolution in this process."""
    return _process_log.last


def resolutions() -> list[Resolution]:
    """Deprecated (use :func:`recording`): every distinct resolution made in this process."""
    return _process_log.resolutions


def clear_resolutions() -> None:
    """Deprecated (use :func:`recording`): forget the process's resolutions and warnings."""
    global _process_log
    with _lock:
        _process_log = ResolutionLog()
        _warned.clear()
