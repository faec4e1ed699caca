"""How much memory this process may use, and refusing a model that cannot fit in it.

Physical memory is only one limit: a container's cgroup (``memory.max`` in cgroup v2,
``memory.limit_in_bytes`` in v1, on this cgroup and every ancestor) and ``ulimit -v``
(``RLIMIT_AS``) may allow less. Under a cgroup limit an allocation past it is killed by the
kernel with no message; under ``RLIMIT_AS`` it fails. Either way the smallest limit is the one
to check against, before allocating.
"""

from __future__ import annotations

import contextlib
import os
import pathlib
import resource

from ._config import ModelConfig

__all__ = [
    "DoesNotFitError",
    "check_fits_host",
    "host_memory_bytes",
    "host_memory_free",
    "host_memory_limit",
    "human_bytes",
]

# Values at or above this are "no limit" (cgroup v1 writes a page-rounded 2**63 - 1).
_UNLIMITED = 1 << 60


class DoesNotFitError(ValueError):
    """A model, or what a computation on it needs, exceeds the memory there is; the message
    names both sizes and what to lower."""


def _read_limit(file: pathlib.Path) -> int | None:
    try:
        text = file.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None
    if not text.isdigit():  # "max" in cgroup v2
        return None
    value = int(text)
    return value if value < _UNLIMITED else None


def cgroup_memory_limit(
    proc_cgroup: str | os.PathLike[str] = "/proc/self/cgroup",
    root: str | os.PathLike[str] = "/sys/fs/cgroup",
) -> int | None:
    """The smallest memory limit of this process's cgroup and its ancestors, v2 or v1
    (``None``: none, or no cgroup filesystem). ``proc_cgroup`` and ``root`` are where the
    system keeps them (tests point them elsewhere)."""
    try:
        lines = pathlib.Path(proc_cgroup).read_text().splitlines()
    except OSError:
        return None
    root = pathlib.Path(root)
    candidates: list[tuple[pathlib.Path, str]] = []
    for line in lines:
        _, controllers, path = [*line.split(":", 2), "", ""][:3]
        relative = path.strip().lstrip("/")
        if controllers == "":  # v2: one unified hierarchy
            candidates.append((root / relative, "memory.max"))
            candidates.append((root / "unified" / relative, "memory.max"))
        elif "memory" in controllers.split(","):
            candidates.append((root / "memory" / relative, "memory.limit_in_bytes"))
    limits = []
    for directory, name in candidates:
        # Inside a container the cgroup's own directory is often mounted as the root: walk up
        # from the full path to the root, reading each level that exists.
        for level in (directory, *directory.parents):
            if level != root and root not in level.parents:
                break
            limit = _read_limit(level / name)
            if limit is not None:
                limits.append(limit)
    return min(limits) if limits else None


def host_memory_limit() -> tuple[int | None, str]:
    """``(bytes, name)``: the memory this process may use and what sets it, e.g. ``"this
    host's memory"`` or ``"this process's cgroup memory limit"`` (``bytes`` is ``None`` where
    the system says nothing)."""
    found: list[tuple[int, str]] = []
    with contextlib.suppress(AttributeError, ValueError, OSError):
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        found.append((physical, "this host's memory"))
    cgroup = cgroup_memory_limit()
    if cgroup is not None:
        found.append((cgroup, "this process's cgroup memory limit"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    if soft != resource.RLIM_INFINITY and 0 < soft < _UNLIMITED:
        found.append((soft, "this process's address-space limit set by ulimit -v"))
    if not found:
        return None, "this host's memory"
    return min(found)


def _status_kib(field: str, file: str = "/proc/self/status") -> int | None:
    try:
        for line in pathlib.Path(file).read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def host_memory_free() -> tuple[int | None, str]:
    """``(bytes, name)``: what this process can still allocate on the host, and what limits
    it: the host's available memory, its cgroup's limit less its resident memory, or
    ``ulimit -v`` less its address space (which JAX's reservations alone make large)."""
    found: list[tuple[int, str]] = []
    available = _status_kib("MemAvailable", "/proc/meminfo")
    if available is not None:
        found.append((available, "this host's available memory"))
    resident = _status_kib("VmRSS") or 0
    cgroup = cgroup_memory_limit()
    if cgroup is not None:
        found.append((max(cgroup - resident, 0), "this process's cgroup memory limit"))
    soft, _ = resource.getrlimit(resource.RLIMIT_AS)
    size = _status_kib("VmSize")
    if soft != resource.RLIM_INFINITY and 0 < soft < _UNLIMITED and size is not None:
        found.append((max(soft - size, 0), "this process's address-space limit set by ulimit -v"))
    return min(found) if found else (None, "this host's memory")


def host_memory_bytes() -> int | None:
    """The memory this process may use, in bytes: the smallest of this host's physical memory,
    its cgroup's limit and ``ulimit -v`` (``None`` where the system says nothing)."""
    return host_memory_limit()[0]


def human_bytes(n: float) -> str:
    """``n`` bytes as e.g. ``"1.5 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits_host(config: ModelConfig, *, source: str) -> None:
    """Refuse, before anything is allocated, a model whose parameters alone exceed the memory
    this process may use (loading assembles each parameter on the host).

    Raises:
        DoesNotFitError: with the parameter count, both sizes and what limits the memory.
    """
    from ._model import num_params, param_bytes

    need = param_bytes(config)
    have, what = host_memory_limit()
    if have is not None and need > have:
        raise DoesNotFitError(
            f"{source} describes a model of {num_params(config):,} parameters "
            f"({human_bytes(need)}), more than {what} ({human_bytes(have)}); check "
            "its configuration (e.g. num_hidden_layers) or use a larger machine."
        )
