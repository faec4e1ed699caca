"""The progress of a run on stderr: a tqdm bar on a terminal; elsewhere (a log file, a pipe) a
plain line at a steady interval, so the file holds no bar frames."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

from tqdm.auto import tqdm

from .._console import PREFIX, is_terminal

#: Seconds between two plain progress lines when stderr is not a terminal.
PLAIN_INTERVAL_S = 30.0


def rows_per_epoch(data: Any) -> int | None:
    """How many rows one pass over ``data`` serves, from the loader's own count
    (``rows_per_epoch``: a number, or one per store of a mixture); ``None`` when it has none."""
    rows = getattr(data, "rows_per_epoch", None)
    if isinstance(rows, list | tuple):
        rows = sum(rows)
    return int(rows) if isinstance(rows, int) and rows > 0 else None


def epochs_text(epochs: float) -> str:
    """``0.42``, ``3.1``, ``280``: two significant digits below 10, whole numbers above."""
    return f"{epochs:,.0f}" if epochs >= 10 else f"{epochs:.2g}"


def _shown(postfix: dict[str, float | str]) -> dict[str, str]:
    return {k: (f"{v:.4g}" if isinstance(v, float) else str(v)) for k, v in postfix.items()}


def _duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``, ``2 h 01 min``."""
    s = round(seconds)
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


class PlainProgress:
    """Progress as whole lines (``zoo: step 120/800 (15%), 12 s, about 1 min 09 s left: loss=…``):
    one when the first metrics come, then at most one per ``interval`` seconds, and the last
    step reached when it closes."""

    def __init__(
        self,
        total: int,
        start: int,
        *,
        interval: float = PLAIN_INTERVAL_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total, self.start, self.n = total, start, start
        self.interval, self._clock = interval, clock
        self._began = clock()
        self._printed_at: float | None = None
        self._printed_step = start
        self._postfix: dict[str, str] = {}

    def update(self, n: int = 1, **postfix: float | str) -> None:
        self.n += n
        if postfix:
            self._postfix = _shown(postfix)
        now = self._clock()
        first = self._printed_at is None and bool(postfix)
        last = self._began if self._printed_at is None else self._printed_at
        due = now - last >= self.interval
        if self.n > self._printed_step and (first or due):
            self._print(now)

    def close(self) -> None:
        """The last step reached, if no line said it yet."""
        if self.n > self._printed_step:
            self._print(self._clock())

    def line(self, now: float) -> str:
        """The line for the current step."""
        elapsed = now - self._began
        done = self.n - self.start
        parts = [f"step {self.n}/{self.total} ({100 * self.n / max(self.total, 1):.0f}%)"]
        parts.append(_duration(elapsed))
        if done > 0 and self.n < self.total:
            parts.append(f"about {_duration(elapsed / done * (self.total - self.n))} left")
        line = PREFIX + ", ".join(parts)
        if self._postfix:
            line += ": " + " ".join(f"{k}={v}" for k, v in self._postfix.items())
        return line

    def _print(self, now: float) -> None:
        print(self.line(now), file=sys.stderr, flush=True)
        self._printed_at, self._printed_step = now, self.n


class Progress:
    """Progress from ``start`` to ``total`` steps; a no-op when ``enabled`` is false.

    On a terminal a tqdm bar, which appears with the first step, so the lines written before it
    (how the run starts, the first evaluation) are plain lines, not interleaved with an empty
    bar; elsewhere :class:`PlainProgress` (``terminal`` overrides the check of stderr).
    ``quiet`` also drops the lines of :meth:`write` (the processes of a multi-process run other
    than process 0).
    """

    def __init__(
        self,
        total: int,
        start: int,
        *,
        enabled: bool = True,
        quiet: bool = False,
        terminal: bool | None = None,
    ) -> None:
        self._quiet = quiet
        self._enabled = enabled and not quiet
        self._total, self._start = total, start
        self._terminal = is_terminal() if terminal is None else terminal
        self._bar: Any = None

    def update(self, n: int = 1, **postfix: float | str) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            self._bar = (
                tqdm(
                    total=self._total,
                    initial=self._start,
                    unit="step",
                    dynamic_ncols=True,
                    file=sys.stderr,
                )
                if self._terminal
                else PlainProgress(self._total, self._start)
            )
        if isinstance(self._bar, PlainProgress):
            self._bar.update(n, **postfix)
            return
        if postfix:
            self._bar.set_postfix(_shown(postfix), refresh=False)
        self._bar.update(n)

    def write(self, message: str) -> None:
        """Print a line without breaking the bar."""
        if self._quiet:
            return
        if self._bar is None or isinstance(self._bar, PlainProgress):
            print(message, file=sys.stderr, flush=True)
        else:
            self._bar.write(message, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
