"""A reward function run in a process of its own: what its code does stays there.

A reward function is the user's code, and the run must survive it: a function that mutates
its arguments gets copies (they are pickled over); one that never returns is ended after a
timeout; one that calls ``sys.exit`` or dies ends its process, not the run; one that forks
leaves no process behind (each call's leftovers are ended, and the whole process group when
the function is closed or zoo's process ends, ``kill -9`` included); and none inherits the
run's lock or its other files. A stop signal to zoo (SIGTERM, Ctrl-C) is not held up by a call
in progress: the caller's ``interrupted`` is polled while it waits.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
import weakref
from collections.abc import Callable
from typing import Any

from .._errors import StepInterruptedError
from ._messages import receive, send

#: How often a wait for a reply looks at the clock and the stop request, in seconds.
_POLL = 0.1


class RewardProcessError(RuntimeError):
    """A call of a reward function did not give rewards; ``str()`` is what happened, as a
    phrase after the function's name (``raised SystemExit: 0``, ``did not return within …``)."""


def _end(process: subprocess.Popen, fds: list[int]) -> int | None:
    """End ``process``'s whole group, reap it, close ``fds``; its exit code."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=10)
    while fds:
        with contextlib.suppress(OSError):
            os.close(fds.pop())
    return process.returncode


class RewardProcess:
    """One reward function, imported and called in a process (and session) of its own.

    Args:
        spec: ``path/to/file.py:function`` or ``module:function``.
        timeout: seconds the import may take.

    Attributes:
        name: the function's ``__name__``.
        left: processes its last call left running (ended since).

    Raises:
        ValueError: the module cannot be imported (whatever its code raised, ``SystemExit``
            included) or has no such function, or the import did not end within ``timeout``.
    """

    def __init__(self, spec: str, *, timeout: float) -> None:
        self.spec = spec
        requests, self._requests = os.pipe()
        self._replies, replies = os.pipe()
        lifeline, self._lifeline = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "zoo_train.reward_process._worker",
                 str(requests), str(replies), str(lifeline)],
                pass_fds=(requests, replies, lifeline),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group, away from the terminal's Ctrl-C
            )  # fmt: skip
        finally:
            for fd in (requests, replies, lifeline):
                os.close(fd)
        self._fds = [self._requests, self._replies, self._lifeline]
        self._finalizer = weakref.finalize(self, _end, self.process, self._fds)
        self.left = 0
        try:
            reply = self._exchange(("load", spec, list(sys.path)), timeout, None)
        except RewardProcessError as e:
            self.close()
            raise ValueError(f"--reward {spec!r}: importing it {e}.") from None
        if reply[0] == "refused":
            self.close()
            raise ValueError(reply[1])
        self.name: str = reply[1]

    def _exchange(
        self, message: Any, timeout: float, interrupted: Callable[[], int | None] | None
    ) -> tuple[Any, ...]:
        try:
            send(self._requests, message)
        except BrokenPipeError:
            raise RewardProcessError(self._ended()) from None
        except Exception as e:  # an argument pickle cannot carry (an open file, a lambda)
            raise RewardProcessError(
                f"cannot be passed its arguments ({type(e).__name__}: {str(e)[:120]})"
            ) from None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                _end(self.process, self._fds)
                raise RewardProcessError(
                    f"did not return within {timeout:g} s (--reward-timeout), so its process "
                    "was ended"
                )
            ready, _, _ = select.select([self._replies], [], [], min(left, _POLL))
            if ready:
                try:
                    return receive(self._replies)
                except EOFError:
                    raise RewardProcessError(self._ended()) from None
            # Ended with nothing to read (a child of it may hold the reply pipe open).
            exited = self.process.poll() is not None
            if exited and not select.select([self._replies], [], [], 0)[0]:
                raise RewardProcessError(self._ended())
            signum = None if interrupted is None else interrupted()
            if signum is not None:
                _end(self.process, self._fds)
                raise StepInterruptedError(signum)

    def _ended(self) -> str:
        code = _end(self.process, self._fds)
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return f"ended its process ({how}) without returning"

    def __call__(
        self,
        arguments: dict[str, Any],
        *,
        timeout: float,
        interrupted: Callable[[], int | None] | None = None,
    ) -> Any:
        """The function's return value on ``arguments`` (a copy reaches it).

        Args:
            arguments: its keyword arguments.
            timeout: seconds it may take; past them its process is ended.
            interrupted: polled while waiting; a signal number it returns ends the call.

        Raises:
            RewardProcessError: it raised (any ``BaseException``), did not return in time, ended
                its process, or returned something that cannot be passed back.
            StepInterruptedError: ``interrupted`` returned a signal first.
        """
        if not self._fds:
            raise RewardProcessError("was called after its process ended")
        reply = self._exchange(("call", arguments), timeout, interrupted)
        self.left = reply[-1]
        if reply[0] == "raised":
            raise RewardProcessError(f"raised {reply[1]}")
        if reply[0] == "unsendable":
            raise RewardProcessError(f"returned a {reply[1]}, which cannot be passed back")
        return reply[1]

    def close(self) -> None:
        """End the process and anything it left (idempotent)."""
        self._finalizer()
