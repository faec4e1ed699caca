"""The device mesh: data parallel, fully sharded data parallel, expert parallel and tensor
parallel axes."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any

import jax
import numpy as np
from jax.experimental import mesh_utils
from jax.sharding import AxisType, Mesh

#: Mesh axis names, outermost first: ``data`` (replicas), ``fsdp`` (replicas that also shard
#: parameters and optimizer state), ``expert`` (replicas that also split the experts of
#: mixture-of-experts layers), ``tensor`` (heads and MLP columns split across devices).
AXES: tuple[str, ...] = ("data", "fsdp", "expert", "tensor")


def _shown(sizes: dict[str, int]) -> dict[str, int]:
    # An expert axis of 1 is left out of what is shown and recorded: a dense run's mesh reads
    # (and compares with runs recorded before the axis existed) as it always did.
    return {k: v for k, v in sizes.items() if k != "expert" or v != 1}


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """Sizes of the mesh axes; one of them may be ``-1``: every device left over.

    The default, ``fsdp=-1``, puts every device on the fully sharded data-parallel axis.
    """

    data: int = 1
    fsdp: int = -1
    tensor: int = 1
    expert: int = 1

    def __post_init__(self) -> None:
        sizes = self.to_dict()
        for name, size in sizes.items():
            if isinstance(size, bool) or not isinstance(size, int) or (size < 1 and size != -1):
                raise ValueError(
                    f"mesh axis {name} must be a positive integer or -1 (all devices left over), "
                    f"got {size!r}."
                )
        if list(sizes.values()).count(-1) > 1:
            raise ValueError(f"at most one mesh axis may be -1, got {self}.")

    def to_dict(self) -> dict[str, int]:
        """``{"data": …, "fsdp": …, "expert": …, "tensor": …}`` as configured (``-1`` kept)."""
        return {name: getattr(self, name) for name in AXES}

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in _shown(self.to_dict()).items())

    @classmethod
    def parse(cls, text: str) -> MeshConfig:
        """``"data=1,fsdp=-1,expert=1,tensor=1"`` (axes left out keep their defaults)."""
        values: dict[str, int] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, size = part.partition("=")
            name = name.strip()
            if not sep or name not in AXES:
                raise ValueError(
                    f"mesh {text!r}: expected NAME=SIZE items with NAME in {', '.join(AXES)}, "
                    f"e.g. data=1,fsdp=-1,expert=1,tensor=1."
                )
            try:
                values[name] = int(size)
            except ValueError:
                raise ValueError(f"mesh {text!r}: the size of {name} must be an integer.") from None
        return cls(**values)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MeshConfig:
        """Inverse of :meth:`to_dict`; unknown axes are an error."""
        unknown = sorted(set(data) - set(AXES))
        if unknown:
            raise ValueError(f"unknown mesh axis {unknown[0]!r}; the axes are {', '.join(AXES)}.")
        return cls(**{k: int(v) for k, v in data.items()})

    def resolve(self, num_devices: int) -> dict[str, int]:
        """Axis sizes for ``num_devices`` devices, ``-1`` filled in.

        Raises:
            ValueError: the sizes do not multiply to ``num_devices``.
        """
        sizes = self.to_dict()
        fixed = math.prod(v for v in sizes.values() if v != -1)
        available = f"{num_devices} device{'s' if num_devices != 1 else ''}"
        if -1 in sizes.values():
            if num_devices % fixed:
                raise ValueError(
                    f"mesh {self} cannot use {available}: the fixed axes take {fixed}, which "
                    f"does not divide {num_devices}."
                )
            sizes = {k: (num_devices // fixed if v == -1 else v) for k, v in sizes.items()}
        elif fixed != num_devices:
            raise ValueError(
                f"mesh {self} needs {fixed} devices but {num_devices} "
                f"{'is' if num_devices == 1 else 'are'} available; make the sizes multiply to "
                "the device count, or set one axis to -1."
            )
        return sizes


def make_mesh(config: MeshConfig | None = None, devices: Sequence[Any] | None = None) -> Mesh:
    """A mesh with axes ``data``, ``fsdp``, ``expert``, ``tensor`` over ``devices`` (default: all
    devices).

    The axes are ``Auto`` (XLA's partitioner places what the shardings leave open).
    """
    config = MeshConfig() if config is None else config
    devices = list(jax.devices() if devices is None else devices)
    shape = tuple(config.resolve(len(devices)).values())
    types = (AxisType.Auto,) * len(AXES)
    try:
        return jax.make_mesh(shape, AXES, axis_types=types, devices=devices)
    except (ValueError, NotImplementedError, AssertionError):
        # Some TPU topologies (v5p 4x4x4) need an axis split across physical axes.

        grid = mesh_utils.create_device_mesh(shape, devices, allow_split_physical_axes=True)
        return Mesh(np.asarray(grid), AXES, axis_types=types)


def mesh_sizes(mesh: Mesh) -> dict[str, int]:
    """``{axis: size}`` of ``mesh`` (``expert`` when not 1)."""
    return _shown(dict(mesh.shape))


def describe_mesh(mesh: Mesh) -> str:
    """``"data=1 fsdp=8 tensor=1 (8 cpu devices)"`` (``expert=N`` when not 1)."""
    n = mesh.devices.size
    kind = mesh.devices.flat[0].platform
    axes = " ".join(f"{k}={v}" for k, v in _shown(dict(mesh.shape)).items())
    return f"{axes} ({n} {kind} device{'s' if n != 1 else ''})"


def mesh_record(mesh: Mesh) -> dict[str, Any]:
    """A JSON-ready record of ``mesh`` for checkpoints and metrics."""
    first = mesh.devices.flat[0]
    return {
        "axes": {k: int(v) for k, v in _shown(dict(mesh.shape)).items()},
        "devices": int(mesh.devices.size),
        "processes": len({d.process_index for d in mesh.devices.flat}),
        "platform": first.platform,
        "device_kind": first.device_kind,
    }


def platform_of(mesh: Mesh) -> str:
    """The platform of the mesh's devices (``"cpu"``, ``"gpu"``, ``"tpu"``)."""
    return mesh.devices.flat[0].platform
