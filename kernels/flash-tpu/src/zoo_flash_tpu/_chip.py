"""What JAX itself knows about a TPU chip, by device kind (``"TPU v5 lite"``).

Pallas keeps a table of TPU hardware facts (``pltpu.get_tpu_info_for_chip``); the block-size
policy takes VMEM sizes from it where JAX knows the chip, so a new generation JAX supports
gets its real VMEM size, not a guess. Which chip a device kind names is read from the same
module; if that helper moves in a later jax, everything here answers ``None`` and the policy
keeps its own figures.
"""

from __future__ import annotations

import functools

from jax.experimental.pallas import tpu as pltpu


@functools.cache
def chip_vmem_bytes(device_kind: str) -> int | None:
    """VMEM per TensorCore of the chip ``device_kind`` names, from JAX; ``None`` if unknown."""
    try:
        from jax._src.pallas.mosaic.tpu_info import chip_version_from_device_kind

        chip = chip_version_from_device_kind(device_kind)
        if chip is None:
            return None
        return int(pltpu.get_tpu_info_for_chip(chip, 1).vmem_capacity_bytes)
    except (ImportError, AttributeError, ValueError):
        return None
