"""The progress bar: step, loss, tokens/s and ETA (tqdm, on stderr)."""

from __future__ import annotations

import sys

from tqdm.auto import tqdm


class Progress:
    """A tqdm bar from ``start`` to ``total`` steps; a no-op when ``enabled`` is false.

    ``quiet`` also drops the lines of :meth:`write` (the processes of a multi-process run other
    than process 0).
    """

    def __init__(
        self, total: int, start: int, *, enabled: bool = True, quiet: bool = False
    ) -> None:
        self._quiet = quiet
        self._bar = (
            tqdm(total=total, initial=start, unit="step", dynamic_ncols=True, file=sys.stderr)
            if enabled and not quiet
            else None
        )

    def update(self, n: int = 1, **postfix: float | str) -> None:
        if self._bar is None:
            return
        if postfix:
            shown = {k: (f"{v:.4g}" if isinstance(v, float) else v) for k, v in postfix.items()}
            self._bar.set_postfix(shown, refresh=False)
        self._bar.update(n)

    def write(self, message: str) -> None:
        """Print a line without breaking the bar."""
        if self._quiet:
            return
        if self._bar is None:
            print(message, file=sys.stderr)
        else:
            self._bar.write(message, file=sys.stderr)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
