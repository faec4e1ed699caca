"""Step metrics kept on the device and read only when a record is due, a few steps late.

The train step returns its metrics as device arrays. Reading them at once would stop the host
until the device finishes that step, leaving the device idle while the host prepares the next
one. :class:`StepMetrics` keeps them on the device. After each step it only waits, with no
transfer, until the step ``lag`` back has finished (which keeps the host from running
arbitrarily far ahead and drives the progress bar). Values cross to the host only when a due
step (a train record) is ``lag`` steps old: then every unread step up to it is read. An
evaluation, a checkpoint or the end first reads all of them (:meth:`StepMetrics.drain`), so
nothing is decided or saved on unread metrics.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

# How many steps a step's metrics are read after it: a non-finite step is seen at most this late.
METRICS_LAG = 2
_FLAGS = ("finite", "update_finite")


@functools.partial(jax.tree_util.register_dataclass, data_fields=["values"], meta_fields=["names"])
@dataclasses.dataclass(frozen=True)
class PackedMetrics:
    """A step's metrics as one float32 vector: reading them is one transfer, not one per metric
    (each costs tens of microseconds, a few percent of a small step). A plain dataclass pytree:
    an Equinox module wraps every method it hands out, 25 µs a call, paid each step.

    Attributes:
        values: ``[len(names)]`` float32.
        names: the metric names, in the order of ``values``.
    """

    values: jax.Array
    names: tuple[str, ...]

    @classmethod
    def pack(cls, metrics: dict[str, jax.Array]) -> PackedMetrics:
        names = tuple(sorted(metrics))
        return cls(jnp.stack([jnp.asarray(metrics[n], jnp.float32) for n in names]), names)

    def unpack(self) -> dict[str, Any]:
        """Plain floats (``finite``, ``update_finite`` as bools), on the host."""
        host = np.asarray(self.values).tolist()  # one copy; device_get costs 10× more host time
        return {n: (bool(v) if n in _FLAGS else v) for n, v in zip(self.names, host, strict=True)}


class Window:
    """Means of the step metrics and the throughput since the last train record; the loss's
    summed weight is recorded under its ``unit`` (``tokens``, or ``pairs``)."""

    def __init__(self, tokens_per_step: int, unit: str = "tokens") -> None:
        self.tokens_per_step = tokens_per_step
        self.unit = unit
        self.t_run = time.perf_counter()
        self.values: dict[str, list[float]] = {}
        self.start_clock(self.t_run)

    def start_clock(self, t: float) -> None:
        """Time from ``t`` (the first step's end: its time is compilation, not training)."""
        self.steps = 0
        self.t0 = self.t_last = t

    def tick(self, t: float) -> None:
        """One more step finished, seen at ``t``."""
        self.steps += 1
        self.t_last = t

    def pause(self, seconds: float) -> None:
        """Leave ``seconds`` (an evaluation) out of the training time."""
        self.t0 += seconds

    def add(self, m: dict[str, float]) -> None:
        if m["finite"]:
            for k, v in m.items():
                if k not in ("finite", "update_finite"):
                    self.values.setdefault(k, []).append(float(v))

    def record(self, step: int, *, lr: float) -> dict[str, Any]:
        rec: dict[str, Any] = {"step": step}
        for k, vs in self.values.items():
            rec[k] = float(np.sum(vs)) if k == "weight" else float(np.mean(vs))
        rec[self.unit] = rec.pop("weight", 0.0)
        rec["lr"] = lr
        elapsed = self.t_last - self.t0
        rec["tokens_per_s"] = (
            self.tokens_per_step * self.steps / elapsed if self.steps and elapsed > 0 else None
        )
        rec["elapsed_s"] = time.perf_counter() - self.t_run
        self.values = {}
        self.start_clock(self.t_last)
        return rec


class StepMetrics:
    """Reads step metrics late and hands each one, in step order, to ``on_step(step, metrics)``
    as plain floats (``finite`` as a bool).

    Args:
        on_step: called for every step when its values are read.
        on_ready: called as ``on_ready(step, seconds)`` when a step is seen finished
            (``time.perf_counter()`` then), every step, ``lag`` steps after it was pushed.
        due: whether a step's values are wanted now (a record); default every step.
        lag: how many steps behind the newest one a step is waited for.
    """

    def __init__(
        self,
        on_step: Callable[[int, dict[str, Any]], None],
        *,
        on_ready: Callable[[int, float], None] | None = None,
        due: Callable[[int], bool] = lambda step: True,
        lag: int = METRICS_LAG,
    ) -> None:
        self.on_step, self.on_ready, self.due, self.lag = on_step, on_ready, due, lag
        self._running: collections.deque[tuple[int, PackedMetrics]] = collections.deque()
        self._unread: list[tuple[int, PackedMetrics]] = []

    def push(self, step: int, metrics: PackedMetrics) -> None:
        """Keep step ``step``'s metrics; wait for the step ``lag`` back (and read if it is due)."""
        self._running.append((step, metrics))
        while len(self._running) > self.lag:
            self._finish_oldest()

    def drain(self) -> None:
        """Read every step's metrics (waits for the last step to finish)."""
        while self._running:
            self._finish_oldest()
        self._read()

    def _finish_oldest(self) -> None:
        step, metrics = self._running.popleft()
        metrics.values.block_until_ready()  # no transfer: only waits for the step
        if self.on_ready is not None:
            self.on_ready(step, time.perf_counter())
        self._unread.append((step, metrics))
        if self.due(step):
            self._read()

    def _read(self) -> None:
        unread, self._unread = self._unread, []
        for step, metrics in unread:
            self.on_step(step, metrics.unpack())
