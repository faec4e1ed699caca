"""What went wrong with a checkpoint, as one sentence: a failed write, a failed deletion, an
unreadable step or a checkpoint of another model."""

from __future__ import annotations

import os
import pathlib
import re


def brief(error: BaseException) -> str:
    """What went wrong, in a clause: TensorStore's chain of contexts ("Error opening "cast"
    driver: Error opening "zarr" driver: …: cause [tensorstore_spec=…]") cut to its status, its
    cause and the last file it names; object reprs left out."""
    text = (str(error).splitlines() or [""])[0].split(" [tensorstore_spec")[0]
    text = re.sub(r"<[^<>]*>", "…", text)
    status = re.match(r"([A-Z][A-Z_]{3,}): ", text)
    if status is not None and ": " in text[status.end() :]:
        files = re.findall(r'local file "([^"]+)"', text)
        # Four parts name the item as well as the file (…/state/ocdbt.process_0/d/<hash>).
        where = f" in …/{'/'.join(pathlib.Path(files[-1]).parts[-4:])}" if files else ""
        text = f"{status.group(1)}: {text.rsplit(': ', 1)[-1]}{where}"
    text = text or type(error).__name__
    return text[:200] + ("…" if len(text) > 200 else "")


def unreadable(directory: pathlib.Path, step: int, reason: str, then: str) -> str:
    """The line reporting one unreadable step, and what happens instead (``then``)."""
    return f"checkpoint {step} in {directory} is unreadable ({reason}); {then}"


def none_readable(directory: pathlib.Path, steps: list[int]) -> str:
    """The sentence ending a run whose checkpoints are all unreadable (each reported before)."""
    return (
        f"None of the checkpoints in {directory} can be read (steps "
        f"{', '.join(map(str, steps))}, each reported above); move them away or pick another "
        "output directory (they are never overwritten)."
    )


def os_error_number(error: BaseException) -> int | None:
    """The operating system's error number behind ``error``, if it carries one."""
    # TensorStore reports an OS error inside a long message: "... [os_error_code='28']".
    code = re.search(r"os_error_code='(\d+)'", str(error))
    if code is not None:
        return int(code.group(1))
    return error.errno if isinstance(error, OSError) else None


def write_failure(
    error: BaseException, directory: pathlib.Path, step: int | None, *, deleting: int | None
) -> str:
    """The sentence for a failed save or asynchronous save of ``step`` in ``directory``, or for
    the failed deletion of step ``deleting`` when rotation was removing it."""
    number = os_error_number(error)
    if number is not None:
        reason = os.strerror(number).lower()
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
