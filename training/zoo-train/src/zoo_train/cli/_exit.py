"""How a command ends: one place maps what went wrong to an exit code and one sentence.

| code | meaning |
|---|---|
| 0 | success |
| 1 | a failed run or check: a non-finite loss, a failing ``zoo kernels verify`` case |
| 2 | a usage or input error: bad flags or settings, missing or unreadable input, a directory that holds another run, storage that cannot be written |
| 3 | it does not fit: a model or step larger than the memory there is (refused before allocating where that can be known; XLA's ``RESOURCE_EXHAUSTED`` otherwise), a step over a TPU's HBM (``zoo compile``) |
| 4 | a peer process of a multi-process run was lost (its watchdog ends the process) |
| 128 + N | stopped by signal N after saving: 129 SIGHUP, 130 SIGINT, 143 SIGTERM |

Every code but 0 comes with one sentence on stderr, never a traceback (``ZOO_DEBUG=1`` shows
the traceback of a 2 or 3 instead). What no rule covers is a bug: raised with its traceback.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable

from .._errors import (
    STORAGE_ERRNOS,
    CheckpointWriteError,
    NonFiniteLossError,
    NoUsableCheckpointError,
    RunLockedError,
    StoppedBySignalError,
)
from .._usage import UsageError

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
#: A model or step larger than the memory there is.
EXIT_DOES_NOT_FIT = 3
#: A peer process was lost: ``zoo_train.parallel.EXIT_PEER_LOST``, with which the watchdog ends
#: the process itself, from its thread (kept here too so that the table is whole).
EXIT_PEER_LOST = 4


# What to lower when a command runs out of memory.
_LOWER = {
    "train": "lower --batch-size or --seq-len (--grad-accum keeps the batch), set "
    "model_config.remat=true, or use more devices",
    "generate": "lower --max-new-tokens or shorten the prompt",
    "eval": "lower --batch-size or --seq-len",
}
_LOWER["finetune"] = _LOWER["train"] + " (or a LoRA rank)"


#: The most of an error's message a command prints: a sentence, not a data set it may quote.
MAX_SENTENCE = 1000


def one_sentence(err: BaseException) -> str:
    """``err``'s message on one line, ending with a full stop (cut at :data:`MAX_SENTENCE`
    characters)."""
    text = " ".join(str(err).split()) or type(err).__name__
    if len(text) > MAX_SENTENCE:
        text = text[: MAX_SENTENCE - 1] + "…"
    return text if text.endswith((".", "?", "!")) else text + "."


def _user_errors() -> tuple[type[BaseException], ...]:
    # Errors a user causes: bad settings, bad data, an incompatible checkpoint directory.

    errors: list[type[BaseException]] = [ValueError, FileNotFoundError, NotADirectoryError]
    errors += [NoUsableCheckpointError, RunLockedError, CheckpointWriteError]
    if "zoo_attention" in sys.modules:
        errors.append(sys.modules["zoo_attention"].KernelUnavailableError)
    return tuple(errors)


def _does_not_fit(err: BaseException) -> bool:
    models = sys.modules.get("zoo_models")
    return models is not None and isinstance(err, models.DoesNotFitError)


def _out_of_memory(err: BaseException) -> bool:
    # XLA's allocation failure (jax.errors.JaxRuntimeError), without importing jax to ask.
    return type(err).__name__.endswith("RuntimeError") and "RESOURCE_EXHAUSTED" in str(err)


def _memory_sentence(err: BaseException, command: str) -> str:
    """XLA's ``RESOURCE_EXHAUSTED`` as the sizes involved and what to lower."""
    text = str(err)
    # CPU: "allocating N bytes"; GPU: "while trying to allocate N bytes"; TPU: "Used X of Y hbm".
    asked = re.search(r"allocat\w* (\d+) bytes", text)
    hbm = re.search(r"Used ([\d.]+\w?) of ([\d.]+\w?) hbm", text)
    # Only on an out-of-memory error, from a command that has loaded JAX already.
    import jax

    import zoo_models

    if asked is not None:
        device = jax.devices()[0]
        limit = (device.memory_stats() or {}).get("bytes_limit")
        have, what = zoo_models.host_memory_limit()
        if limit:
            have, what = limit, f"a {device.device_kind} device's memory"
        within = f" ({what}: {zoo_models.human_bytes(have)})" if have is not None else ""
        size = f"an allocation of {zoo_models.human_bytes(int(asked.group(1)))} failed{within}"
    elif hbm is not None:
        size = f"the program needs {hbm.group(1)}B of {hbm.group(2)}B of HBM"
    else:
        detail = text.split("RESOURCE_EXHAUSTED:", 1)[-1].strip().splitlines()[0][:160]
        size = f"XLA: {detail.rstrip('.')}"
    lower = _LOWER.get(command, "use a smaller model or a machine with more memory")
    return f"Out of memory: {size}; {lower}."


def _storage_sentence(err: OSError, command: str) -> str:
    where = f" {err.filename}" if err.filename else ""
    intact = " (committed checkpoints are intact)" if command in ("train", "finetune") else ""
    return (
        f"Cannot write{where}: {(err.strerror or str(err)).lower()}; free space or choose a "
        f"writable output directory{intact}."
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
        debug = bool(os.environ.get("ZOO_DEBUG"))
        if isinstance(err, NonFiniteLossError):
            print(f"{where}: {one_sentence(err)}", file=sys.stderr)
            return EXIT_FAILED
        if isinstance(err, StoppedBySignalError):
            print(f"{where}: {one_sentence(err)}", file=sys.stderr)
            return 128 + err.signum  # 129 SIGHUP, 130 SIGINT, 143 SIGTERM, as a shell reports
        if debug:
            raise
        if _does_not_fit(err):
            print(f"{where}: error: {one_sentence(err)}", file=sys.stderr)
            return EXIT_DOES_NOT_FIT
        if _out_of_memory(err):
            print(f"{where}: error: {_memory_sentence(err, command)}", file=sys.stderr)
            return EXIT_DOES_NOT_FIT
        if isinstance(err, _user_errors()):
            print(f"{where}: error: {one_sentence(err)}", file=sys.stderr)
            return EXIT_USAGE
        if isinstance(err, OSError) and err.errno in STORAGE_ERRNOS:
            print(f"{where}: error: {_storage_sentence(err, command)}", file=sys.stderr)
            return EXIT_USAGE
        raise
