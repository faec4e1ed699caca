"""``MeshConfig``: the sizes of the device mesh's axes, declared as settings (no JAX here, so
the settings and the run config are read without importing it)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from ._fields import setting

#: Mesh axis names, outermost first: ``data`` (replicas), ``fsdp`` (replicas that also shard
#: parameters and optimizer state), ``expert`` (replicas that also split the experts of
#: mixture-of-experts layers), ``context`` (each sequence split across devices: activations
#: and batches along their sequence dimension), ``tensor`` (heads and MLP columns split across
#: devices).
AXES: tuple[str, ...] = ("data", "fsdp", "expert", "context", "tensor")

#: Axes left out of a mesh's description and record when their size is 1.
_QUIET = ("expert", "context")


def shown_axes(sizes: dict[str, int]) -> dict[str, int]:
    """``sizes`` as shown and recorded: an ``expert`` or ``context`` axis of 1 left out."""
    # A run's mesh reads (and compares with runs recorded before the axes existed) as it
    # always did.
    return {k: v for k, v in sizes.items() if k not in _QUIET or v != 1}


@dataclasses.dataclass(frozen=True)
class MeshConfig:
    """``[mesh]``: sizes of the mesh axes; one of them may be ``-1``: every device left over.

    The default, ``fsdp=-1``, puts every device on the fully sharded data-parallel axis.
    """

    data: int = setting(1, "data-parallel mesh axis size (-1: every device left over)")
    fsdp: int = setting(-1, "fully sharded data-parallel axis size (-1: every device left)")
    tensor: int = setting(1, "tensor-parallel axis size (-1: every device left over)")
    expert: int = setting(
        1, "expert-parallel axis size: splits the experts of MoE layers (-1: every device left)"
    )
    context: int = setting(
        1,
        "context-parallel axis size: splits each sequence over devices (-1: every device left)",
        later=True,
    )

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
        """``{"data": …, "fsdp": …, "expert": …, "context": …, "tensor": …}`` as configured
        (``-1`` kept)."""
        return {name: getattr(self, name) for name in AXES}

    def __str__(self) -> str:
        return ",".join(f"{k}={v}" for k, v in shown_axes(self.to_dict()).items())

    @classmethod
    def parse(cls, text: str) -> MeshConfig:
        """``"data=1,fsdp=-1,context=4,tensor=1"`` (axes left out keep their defaults)."""
        values: dict[str, int] = {}
        for part in (p.strip() for p in text.split(",")):
            if not part:
                continue
            name, sep, size = part.partition("=")
            name = name.strip()
            if not sep or name not in AXES:
                raise ValueError(
                    f"mesh {text!r}: expected NAME=SIZE items with NAME in {', '.join(AXES)}, "
                    f"e.g. data=1,fsdp=-1,context=4,tensor=1."
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
