"""What produced a run: package versions, platform and the resolved attention kernels."""

from __future__ import annotations

import platform
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import jax

from ._jax_range import installed_versions

ZOO_DISTRIBUTIONS = (
    "zoo-attention",
    "zoo-flash-tpu",
    "zoo-chunked",
    "zoo-splash",
    "zoo-layers",
    "zoo-data",
    "zoo-models",
    "zoo-train",
)
_THIRD_PARTY = ("jax", "jaxlib", "libtpu", "equinox", "optax", "orbax-checkpoint", "numpy")


def kernel_label(resolutions: Sequence[Mapping[str, Any]]) -> str:
    """``"xla 1.0.0"`` (comma-joined if several kernels served), or ``"none"``."""
    if not resolutions:
        return "none"
    return ", ".join(f"{r['kernel']} {r['version']}" for r in resolutions)


def provenance(attention: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    """A JSON-ready record of the software and hardware of this process.

    Keys: ``packages`` (installed zoo distributions → version), ``libraries`` (jax, jaxlib,
    libtpu where installed, equinox, optax, orbax-checkpoint, numpy), ``jax`` (version), ``python``, ``backend``,
    ``devices`` (device kinds) and ``attention``: ``attention`` as given, the run's resolved
    kernels (``Resolution.as_dict()`` of each, from ``zoo_attention.recording()``).
    """
    return {
        "packages": installed_versions(ZOO_DISTRIBUTIONS),
        "libraries": installed_versions(_THIRD_PARTY),
        "jax": jax.__version__,
        "python": sys.version.split()[0],
        "machine": platform.machine(),
        "backend": jax.default_backend(),
        "devices": sorted({d.device_kind for d in jax.devices()}),
        "attention": list(attention),
    }
