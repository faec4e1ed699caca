"""A description of the machine and software a benchmark ran on."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import platform
from typing import Any

_PACKAGES = (
    "jax",
    "jaxlib",
    "equinox",
    "optax",
    "orbax-checkpoint",
    "torch",
    "transformers",
    "numpy",
    "zoo-attention",
    "zoo-chunked",
    "zoo-flash-tpu",
    "zoo-layers",
    "zoo-models",
    "zoo-train",
)


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _cpu_flags() -> list[str]:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return sorted(f for f in flags if f.startswith(("avx", "fma", "amx")))
    except OSError:
        pass
    return []


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe_machine() -> dict[str, Any]:
    """CPU model, core count, memory, load, OS, Python and package versions, and the date."""
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _cpu_model(),
        "cpu_flags": _cpu_flags(),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": _memory_gib(),
        "load_average_1_5_15": load,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in _PACKAGES},
    }
