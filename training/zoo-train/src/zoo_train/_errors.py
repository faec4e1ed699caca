"""Errors a run can end with."""

from __future__ import annotations

import errno
import signal


class NonFiniteLossError(RuntimeError):
    """The loss or gradient became NaN/inf with ``on_nonfinite="stop"``.

    Attributes:
        step: the step (1-based) whose loss was not finite.
        last_checkpoint: the last finished checkpoint's step, or ``None``.
    """

    def __init__(self, message: str, *, step: int, last_checkpoint: int | None) -> None:
        super().__init__(message)
        self.step = step
        self.last_checkpoint = last_checkpoint


class CheckpointMismatchError(ValueError):
    """The output directory holds checkpoints of a different, incompatible run."""


class NoUsableCheckpointError(RuntimeError):
    """The output directory holds checkpoints but none of them can be read."""


class StoppedBySignalError(RuntimeError):
    """SIGINT, SIGTERM or SIGHUP asked the run to stop; it saved a checkpoint at ``step`` first.

    Attributes:
        step: the last step taken (and saved, when ``saved``).
        signum: the signal's number (``signal.SIGINT``, ``SIGTERM`` or ``SIGHUP``).
        saved: whether a checkpoint of ``step`` was written (not when no step had run yet).
    """

    def __init__(self, *, step: int, signum: int, saved: bool) -> None:
        self.step, self.signum, self.saved = step, signum, saved
        self.name = signal.Signals(signum).name
        what = f"checkpoint {step} saved" if saved else "no new step to save"
        super().__init__(
            f"Stopped by {self.name} after step {step}; {what}; run the same command to resume."
        )


class RunLockedError(RuntimeError):
    """Another live process is training into the same output directory (the message names its
    pid and host)."""


# A full disk or quota, a read-only filesystem, missing permissions: storage the user must fix.
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM})


class CheckpointWriteError(RuntimeError):
    """A checkpoint could not be written or rotated (full disk, read-only or vanished directory);
    the committed checkpoints before it are intact.

    Attributes:
        errno: the operating system's error number, when the failure carried one.
    """

    def __init__(self, message: str, *, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class StepInterruptedError(RuntimeError):
    """A stop signal came while the next step's batch was being made (a reward function was
    still running): the loop saves the last step taken and stops, as it does after a step.

    Attributes:
        signum: the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"interrupted by {signal.Signals(signum).name} before the next step")
        self.signum = signum
