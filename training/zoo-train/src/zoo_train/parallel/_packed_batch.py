"""A batch sent to the devices in one transfer instead of one per entry.

A language-model batch has five ``[B, T]`` entries (ids, targets, positions, segment ids, loss
mask). Placing each is a separate host-to-device transfer of roughly 30 µs of host time, which
is several percent of a step of a few milliseconds, taken from the device's own cores on a CPU
host. :class:`PackedBatch` stacks the entries as one int32 array ``[B, k, T]`` (float32 entries
bit-cast, exactly) that keeps the rows first, so it is sharded like any batch; the step unpacks
it inside its jitted program, where the slices cost nothing.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

_CARRIER = np.dtype(np.int32)


@functools.partial(
    jax.tree_util.register_dataclass, data_fields=["rows"], meta_fields=["names", "dtypes"]
)
@dataclasses.dataclass(frozen=True)
class PackedBatch:
    """The ``[B, T]`` entries of a batch as one int32 array (a pytree with one array leaf; a
    plain dataclass, because an Equinox module's checks would cost more than the transfer
    saved).

    Attributes:
        rows: ``[B, k, T]`` int32; entry ``i`` is ``rows[:, i]``, bit-cast to ``dtypes[i]``.
        names: the entry names, in the order of the middle axis (sorted).
        dtypes: each entry's dtype name.
    """

    rows: Any
    names: tuple[str, ...]
    dtypes: tuple[str, ...]

    @staticmethod
    @functools.cache
    def layout(signature: tuple[tuple[str, np.dtype, tuple[int, ...]], ...]) -> tuple | None:
        """``(names, dtypes)`` for a batch of ``(name, dtype, shape)`` entries, or ``None`` when
        they cannot be packed: not all ``[B, T]`` of one shape with a 4-byte int/float dtype."""
        shapes = {shape for _, _, shape in signature}
        if len(shapes) != 1 or len(next(iter(shapes))) != 2:
            return None
        if not all(d.itemsize == 4 and d.kind in "iuf" for _, d, _ in signature):
            return None
        ordered = sorted(signature, key=lambda e: e[0])
        return tuple(n for n, _, _ in ordered), tuple(d.name for _, d, _ in ordered)

    @staticmethod
    def signature(batch: Mapping[str, Any]) -> tuple[tuple[str, np.dtype, tuple[int, ...]], ...]:
        return tuple((n, np.dtype(v.dtype), tuple(v.shape)) for n, v in batch.items())

    @staticmethod
    def stack(batch: Mapping[str, np.ndarray], names: tuple[str, ...]) -> np.ndarray:
        """The host array ``[B, k, T]`` of ``batch``'s entries ``names``."""
        return np.stack([np.asarray(batch[n]).view(_CARRIER) for n in names], axis=1)

    def unpack(self) -> dict[str, jax.Array]:
        """The entries, each ``[B, T]`` in its own dtype (inside a jitted function: free)."""
        out = {}
        for i, (name, dtype) in enumerate(zip(self.names, self.dtypes, strict=True)):
            part = self.rows[:, i]
            out[name] = (
                part
                if dtype == _CARRIER.name
                else jax.lax.bitcast_convert_type(part, jnp.dtype(dtype))
            )
        return out

    def shapes(self) -> dict[str, jax.ShapeDtypeStruct]:
        """Each entry's global shape and dtype, without touching the data."""
        b, _, t = self.rows.shape
        return {
            n: jax.ShapeDtypeStruct((b, t), jnp.dtype(d))
            for n, d in zip(self.names, self.dtypes, strict=True)
        }


def unpacked(batch: dict[str, jax.Array] | PackedBatch) -> dict[str, jax.Array]:
    """``batch`` as a dict of entries, whether it came packed or not."""
    return batch.unpack() if isinstance(batch, PackedBatch) else batch
