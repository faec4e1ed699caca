"""What was resolved: :class:`Resolution`, the :func:`recording` blocks that collect them, and
the fallback warnings, logged once per block.

One record for every kind of kernel: a block sees the attention, grouped-matmul,
cross-entropy and linear-attention resolutions made inside it, each marked with its kind.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import threading
from collections.abc import Iterator
from typing import Any, Literal

#: The kinds of kernel the contract resolves.
ATTENTION = "attention"
GROUPED_MATMUL = "grouped_matmul"
LINEAR_ATTENTION = "linear_attention"
CROSS_ENTROPY = "cross_entropy"

logger = logging.getLogger("zoo_attention")

Source = Literal["argument", "environment", "default"]


@dataclasses.dataclass(frozen=True)
class Resolution:
    """Which kernel served a call, and why the ones before it did not.

    Attributes:
        kernel: the kernel's name.
        version: the kernel's distribution version.
        source: ``"argument"`` (``implementation=``), ``"environment"`` (``ZOO_ATTENTION``,
            ``ZOO_GROUPED_MATMUL``, ``ZOO_CROSS_ENTROPY`` or ``ZOO_LINEAR_ATTENTION``) or
            ``"default"`` (the platform's default order).
        skipped: ``(name, reason)`` for each kernel tried first that could not serve.
        spec: the call it was resolved for (an ``AttentionSpec``, a ``GroupedMatmulSpec``, a
            ``CrossEntropySpec`` or a ``LinearAttentionSpec``).
        kind: ``"attention"``, ``"grouped_matmul"``, ``"cross_entropy"`` or
            ``"linear_attention"``.
    """

    kernel: str
    version: str
    source: Source
    skipped: tuple[tuple[str, str], ...]
    spec: Any
    kind: str = ATTENTION

    @property
    def fallback_reason(self) -> str | None:
        """Why a preferred kernel was passed over, or ``None`` if the first choice served."""
        if not self.skipped:
            return None
        return "; ".join(f"{name}: {reason}" for name, reason in self.skipped)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready summary for metrics and checkpoints (the kind is the list it goes in)."""
        return {
            "kernel": self.kernel,
            "version": self.version,
            "source": self.source,
            "fallback_reason": self.fallback_reason,
        }


class ResolutionLog:
    """The kernel resolutions made inside one :func:`recording` block.

    Attributes:
        resolutions: every distinct attention resolution (kernel, version, source, kernels
            passed over), in order of first use.
        last: the most recent attention resolution, or ``None`` if none was made.
        grouped_matmul: every distinct grouped-matmul resolution, in order of first use
            (:meth:`of_kind` gives any kind's).
        cross_entropy: every distinct fused linear cross-entropy resolution, in order of
            first use.
        linear_attention: every distinct linear-attention (gated delta rule) resolution, in
            order of first use.
    """

    def __init__(self) -> None:
        self._distinct: dict[tuple[Any, ...], Resolution] = {}
        self._last: dict[str, Resolution] = {}
        # Fallback warnings already logged in this block: each is logged once per block.
        self.warned: set[str] = set()

    def of_kind(self, kind: str) -> list[Resolution]:
        """The distinct resolutions of kernels of ``kind``, in order of first use."""
        return [r for r in self._distinct.values() if r.kind == kind]

    def last_of_kind(self, kind: str) -> Resolution | None:
        """The most recent resolution of a kernel of ``kind``, or ``None``."""
        return self._last.get(kind)

    @property
    def resolutions(self) -> list[Resolution]:
        return self.of_kind(ATTENTION)

    @property
    def last(self) -> Resolution | None:
        return self.last_of_kind(ATTENTION)

    @property
    def grouped_matmul(self) -> list[Resolution]:
        return self.of_kind(GROUPED_MATMUL)

    @property
    def cross_entropy(self) -> list[Resolution]:
        return self.of_kind(CROSS_ENTROPY)

    @property
    def linear_attention(self) -> list[Resolution]:
        return self.of_kind(LINEAR_ATTENTION)

    def __iter__(self) -> Iterator[Resolution]:
        return iter(self.resolutions)

    def __len__(self) -> int:
        return len(self.resolutions)

    def _add(self, resolution: Resolution) -> None:
        r = resolution
        self._distinct.setdefault((r.kind, r.kernel, r.version, r.source, r.skipped), r)
        self._last[r.kind] = r


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

    ``with zoo_attention.recording() as log:`` then ``log.resolutions`` / ``log.last`` (attention)
    and ``log.grouped_matmul`` (grouped matmuls). A nested block gets its own log; what it
    records is also recorded by the blocks around it. The log keeps what was recorded before an
    exception leaves the block. Per thread: a block sees the calls of its own thread (and of
    contexts copied from it, as ``asyncio`` tasks are), not those of other threads. A fallback
    warning is logged once per block (the innermost open one), and once per process outside
    every block; one logged in a block is not logged again in the blocks around it or outside
    them.
    """
    log = ResolutionLog()
    token = _open_logs.set((*_open_logs.get(), log))
    try:
        yield log
    finally:
        _open_logs.reset(token)


def warn_once(message: str) -> None:
    """Log a fallback warning once per block (the innermost open one: a run opens one while it
    resolves its kernels), and once per process outside every block. A message logged in a
    block counts as logged for the blocks around it and outside them: the calls traced after a
    run's block do not repeat it."""
    logs = _open_logs.get()
    warned = logs[-1].warned if logs else _warned
    with _lock:
        if message in warned:
            return
        for seen in (_warned, *(log.warned for log in logs)):
            seen.add(message)
    logger.warning(message)


def record(resolution: Resolution) -> None:
    """Add ``resolution`` to every open block (and the process's deprecated record)."""
    for log in (_process_log, *_open_logs.get()):
        log._add(resolution)


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
