"""The device mesh: data parallel, fully sharded data parallel, expert parallel, context
parallel and tensor parallel axes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh

# The mesh's configuration is a setting, declared without JAX; re-exported here where it has
# always been importable from.
from ..settings import AXES as AXES
from ..settings import MeshConfig as MeshConfig
from ..settings import shown_axes


def make_mesh(config: MeshConfig | None = None, devices: Sequence[Any] | None = None) -> Mesh:
    """A mesh with axes ``data``, ``fsdp``, ``expert``, ``context``, ``tensor`` over ``devices``
    (default: all devices).

    The axes are ``Auto`` (XLA's partitioner places what the shardings leave open).
    """
    config = MeshConfig() if config is None else config
    devices = list(jax.devices() if devices is None else devices)
    shape = tuple(config.resolve(len(devices)).values())
    types = (AxisType.Auto,) * len(AXES)
    try:
        return jax.make_mesh(shape, AXES, axis_types=types, devices=devices)
    except (ValueError, NotImplementedError, AssertionError):
        pass
    try:  # some TPU topologies (v5p 4x4x4) need an axis split across physical axes
        grid = mesh_utils.create_device_mesh(shape, devices, allow_split_physical_axes=True)
    except AssertionError:
        # One device per TensorCore, not per chip (v4 without megacore, as libtpu's
        # compile-only v4 topologies list them): JAX knows no physical layout for that, so
        # the devices in id order, neighbouring cores of a chip next to each other.
        grid = np.asarray(sorted(devices, key=lambda d: d.id)).reshape(shape)
    return Mesh(np.asarray(grid), AXES, axis_types=types)


def mesh_sizes(mesh: Mesh) -> dict[str, int]:
    """``{axis: size}`` of ``mesh`` (``expert`` when not 1)."""
    return shown_axes(dict(mesh.shape))


def describe_mesh(mesh: Mesh) -> str:
    """``"data=1 fsdp=8 tensor=1 (8 cpu devices)"`` (``expert=N``, ``context=N`` when not 1)."""
    n = mesh.devices.size
    kind = mesh.devices.flat[0].platform
    axes = " ".join(f"{k}={v}" for k, v in shown_axes(dict(mesh.shape)).items())
    return f"{axes} ({n} {kind} device{'s' if n != 1 else ''})"


def mesh_record(mesh: Mesh) -> dict[str, Any]:
    """A JSON-ready record of ``mesh`` for checkpoints and metrics."""
    first = mesh.devices.flat[0]
    return {
        "axes": {k: int(v) for k, v in shown_axes(dict(mesh.shape)).items()},
        "devices": int(mesh.devices.size),
        "processes": len({d.process_index for d in mesh.devices.flat}),
        "platform": first.platform,
        "device_kind": first.device_kind,
    }


def platform_of(mesh: Mesh) -> str:
    """The platform of the mesh's devices (``"cpu"``, ``"gpu"``, ``"tpu"``)."""
    return mesh.devices.flat[0].platform
