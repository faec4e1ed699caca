"""What produced a run: package versions, platform and the resolved kernels (attention and
grouped matmul)."""

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
    "zoo-megablox",
    "zoo-deltanet-tpu",
    "zoo-tokamax",
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


def kernels_line(kernels: Mapping[str, Sequence[Mapping[str, Any]]]) -> str:
    """The attention kernels' label, and the grouped-matmul, cross-entropy and linear-attention
    kernels' where there are any: ``"flash_tpu 0.3.3; grouped matmul: megablox 0.1.0; cross
    entropy: fused_xla 1.3.0"``."""
    line = kernel_label(kernels.get("attention") or [])
    for key, what in (
        ("grouped_matmul", "grouped matmul"),
        ("cross_entropy", "cross entropy"),
        ("linear_attention", "linear attention"),
    ):
        rows = kernels.get(key) or []
        if rows:
            line += f"; {what}: {kernel_label(rows)}"
    return line


def provenance(
    attention: Sequence[dict[str, Any]] = (),
    grouped_matmul: Sequence[dict[str, Any]] = (),
    cross_entropy: Sequence[dict[str, Any]] = (),
    linear_attention: Sequence[dict[str, Any]] = (),
) -> dict[str, Any]:
    """A JSON-ready record of the software and hardware of this process.

    Keys: ``packages`` (installed zoo distributions → version), ``libraries`` (jax, jaxlib,
    libtpu where installed, equinox, optax, orbax-checkpoint, numpy), ``jax`` (version), ``python``, ``backend``,
    ``devices`` (device kinds), ``attention``, ``grouped_matmul``, ``cross_entropy`` and, for
    a model with gated DeltaNet layers, ``linear_attention``: the run's resolved attention,
    grouped-matmul, fused cross-entropy and linear-attention kernels as given
    (``Resolution.as_dict()`` of each, from ``zoo_attention.recording()``).
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
        "grouped_matmul": list(grouped_matmul),
        "cross_entropy": list(cross_entropy),
        **({"linear_attention": list(linear_attention)} if linear_attention else {}),
    }
