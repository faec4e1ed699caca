"""MXFP4 tensors (the OCP microscaling 4-bit float format) read as ordinary weights.

gpt-oss checkpoints store each mixture-of-experts weight ``W`` as two tensors: ``W_blocks``
``uint8 [..., R, G, 16]`` (two FP4 E2M1 codes a byte, the low nibble first: 32 values a block)
and ``W_scales`` ``uint8 [..., R, G]`` (one power of two a block, biased by 127). The weight is
``[..., G * 32, R]``: the dequantized rows transposed, as ``transformers`` lays them out for
its experts. :class:`Mxfp4Tensors` presents a checkpoint's tensors with every such pair
replaced by its dequantized weight (bfloat16, which holds every MXFP4 value exactly).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any

import jax.numpy as jnp
import numpy as np

__all__ = ["FP4_VALUES", "Mxfp4Tensors", "dequantize_mxfp4"]

logger = logging.getLogger("zoo_models")

#: The 16 FP4 (E2M1) values, by code.
FP4_VALUES = np.array(
    [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
    np.float32,
)
BLOCKS, SCALES = "_blocks", "_scales"


def dequantize_mxfp4(blocks: np.ndarray, scales: np.ndarray) -> np.ndarray:
    """``blocks`` ``uint8 [..., R, G, 16]`` and ``scales`` ``uint8 [..., R, G]`` → bfloat16
    ``[..., G * 32, R]``."""
    blocks = np.asarray(blocks, np.uint8)
    scales = np.asarray(scales, np.uint8)
    if blocks.shape[:-1] != scales.shape:
        raise ValueError(
            f"MXFP4 blocks {blocks.shape} and scales {scales.shape} do not pair up: the scales "
            "must be the blocks' shape without its last axis."
        )
    codes = np.stack([blocks & 0x0F, blocks >> 4], axis=-1)  # the low nibble is the first value
    values = FP4_VALUES[codes].reshape(*blocks.shape[:-1], 2 * blocks.shape[-1])
    values = np.ldexp(values, scales.astype(np.int32)[..., None] - 127)
    rows = values.reshape(*values.shape[:-2], -1)  # [..., R, G * 32]
    return np.swapaxes(rows, -1, -2).astype(jnp.bfloat16)


class Mxfp4Tensors(Mapping[str, Any]):
    """``tensors`` with every ``NAME_blocks``/``NAME_scales`` pair read as ``NAME`` (bfloat16).

    ``shape(name)`` and ``dtype(name)`` answer without dequantizing, as the checkpoint files
    do from their headers.
    """

    def __init__(self, tensors: Mapping[str, Any], source: str = "the checkpoint") -> None:
        self._base = tensors
        names = set(tensors)
        self._quantized = {
            n[: -len(BLOCKS)]
            for n in names
            if n.endswith(BLOCKS) and n[: -len(BLOCKS)] + SCALES in names
        }
        parts = {q + suffix for q in self._quantized for suffix in (BLOCKS, SCALES)}
        self._names = [n for n in tensors if n not in parts] + sorted(self._quantized)
        if self._quantized:
            logger.warning(
                "note: %s: %d MXFP4 tensor(s) dequantized to bfloat16 on load (e.g. %s)",
                source,
                len(self._quantized),
                min(self._quantized),
            )

    @property
    def quantized(self) -> frozenset[str]:
        """The names read from MXFP4 pairs."""
        return frozenset(self._quantized)

    def _base_shape(self, name: str) -> tuple[int, ...]:
        shape = getattr(self._base, "shape", None)
        if callable(shape):
            return tuple(shape(name))
        return tuple(np.shape(self._base[name]))

    def shape(self, name: str) -> tuple[int, ...]:
        """The shape of ``name`` (a dequantized weight's from its blocks' header)."""
        if name not in self._quantized:
            return self._base_shape(name)
        *lead, rows, groups, width = self._base_shape(name + BLOCKS)
        return (*lead, groups * width * 2, rows)

    def dtype(self, name: str) -> str:
        """The dtype name of ``name`` (``bfloat16`` for a dequantized weight)."""
        if name in self._quantized:
            return "bfloat16"
        dtype = getattr(self._base, "dtype", None)
        if callable(dtype):
            return str(dtype(name))
        return jnp.dtype(np.asarray(self._base[name]).dtype).name

    def __getitem__(self, name: str) -> Any:
        if name in self._quantized:
            return dequantize_mxfp4(self._base[name + BLOCKS], self._base[name + SCALES])
        if name not in self._names:
            raise KeyError(name)
        return self._base[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
