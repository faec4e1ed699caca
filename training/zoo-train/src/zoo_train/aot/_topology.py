"""TPU topologies from a machine without a TPU: libtpu's compile-only devices and their HBM."""

from __future__ import annotations

import importlib.util
import os
import re
from typing import Any

#: Topologies known to compile here (``get_topology_desc`` accepts others of the same forms).
KNOWN_TOPOLOGIES: tuple[str, ...] = (
    "v4:2x2x1",
    "v4:2x2x2",
    "v5e:2x2",
    "v5e:2x4",
    "v5e:4x4",
    "v5p:2x2x1",
    "v5p:2x2x2",
    "v5p:4x4x4",
    "v6e:2x2",
    "v6e:2x4",
)
_FORM = re.compile(r"^v(4|5e|5p|6e)(:\d+x\d+(x\d+)?)$")

#: HBM one JAX device may use, as XLA reports it ("available HBM") per device kind; used when
#: the probe below cannot read it.
AVAILABLE_HBM_GIB: dict[str, float] = {
    "TPU v4": 15.25,
    "TPU v5 lite": 15.75,
    "TPU v5": 95.74,
    "TPU v6 lite": 31.25,
}

#: The chips' names as Google sells them (libtpu's device kinds call a v5p "TPU v5").
CHIP_NAMES: dict[str, str] = {"v4": "TPU v4", "v5e": "TPU v5e", "v5p": "TPU v5p", "v6e": "TPU v6e"}


def chip_name(topology: str) -> str:
    """The chip of a topology (``"v5p:2x2x1"`` → ``"TPU v5p"``)."""
    generation = topology.split(":")[0]
    return CHIP_NAMES.get(generation, generation)


INSTALL_HINT = (
    "install libtpu with `pip install 'zoo-train[tpu]'` (or run `.venv-tpu/bin/zoo compile …`, "
    "which `make install` sets up)"
)


class LibtpuMissingError(RuntimeError):
    """``zoo compile`` needs libtpu, which is not installed in this environment."""


def _quiet_libtpu() -> None:
    # libtpu looks for TPU workers on start-up; compile-only devices need none, and without
    # these it logs errors (and may wait on a metadata server) on a machine with no TPU.
    os.environ.setdefault("TPU_WORKER_HOSTNAMES", "localhost")
    os.environ.setdefault("TPU_ACCELERATOR_TYPE", "v5litepod-4")
    os.environ.setdefault("TPU_SKIP_MDS_QUERY", "1")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")


def check_libtpu() -> None:
    """Raise :class:`LibtpuMissingError` (saying how to get it) when libtpu is not installed."""
    if importlib.util.find_spec("libtpu") is None:
        raise LibtpuMissingError(f"zoo compile needs libtpu to compile for TPUs; {INSTALL_HINT}.")


def topology_devices(name: str) -> list[Any]:
    """The compile-only devices of TPU topology ``name`` (e.g. ``"v5e:2x2"``).

    Raises:
        LibtpuMissingError: libtpu is not installed.
        ValueError: ``name`` is not a topology libtpu knows (the message lists known ones).
    """
    check_libtpu()
    known = ", ".join(KNOWN_TOPOLOGIES)
    if not _FORM.match(name):
        raise ValueError(
            f"Unknown TPU topology {name!r}; use GENERATION:SHAPE with a generation of v4, v5e, "
            f"v5p or v6e, e.g. one of {known}."
        )
    _quiet_libtpu()
    from jax.experimental import topologies

    try:
        topology = topologies.get_topology_desc(name, platform="tpu")
    except Exception as err:  # libtpu's own message names the shape it refused
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise ValueError(
            f"The TPU topology {name!r} is not one libtpu knows ({first[:160]}); known "
            f"topologies include {known}."
        ) from None
    return list(topology.devices)


_AVAILABLE = re.compile(r"available HBM \(([\d.]+)([KMGT]?)\)")
_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_bytes(number: str, unit: str) -> int:
    """``("15.75", "G")`` → bytes (XLA prints binary units)."""
    return int(float(number) * _UNITS[unit])


_HBM: dict[str, int] = {}


def available_hbm(device: Any) -> int:
    """Bytes of HBM ``device`` (a compile-only TPU device) may use, as XLA itself counts it.

    Read from XLA's own out-of-memory message for a program built not to fit (a fraction of a
    second to compile); the table :data:`AVAILABLE_HBM_GIB` otherwise.
    """
    import jax
    import jax.numpy as jnp
    from jax.sharding import SingleDeviceSharding

    kind = device.device_kind
    if kind in _HBM:
        return _HBM[kind]
    place = SingleDeviceSharding(device)
    huge = jax.ShapeDtypeStruct((1 << 16, 1 << 24), jnp.float32, sharding=place)  # 4 TiB
    try:
        jax.jit(lambda x: jnp.sin(x) + jnp.cos(x) * x).lower(huge).compile()
    except Exception as err:
        found = _AVAILABLE.search(str(err))
        if found:
            _HBM[kind] = parse_bytes(*found.groups())
            return _HBM[kind]
    gib = AVAILABLE_HBM_GIB.get(kind)
    if gib is None:
        raise ValueError(f"no HBM figure for TPU device kind {kind!r}.")
    _HBM[kind] = int(gib * 2**30)
    return _HBM[kind]
