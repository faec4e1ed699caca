"""What a compiled step needs per device, against the HBM it may use."""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from ._topology import parse_bytes

GIB = 2**30


@dataclasses.dataclass(frozen=True)
class StepMemory:
    """Per-device bytes of one compiled step.

    Attributes:
        argument_bytes: inputs (the state and the batch shard).
        output_bytes: outputs (the new state and metrics).
        alias_bytes: outputs that reuse donated input buffers (counted once in the peak).
        temp_bytes: XLA temporaries (activations, gradients, workspace).
        peak_bytes: the most live at once, as XLA's buffer assignment counts it.
        hbm_bytes: HBM one device may use.
        from_error: the figures come from XLA's out-of-memory error (the step did not compile),
            so only the temporaries and the HBM are known.
        generated_code_bytes: the compiled program's own code.
    """

    argument_bytes: int
    output_bytes: int
    alias_bytes: int
    temp_bytes: int
    peak_bytes: int
    hbm_bytes: int
    from_error: bool = False
    generated_code_bytes: int = 0

    @property
    def fits(self) -> bool:
        """Whether the step fits the device's HBM."""
        return not self.from_error and self.peak_bytes <= self.hbm_bytes

    @property
    def spare_bytes(self) -> int:
        """HBM left at the peak (negative: the overflow)."""
        return self.hbm_bytes - self.peak_bytes

    def as_dict(self) -> dict[str, int]:
        """The ``per_device`` block of ``zoo compile --json``."""
        return {
            "argument_bytes": self.argument_bytes,
            "output_bytes": self.output_bytes,
            "alias_bytes": self.alias_bytes,
            "temp_bytes": self.temp_bytes,
            "peak_bytes": self.peak_bytes,
            "hbm_bytes": self.hbm_bytes,
            "generated_code_bytes": self.generated_code_bytes,
        }


def from_compiled(compiled: Any, hbm_bytes: int) -> StepMemory:
    """Figures of a compiled step (``jax.stages.Compiled``)."""
    m = compiled.memory_analysis()
    args, out = int(m.argument_size_in_bytes), int(m.output_size_in_bytes)
    alias, temp = int(m.alias_size_in_bytes), int(m.temp_size_in_bytes)
    peak = int(getattr(m, "peak_memory_in_bytes", 0) or 0) or args + out - alias + temp
    code = int(getattr(m, "generated_code_size_in_bytes", 0) or 0)
    return StepMemory(args, out, alias, temp, peak, hbm_bytes, generated_code_bytes=code)


_TEMPORARIES = re.compile(
    r"memory required for HLO temporaries \(([\d.]+)([KMGT]?)\) exceeds available HBM "
    r"\(([\d.]+)([KMGT]?)\)"
)
_USED = re.compile(r"Used ([\d.]+)([KMGT]?) of ([\d.]+)([KMGT]?) hbm")


def from_oom(error: BaseException, argument_bytes: int) -> StepMemory | None:
    """Figures from XLA's "exceeds available HBM" error, or ``None`` if it is another error.

    What XLA calls "the total memory required for HLO temporaries" is its whole peak, the
    arguments live then included (its own buffer assignment adds up to it): the temporaries are
    that less ``argument_bytes`` (known from the shapes and shardings).
    """
    text = str(error)
    if "RESOURCE_EXHAUSTED" not in text and "Ran out of memory" not in text:
        return None
    found = _TEMPORARIES.search(text)
    if found:
        total = parse_bytes(found.group(1), found.group(2))
        hbm = parse_bytes(found.group(3), found.group(4))
        temp = max(total - argument_bytes, 0)
        return StepMemory(argument_bytes, 0, 0, temp, total, hbm, from_error=True)
    found = _USED.search(text)
    if found:
        used = parse_bytes(found.group(1), found.group(2))
        hbm = parse_bytes(found.group(3), found.group(4))
        return StepMemory(argument_bytes, 0, 0, max(used - argument_bytes, 0), used, hbm, True)
    return None


def gib(n: int) -> str:
    """``"3.45 GiB"``, ``"12.0 MiB"``, ``"448 KiB"``: bytes in the largest unit below them."""
    for unit, size in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:.2f} {unit}" if unit == "GiB" else f"{n / size:.1f} {unit}"
    return f"{n} B"
