"""The progress bar: step, epoch, loss, tokens/s and ETA (tqdm, on stderr)."""

from __future__ import annotations

import sys
from typing import Any

from tqdm.auto import tqdm


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


class Progress:
    """A tqdm bar from ``start`` to ``total`` steps; a no-op when ``enabled`` is false.

    The bar appears with the first step, so the lines written before it (how the run starts,
    the first evaluation) are plain lines, not interleaved with an empty bar. ``quiet`` also
    drops the lines of :meth:`write` (the processes of a multi-process run other than
    process 0).
    """

    def __init__(
        self, total: int, start: int, *, enabled: bool = True, quiet: bool = False
    ) -> None:
        self._quiet = quiet
        self._enabled = enabled and not quiet
        self._total, self._start = total, start
        self._bar: Any = None

    def update(self, n: int = 1, **postfix: float | str) -> None:
        if not self._enabled:
            return
        if self._bar is None:
            self._bar = tqdm(
                total=self._total,
                initial=self._start,
                unit="step",
                dynamic_ncols=True,
                file=sys.stderr,
            )
        if postfix:
            shown = {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in postfix.items()}
            self._bar.set_postfix(shown, refresh=False)
        self._bar.update(n)

    def write(self, message: str) -> None:
        """Print a line without breaking the bar."""
        if self._quiet:
            return
        if self._bar is None:
            print(message, file=sys.stderr, flush=True)
        else:
            self._bar.write(message, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
