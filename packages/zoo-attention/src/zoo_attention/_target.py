"""The target of a call: the platform and device kind the attention will be compiled for.

A train step can be compiled for a TPU from a CPU host (libtpu's compile-only devices), so the
default backend is not the target. The active mesh (``jax.set_mesh``, or inside ``shard_map``)
says what the target is; failing that, the mesh of the inputs' shardings; the default backend
only when neither says anything.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Literal

import jax

Source = Literal["mesh", "inputs", "default"]


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a call will run.

    Attributes:
        platform: ``"cpu"``, ``"gpu"`` or ``"tpu"``.
        device_kind: as ``jax.Device.device_kind`` (``"TPU v5 lite"``, ``"cpu"``…), or ``None``
            when unknown.
        source: ``"mesh"`` (the active mesh), ``"inputs"`` (the mesh of an input's sharding) or
            ``"default"`` (JAX's default backend).
    """

    platform: str
    device_kind: str | None
    source: Source


def active_mesh() -> Any | None:
    """The abstract mesh of the current context (``jax.set_mesh`` or ``shard_map``), or ``None``."""
    mesh = jax.sharding.get_abstract_mesh()
    return None if mesh.empty else mesh


def input_mesh(*arrays: Any) -> Any | None:
    """The (abstract) mesh of the first input whose sharding names one, or ``None``."""
    for x in arrays:
        try:
            sharding = getattr(jax.typeof(x), "sharding", None)
        except TypeError:  # not a JAX type (a Python scalar, say)
            continue
        mesh = getattr(sharding, "mesh", None)
        if mesh is not None and not mesh.empty:
            return mesh
    return None


def _from_mesh(mesh: Any, source: Source) -> Target | None:
    device = getattr(mesh, "abstract_device", None)
    if device is None or device.platform is None:
        return None
    return Target(device.platform, device.device_kind, source)


def find_target(*arrays: Any) -> Target:
    """The target of a call on ``arrays``: the active mesh, else the inputs' mesh, else the default
    backend (and its first device's kind)."""
    mesh = active_mesh()
    if mesh is not None and (found := _from_mesh(mesh, "mesh")) is not None:
        return found
    mesh = input_mesh(*arrays)
    if mesh is not None and (found := _from_mesh(mesh, "inputs")) is not None:
        return found
    return Target(jax.default_backend(), jax.devices()[0].device_kind, "default")


def platform_and_kind(
    platform: str | None, device_kind: str | None, *arrays: Any
) -> tuple[str, str | None]:
    """``(platform, device_kind)`` as given, or, when ``platform`` is ``None``, those of the
    target of a call on ``arrays`` (:func:`find_target`; a given ``device_kind`` is kept)."""
    if platform is not None:
        return platform, device_kind
    target = find_target(*arrays)
    return target.platform, device_kind or target.device_kind
