"""Step metrics read a few steps late, so the host never waits for the step it just sent.

The train step returns its metrics as device arrays. Reading them at once would stop the host
until the device finishes that step, leaving the device idle while the host prepares the next
one. :class:`StepMetrics` keeps them on the device and reads each one ``lag`` steps later, when
the steps behind it are already queued; a record, an evaluation or a checkpoint first reads all
of them (:meth:`StepMetrics.drain`), so nothing is decided on unread metrics.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

# How many steps a step's metrics are read after it: a non-finite step is seen at most this late.
METRICS_LAG = 2
_FLAGS = ("finite", "update_finite")


class PackedMetrics(eqx.Module):
    """A step's metrics as one float32 vector: reading them is one transfer, not one per metric
    (each costs tens of microseconds, a few percent of a small step).

    Attributes:
        values: ``[len(names)]`` float32.
        names: the metric names, in the order of ``values``.
    """

    values: jax.Array
    names: tuple[str, ...] = eqx.field(static=True)

    @classmethod
    def pack(cls, metrics: dict[str, jax.Array]) -> PackedMetrics:
        names = tuple(sorted(metrics))
        return cls(jnp.stack([jnp.asarray(metrics[n], jnp.float32) for n in names]), names)

    def unpack(self) -> dict[str, Any]:
        """Plain floats (``finite``, ``update_finite`` as bools), on the host."""
        host = np.asarray(jax.device_get(self.values)).tolist()
        return {n: (bool(v) if n in _FLAGS else v) for n, v in zip(self.names, host, strict=True)}


class Window:
    """Means of the step metrics and the throughput since the last train record."""

    def __init__(self, tokens_per_step: int) -> None:
        self.tokens_per_step = tokens_per_step
        self.t_run = time.perf_counter()
        self.restart()

    def restart(self) -> None:
        self.values: dict[str, list[float]] = {}
        self.restart_clock()

    def restart_clock(self) -> None:
        self.steps = 0
        self.t0 = time.perf_counter()

    def pause(self, seconds: float) -> None:
        self.t0 += seconds

    def add(self, m: dict[str, float], *, timed: bool = True) -> None:
        if m["finite"]:
            for k, v in m.items():
                if k not in ("finite", "update_finite"):
                    self.values.setdefault(k, []).append(float(v))
        self.steps += int(timed)

    def record(self, step: int, *, lr: float) -> dict[str, Any]:
        now = time.perf_counter()
        rec: dict[str, Any] = {"step": step}
        for k, vs in self.values.items():
            rec[k] = float(np.sum(vs)) if k == "weight" else float(np.mean(vs))
        rec["tokens"] = rec.pop("weight", 0.0)
        rec["lr"] = lr
        elapsed = now - self.t0
        rec["tokens_per_s"] = (
            self.tokens_per_step * self.steps / elapsed if self.steps and elapsed > 0 else None
        )
        rec["elapsed_s"] = now - self.t_run
        self.restart()
        return rec


class StepMetrics:
    """Reads step metrics ``lag`` steps late and hands each one, in step order, to
    ``on_step(step, metrics)`` as plain floats (``finite`` as a bool)."""

    def __init__(self, on_step: Callable[[int, dict[str, Any]], None], *, lag: int = METRICS_LAG):
        self.on_step = on_step
        self.lag = lag
        self._pending: collections.deque[tuple[int, Any]] = collections.deque()

    def push(self, step: int, metrics: PackedMetrics | dict[str, jax.Array]) -> None:
        """Keep step ``step``'s metrics; read those now ``lag`` steps old."""
        self._pending.append((step, metrics))
        self._read(keep=self.lag)

    def drain(self) -> None:
        """Read every step's metrics (waits for the last step to finish)."""
        self._read(keep=0)

    def _read(self, keep: int) -> None:
        while len(self._pending) > keep:
            step, metrics = self._pending.popleft()
            if isinstance(metrics, PackedMetrics):
                values = metrics.unpack()
            else:
                values = {k: np.asarray(v).item() for k, v in jax.device_get(metrics).items()}
            self.on_step(step, values)
