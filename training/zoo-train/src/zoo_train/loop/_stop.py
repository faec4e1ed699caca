"""Preemption, Ctrl-C and hang-ups: SIGTERM, SIGINT or SIGHUP stops a run after the current
step, with a save.

TPU VMs and cluster schedulers send SIGTERM before taking a machine; a closed terminal or a
dropped SSH session sends SIGHUP, after which writing to the terminal fails (so from then on
the output goes nowhere rather than failing the save). The first signal only
raises a flag: the loop finishes the step in flight, saves it and ends with
:class:`~zoo_train.StoppedBySignalError`. Nothing is interrupted halfway (compilation, an evaluation,
a save), which is what made a raw ``KeyboardInterrupt`` crash. A second signal ends the process
at once.

In a run of several processes the signal may reach one of them only, or reach them at different
steps, yet every process must save the same step together. The first process to see a signal
proposes a step a few steps ahead, through JAX's key-value store (the first proposal wins);
every process reads it after each step and stops there.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

import jax

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
STOP_KEY = "zoo/stop"
# How far ahead a proposed stop step lies: no process can have dispatched further, because
# each waits for the metrics of the step two back, which needs every process's part of it.
MARGIN = 4


def _silence_output() -> None:
    """Point stdout and stderr at ``/dev/null``: after a hang-up nobody reads them, and a write
    that fails would end the run before it saves."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        try:
            os.dup2(devnull, stream.fileno())
        except (OSError, ValueError):  # a stream without a file descriptor (a test's capture)
            continue
    os.close(devnull)


class StopRequest:
    """Whether a stop was asked, and at which step the run stops."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._previous: dict[int, Any] = {}
        self._proposed = False

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        if self.signum is not None:  # the second signal: leave now, the default way
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        self.signum = signum
        if jax.process_index() != 0:  # process 0 alone speaks
            return
        try:
            print(
                f"\nzoo: {signal.Signals(signum).name}: stopping after the current step "
                "with a checkpoint (again to stop at once).",
                file=sys.stderr,
                flush=True,
            )
        except OSError:  # the terminal hung up: its writes fail from now on
            _silence_output()

    def install(self) -> bool:
        """Take SIGINT, SIGTERM and SIGHUP (only the main thread can); returns whether it
        did."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for s in SIGNALS:
            self._previous[s] = signal.signal(s, self._handle)
        return True

    def restore(self) -> None:
        for s, handler in self._previous.items():
            signal.signal(s, handler)
        self._previous.clear()

    def stop_step(self, step: int) -> tuple[int, int] | None:
        """After step ``step``: ``(step to stop after, signal)``, or ``None`` to go on."""
        if jax.process_count() == 1:
            return None if self.signum is None else (step, self.signum)
        from ..parallel import key_value_store

        client = key_value_store()
        if self.signum is not None and not self._proposed:
            self._proposed = True
            with contextlib.suppress(Exception):  # another process proposed first
                client.key_value_set(STOP_KEY, f"{step + MARGIN}:{self.signum}")
        try:
            stop, signum = client.key_value_try_get(STOP_KEY).split(":")
        except Exception:  # nobody proposed (the store raises for a missing key)
            return None
        return int(stop), int(signum)


_active: StopRequest | None = None


def pending_signal() -> int | None:
    """The signal a stop was asked with, when this run may stop before its next step rather
    than after it (one process: nothing to agree on); else ``None``. Code that waits between
    steps (a reward function running) polls it to stop at once."""
    request = _active
    if request is None or request.signum is None or jax.process_count() > 1:
        return None
    return request.signum


@contextlib.contextmanager
def stop_requests() -> Iterator[StopRequest]:
    """SIGINT, SIGTERM and SIGHUP handled as stop requests inside the block (nested blocks share
    one)."""
    global _active
    if _active is not None:
        yield _active
        return
    request = StopRequest()
    installed = request.install()
    _active = request
    try:
        yield request
    finally:
        _active = None
        if installed:
            request.restore()
