"""How much memory a benchmark subprocess may use on this machine."""

from __future__ import annotations

MAX_CAP_BYTES = 20 * 2**30
QUICK_CAP_BYTES = 4 * 2**30
_RESERVE_BYTES = 2 * 2**30  # left for everything else running on the machine


def available_bytes() -> int | None:
    """``MemAvailable`` from ``/proc/meminfo``, or ``None`` where it cannot be read."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def memory_cap(quick: bool) -> int:
    """20 GiB (4 GiB in quick runs), lowered to what is available now minus a 2 GiB reserve."""
    cap = QUICK_CAP_BYTES if quick else MAX_CAP_BYTES
    avail = available_bytes()
    if avail is not None:
        cap = min(cap, max(avail - _RESERVE_BYTES, 2**30))
    return cap
