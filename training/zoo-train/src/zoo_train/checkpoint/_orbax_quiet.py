"""Orbax's noise, silenced in this one place: what it prints is said by zoo in one sentence.

Three things are filtered, each exactly and no more:

- the absl warning Orbax logs on every save without metrics when a ``best_fn`` is set (most
  saves are not evaluated);
- the ``RuntimeError("Event loop is closed")`` that Python reports as *unraisable* after a
  failed read. Orbax runs each restore on an event loop of its own and closes it when a read
  fails; TensorStore reads still in flight then complete onto the closed loop, dozens of
  tracebacks after zoo's one-line report. Nothing is lost (the step is reported and skipped).
  Python offers only the process-wide ``sys.unraisablehook`` for these; the filter passes every
  other report on to the hook it wraps, and is put in front of whatever hook is current each
  time a checkpoint directory is opened (once: a hook already filtered is left as it is);
- asyncio's "Task (or Future) exception was never retrieved" for Orbax's parallel writes and
  reads of one save or restore that failed (a full disk, a read-only one, a damaged array): the
  first failure is the save's or restore's error, reported by zoo in one sentence, and its
  siblings' failures, the same error, are logged by asyncio whenever they are collected (so
  sometimes, not always). ``ZOO_DEBUG=1`` keeps these.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from typing import Any

from .._errors import STORAGE_ERRNOS
from ._reports import os_error_number


class _QuietUnevaluatedSaves(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return "did not provide metrics" not in record.getMessage()


class _QuietSiblingWriteFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        unretrieved = message.startswith(("Task exception", "Future exception"))
        if not unretrieved or error is None:
            return True
        # A storage failure of a write, or a TensorStore status ("DATA_LOSS: ...") of a read:
        # the save or restore that failed is reported by zoo in one sentence.
        status = re.match(r"[A-Z][A-Z_]{3,}: ", str(error)) is not None
        return not (os_error_number(error) in STORAGE_ERRNOS or status)


_FILTER = _QuietUnevaluatedSaves()
_SIBLINGS = _QuietSiblingWriteFailures()


def quiet_orbax() -> None:
    """Install the filters (each at most once)."""
    noises = [("absl", _FILTER)] + ([] if os.environ.get("ZOO_DEBUG") else [("asyncio", _SIBLINGS)])
    for name, noise in noises:
        if noise not in logging.getLogger(name).filters:
            logging.getLogger(name).addFilter(noise)
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
