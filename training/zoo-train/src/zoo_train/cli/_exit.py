"""How a command ends: one place maps what went wrong to an exit code and one sentence.

Exit codes: 0 success; 1 a failed run or check (a non-finite loss, ``zoo kernels verify``);
2 a usage or input error (one sentence on stderr, no traceback; ``ZOO_DEBUG=1`` shows the
traceback instead); 3 a train step that does not fit the topology (``zoo compile``); 4 a peer
process was lost; 128 + N a signal (130 SIGINT, 143 SIGTERM).
"""

from __future__ import annotations

import errno
import os
import sys
from collections.abc import Callable

from .._usage import UsageError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: Exit status of a step that does not fit the topology's HBM.
EXIT_DOES_NOT_FIT = 3

# A full disk or quota, a read-only filesystem, missing permissions: the user's to fix.
_STORAGE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM}


def one_sentence(err: BaseException) -> str:
    """``err``'s message on one line, ending with a full stop."""
    text = " ".join(str(err).split()) or type(err).__name__
    return text if text.endswith((".", "?", "!")) else text + "."


def _user_errors() -> tuple[type[BaseException], ...]:
    # Errors a user causes: bad settings, bad data, an incompatible checkpoint directory.
    from .._errors import CheckpointWriteError, NoUsableCheckpointError, RunLockedError

    errors: list[type[BaseException]] = [ValueError, FileNotFoundError, NotADirectoryError]
    errors += [NoUsableCheckpointError, RunLockedError, CheckpointWriteError]
    if "zoo_attention" in sys.modules:
        errors.append(sys.modules["zoo_attention"].KernelUnavailableError)
    return tuple(errors)


def _storage_sentence(err: OSError) -> str:
    where = f" {err.filename}" if err.filename else ""
    return (
        f"Cannot write{where}: {(err.strerror or str(err)).lower()}; free space or choose a "
        "writable output directory (committed checkpoints are intact)."
    )


def run_command(command: str, body: Callable[[], int]) -> int:
    """Run ``body`` and turn what it raises into the exit code and one sentence on stderr;
    what no rule covers (a bug) is raised with its traceback."""
    where = f"zoo {command}"
    try:
        return body()
    except UsageError as err:
        print(f"{where}: error: {one_sentence(err)}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # e.g. `zoo models | head`: the reader left, which is fine
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        print(f"{where}: interrupted.", file=sys.stderr)
        return 130
    except Exception as err:
        from .._errors import NonFiniteLossError, StoppedBySignalError

        debug = bool(os.environ.get("ZOO_DEBUG"))
        if isinstance(err, NonFiniteLossError):
            print(f"{where}: {one_sentence(err)}", file=sys.stderr)
            return EXIT_FAILED
        if isinstance(err, StoppedBySignalError):
            print(f"{where}: {one_sentence(err)}", file=sys.stderr)
            return 128 + err.signum  # 130 for SIGINT, 143 for SIGTERM, as a shell reports them
        if isinstance(err, _user_errors()) and not debug:
            print(f"{where}: error: {one_sentence(err)}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(err, OSError) and err.errno in _STORAGE_ERRNOS and not debug:
            print(f"{where}: error: {_storage_sentence(err)}", file=sys.stderr)
            return EXIT_USAGE
        raise
