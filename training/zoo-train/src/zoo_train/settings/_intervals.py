"""The range a numeric setting must lie in, written as an interval: ``"[0, 1)"``, ``"(0, inf)"``.

Every number is checked against its range (and for being finite) when it is read, from a
config file, ``--set`` or a flag, so a bad value is refused before anything is loaded.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
from collections.abc import Callable

_INTERVAL = re.compile(r"\s*([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])\s*")


@dataclasses.dataclass(frozen=True)
class Range:
    """An interval of numbers; ``inf`` bounds are open."""

    low: float
    high: float
    low_closed: bool
    high_closed: bool

    @classmethod
    def parse(cls, text: str) -> Range:
        """``"[1, inf)"`` and the like (square bracket: the bound is included)."""
        m = _INTERVAL.fullmatch(text)
        if m is None:
            raise ValueError(f"not an interval: {text!r}")
        return cls(float(m.group(2)), float(m.group(3)), m.group(1) == "[", m.group(4) == "]")

    def __contains__(self, value: object) -> bool:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False  # None, text and booleans are no numbers, whatever the range
        above = value >= self.low if self.low_closed else value > self.low
        below = value <= self.high if self.high_closed else value < self.high
        return math.isfinite(value) and above and below

    def describe(self) -> str:
        """``"at least 1"``, ``"greater than 0"``, ``"in [0, 1)"``."""

        def show(x: float) -> str:
            return str(int(x)) if x.is_integer() else repr(x)

        if math.isinf(self.high) and math.isinf(self.low):
            return "a finite number"
        if math.isinf(self.high):
            return f"{'at least' if self.low_closed else 'greater than'} {show(self.low)}"
        return (
            f"in {'[' if self.low_closed else '('}{show(self.low)}, {show(self.high)}"
            f"{']' if self.high_closed else ')'}"
        )


def bounded(kind: type, within: str) -> Callable[[str], float]:
    """An argparse ``type=`` that reads ``kind`` (``int`` or ``float``) and refuses values
    outside ``within`` (and NaN or inf), so a bad flag is one line before anything runs."""
    bounds = Range.parse(within)

    def read(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"expected {'an integer' if kind is int else 'a number'}, got {text!r}"
            ) from None
        if value not in bounds:
            raise argparse.ArgumentTypeError(f"must be {bounds.describe()}, got {text}")
        return value

    read.__name__ = kind.__name__  # argparse names the type in its own messages
    return read
