"""The machine a benchmark runs on: its description, and how much memory a subprocess may use."""

from __future__ import annotations

import datetime
import importlib.metadata
import os
import pathlib
import platform
from typing import Any

ROOT = pathlib.Path(__file__).resolve().parents[2]
#: The environment with libtpu (``make install``) that compiles for TPU generations.
TPU_PYTHON = ROOT / ".venv-tpu" / "bin" / "python"
MAX_CAP_BYTES = 20 * 2**30
QUICK_CAP_BYTES = 4 * 2**30
_RESERVE_BYTES = 2 * 2**30  # left for everything else running on the machine
_PACKAGES = (
    "jax", "jaxlib", "equinox", "optax", "orbax-checkpoint", "torch", "transformers", "numpy",
    "zoo-attention", "zoo-chunked", "zoo-flash-tpu", "zoo-layers", "zoo-data", "zoo-models",
    "zoo-train",
)  # fmt: skip


def _proc_field(path: str, name: str) -> str | None:
    """The value of the first ``name: value`` line of a ``/proc`` file, if it can be read."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith(name):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _kib(name: str) -> int | None:
    value = _proc_field("/proc/meminfo", name)
    return None if value is None else int(value.split()[0])


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def describe_machine() -> dict[str, Any]:
    """CPU model, core count, memory, load, OS, Python and package versions, and the date."""
    flags = (_proc_field("/proc/cpuinfo", "flags") or "").split()
    total = _kib("MemTotal")
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "cpu": _proc_field("/proc/cpuinfo", "model name") or platform.processor() or "unknown",
        "cpu_flags": sorted({f for f in flags if f.startswith(("avx", "fma", "amx"))}),
        "cores": os.cpu_count(),
        "cores_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "memory_gib": None if total is None else round(total / 2**20, 1),
        "load_average_1_5_15": load,
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "versions": {name: _version(name) for name in _PACKAGES},
    }


def memory_cap(quick: bool) -> int:
    """20 GiB (4 GiB in quick runs), lowered to what is available now minus a 2 GiB reserve."""
    cap = QUICK_CAP_BYTES if quick else MAX_CAP_BYTES
    available = _kib("MemAvailable")
    if available is not None:
        cap = min(cap, max(available * 1024 - _RESERVE_BYTES, 2**30))
    return cap


def tpu_environment_missing() -> str | None:
    """Why a benchmark that compiles for TPU cannot run here, or ``None`` when it can."""
    if TPU_PYTHON.exists():
        return None
    return f"no TPU environment at {TPU_PYTHON} (run `make install`)"
