"""Orbax's noise, silenced in this one place: what it prints is said by zoo in one sentence.

Two things are filtered, each exactly and no more:

- the absl warning Orbax logs on every save without metrics when a ``best_fn`` is set (most
  saves are not evaluated);
- the ``RuntimeError("Event loop is closed")`` that Python reports as *unraisable* after a
  failed read. Orbax runs each restore on an event loop of its own and closes it when a read
  fails; TensorStore reads still in flight then complete onto the closed loop, dozens of
  tracebacks after zoo's one-line report. Nothing is lost (the step is reported and skipped).
  Python offers only the process-wide ``sys.unraisablehook`` for these; the filter passes every
  other report on to the hook it wraps, and is put in front of whatever hook is current each
  time a checkpoint directory is opened (once: a hook already filtered is left as it is).
"""

from __future__ import annotations

import logging
import sys
from typing import Any


class _QuietUnevaluatedSaves(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "did not provide metrics" not in record.getMessage()


_FILTER = _QuietUnevaluatedSaves()


def quiet_orbax() -> None:
    """Install both filters (each at most once)."""
    absl = logging.getLogger("absl")
    if _FILTER not in absl.filters:
        absl.addFilter(_FILTER)
    previous = sys.unraisablehook
    if getattr(previous, "_zoo_closed_loop_filter", False):
        return

    def hook(unraisable: Any) -> None:
        error = unraisable.exc_value
        closed = isinstance(error, RuntimeError) and str(error) == "Event loop is closed"
        if not (closed and unraisable.object is None):
            previous(unraisable)

    hook._zoo_closed_loop_filter = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
