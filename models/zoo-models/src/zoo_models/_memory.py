"""How much memory this host has, and refusing a model that cannot fit in it."""

from __future__ import annotations

import os

from ._config import ModelConfig

__all__ = ["check_fits_host", "host_memory_bytes", "human_bytes"]


def host_memory_bytes() -> int | None:
    """This host's physical memory in bytes (``None`` where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


def human_bytes(n: float) -> str:
    """``n`` bytes as e.g. ``"1.5 GiB"``."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    raise AssertionError("unreachable")


def check_fits_host(config: ModelConfig, *, source: str) -> None:
    """Refuse, before anything is allocated, a model whose parameters alone exceed this host's
    memory (loading assembles each parameter on the host).

    Raises:
        ValueError: with the parameter count and both sizes.
    """
    from ._model import num_params, param_bytes

    need, have = param_bytes(config), host_memory_bytes()
    if have is not None and need > have:
        raise ValueError(
            f"{source} describes a model of {num_params(config):,} parameters "
            f"({human_bytes(need)}), more than this host's {human_bytes(have)} of memory; check "
            "its configuration (e.g. num_hidden_layers) or use a larger machine."
        )
