"""What went wrong with a checkpoint, as one sentence: a failed write, a failed deletion, an
unreadable step or a checkpoint of another model."""

from __future__ import annotations

import os
import pathlib
import re


def brief(error: BaseException) -> str:
    """``"Type: first clause"`` of ``error``, without the tensorstore spec storage errors carry."""
    text = str(error).splitlines()[0] if str(error) else ""
    text = text.split(" [tensorstore_spec")[0]
    return f"{type(error).__name__}: {text[:300]}{'…' if len(text) > 300 else ''}"


def write_failure(
    error: BaseException, directory: pathlib.Path, step: int | None, *, deleting: int | None
) -> str:
    """The sentence for a failed save or asynchronous save of ``step`` in ``directory``, or for
    the failed deletion of step ``deleting`` when rotation was removing it."""
    # TensorStore reports an OS error inside a long message: "... [os_error_code='28']".
    code = re.search(r"os_error_code='(\d+)'", str(error))
    if code is not None:
        reason = os.strerror(int(code.group(1))).lower()
    elif isinstance(error, OSError) and error.strerror:
        reason = error.strerror.lower()
    else:
        reason = brief(error)
    if deleting is not None:
        return (
            f"Deleting checkpoint {deleting} in {directory} (beyond the `keep` newest) failed: "
            f"{reason}; the newer checkpoints are committed, so remove it by hand or fix the "
            "directory, then run again."
        )
    # An async save's failure surfaces at the next call: the path in the message names its step.
    named = re.search(r"/(\d+)\.orbax-checkpoint-tmp", str(error))
    step = int(named.group(1)) if named is not None else step
    what = f"checkpoint {step}" if step is not None else "a checkpoint"
    return (
        f"Writing {what} in {directory} failed: {reason}; free space or fix the directory, "
        "then run again to resume from the last committed checkpoint."
    )


def mismatch(saved: list, expected: list, directory: pathlib.Path) -> str:
    """The sentence for checkpoints whose arrays (``[path, shape, dtype]`` lists) differ."""
    saved_d = {n: (s, d) for n, s, d in saved}
    want_d = {n: (s, d) for n, s, d in expected}
    diffs = [n for n in sorted(set(saved_d) | set(want_d)) if saved_d.get(n) != want_d.get(n)]
    shown = ", ".join(f"{n}: saved {saved_d.get(n)} vs now {want_d.get(n)}" for n in diffs[:3])
    return (
        f"The checkpoints in {directory} hold a different model or optimizer ({shown}"
        f"{', …' if len(diffs) > 3 else ''}); use another output directory or the original setup."
    )
