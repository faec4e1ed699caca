"""Global batches from per-process rows: each process reads only the rows its devices hold.

A batch of ``rows`` rows is split over the mesh axes of the ``batch`` rule. The rows this
process's devices hold are one range of the global batch (:attr:`BatchLayout.local`); the
process reads just those and the global ``jax.Array`` is assembled from every process's part,
never gathered on one host. On one process the range is the whole batch.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, cast

import equinox as eqx
import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding

from ._packed_batch import PackedBatch
from ._rules import MeshAxes
from ._shardings import batch_array_spec, batch_spec, fit_sharding

Batch = dict[str, np.ndarray]


class BatchLayout:
    """The layout of a global batch of ``rows`` rows on ``mesh`` under ``rules``.

    Attributes:
        rows: rows of the global batch.
        local: ``(start, stop)``: the rows this process's devices hold.
    """

    def __init__(self, mesh: Mesh, rules: Mapping[str, MeshAxes], rows: int) -> None:
        self.mesh = mesh
        self.rules = rules
        self.rows = rows
        self._sharding = NamedSharding(mesh, batch_spec(mesh, rules))
        # jax types a device's index as optional, but every device of a sharding holds one.
        index = cast(
            Mapping[jax.Device, tuple[slice, ...]],
            fit_sharding(self._sharding, (rows,)).addressable_devices_indices_map((rows,)),
        )
        spans = [
            (s[0].start or 0, rows if s[0].stop is None else s[0].stop) for s in index.values()
        ]
        self.local = (min(a for a, _ in spans), max(b for _, b in spans))
        self._fitted: dict[tuple[int, ...], NamedSharding] = {}

    def place(self, local: Batch) -> dict[str, jax.Array]:
        """Global arrays from this process's rows ``local`` (each ``[stop - start, ...]``)."""
        return {name: self._place_one(name, part) for name, part in local.items()}

    def place_packed(self, local: Batch) -> PackedBatch | dict[str, jax.Array]:
        """Like :meth:`place`, as one :class:`PackedBatch` (one transfer) when the entries allow
        it (:meth:`PackedBatch.layout`), else as :meth:`place` does."""
        packing = PackedBatch.layout(PackedBatch.signature(local))
        if packing is None:
            return self.place(local)
        names, dtypes = packing
        return PackedBatch(self._place_one("batch", PackedBatch.stack(local, names)), names, dtypes)

    def _place_one(self, name: str, part: np.ndarray) -> jax.Array:
        lo, hi = self.local
        if part.shape[0] != hi - lo:
            raise ValueError(
                f"batch entry {name!r} has {part.shape[0]} rows; this process holds rows "
                f"{lo}…{hi - 1} of {self.rows}."
            )
        shape = (self.rows, *part.shape[1:])
        sharding = self._fitted.get(shape)
        if sharding is None:
            spec = batch_array_spec(self.mesh, self.rules, len(shape))
            sharding = self._fitted[shape] = fit_sharding(NamedSharding(self.mesh, spec), shape)

        def shard(index: tuple[slice, ...] | None) -> np.ndarray:
            assert index is not None  # jax gives every device its index (and asserts so)
            rows = index[0]
            start = (rows.start or 0) - lo
            stop = (self.rows if rows.stop is None else rows.stop) - lo
            return part[(slice(start, stop), *index[1:])]

        return jax.make_array_from_callback(shape, sharding, shard)

    def local_part(self, batch: Batch) -> Batch:
        """This process's rows of a whole batch (for sources that can only give whole ones)."""
        lo, hi = self.local
        return {name: array[lo:hi] for name, array in batch.items()}


def _takes_rows(next_batch: Any) -> bool:
    try:
        return "rows" in inspect.signature(next_batch).parameters
    except (TypeError, ValueError):
        return False


def batch_reader(
    data: Any, layout: BatchLayout, check: Callable[[Batch], None] | None = None
) -> Callable[[], PackedBatch | dict[str, jax.Array]]:
    """A function giving the next ``layout.rows`` rows of ``data`` on the devices each call, as
    a :class:`PackedBatch` where the entries allow (the train and eval steps take either).

    A source whose ``next_batch`` takes ``rows=(start, stop)`` is asked for this process's rows
    only; another gives whole batches, cut here. Which one is decided once, not every step.
    ``check`` sees each host batch (this process's rows) before it goes to the devices, and
    may raise.
    """
    if _takes_rows(data.next_batch):
        read = lambda: data.next_batch(layout.rows, rows=layout.local)
    else:
        read = lambda: layout.local_part(data.next_batch(layout.rows))
    if check is None:
        return lambda: layout.place_packed(read())

    def checked() -> PackedBatch | dict[str, jax.Array]:
        host = read()
        check(host)
        return layout.place_packed(host)

    return checked


def to_host(tree: Any) -> Any:
    """Every array of ``tree`` as a host numpy array of its global value, on every process.

    In a multi-process run an array's shards live on several hosts: fetching it is a collective
    that every process must join (``process_allgather``), even when only process 0 writes.
    """
    if jax.process_count() == 1:
        return jax.tree.map(lambda x: np.asarray(x) if eqx.is_array(x) else x, tree)

    arrays, static = eqx.partition(tree, eqx.is_array)
    return eqx.combine(multihost_utils.process_allgather(arrays, tiled=True), static)
