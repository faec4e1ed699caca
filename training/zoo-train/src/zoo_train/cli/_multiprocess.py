"""Runs of several processes from the command line: joining them, and ending them together."""

from __future__ import annotations

import argparse
import os
import sys
import traceback

from .._usage import UsageError
from ..settings import RunSettings, flat


def add_process_flags(p: argparse.ArgumentParser) -> None:
    """``--coordinator``, ``--num-processes`` and ``--process-id``."""
    group = p.add_argument_group(
        "several processes (one per host; JAX detects TPU pods, SLURM and Open MPI by itself)"
    )
    group.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        default=None,
        help="process 0's address and a free port, the same for every process (env ZOO_COORDINATOR)",
    )
    group.add_argument(
        "--num-processes",
        type=int,
        metavar="N",
        default=None,
        help="how many processes run the job (env ZOO_NUM_PROCESSES)",
    )
    group.add_argument(
        "--process-id",
        type=int,
        metavar="I",
        default=None,
        help="this process's index, 0 ... N-1 (env ZOO_PROCESS_ID)",
    )


def join_processes(args: argparse.Namespace, s: RunSettings) -> None:
    """Join a multi-process run (flags, the ``ZOO_*`` variables, or JAX's own detection of TPU
    pods, SLURM and Open MPI) and refuse to go on if the processes' settings differ."""
    join_agreeing(args, flat(s))


def join_agreeing(args: argparse.Namespace, settings: dict[str, object]) -> None:
    """Join a multi-process run as :func:`join_processes` does, the processes agreeing on
    ``settings`` (a JSON-able dict)."""
    # parallel loads JAX: only for a run of several processes.
    from ..parallel import ProcessConfig, StartError, agree_settings, start_processes

    try:
        config = ProcessConfig.from_sources(
            {
                "coordinator": args.coordinator,
                "num_processes": args.num_processes,
                "process_id": args.process_id,
            }
        )
        start_processes(config)
        agree_settings(settings)
    except (ValueError, StartError) as e:
        raise UsageError.from_error(e) from None


def joined() -> bool:
    """Whether this process is part of a multi-process run."""
    if "jax" not in sys.modules:
        return False
    # Loaded already (checked above): importing it here costs nothing.
    import jax

    return jax.distributed.is_initialized()


def after_crash() -> None:
    """A command of a multi-process run raised: most likely another process died under a
    collective, which the watchdog names before ending this process; otherwise a crash, whose
    traceback is printed before leaving at once."""
    if not joined():
        return

    # parallel loads JAX: only for a run of several processes.
    from ..parallel import await_verdict

    await_verdict()
    traceback.print_exc()
    leave_processes(1)


def leave_processes(code: int) -> None:
    """End a multi-process run: together on success; at once on failure, so the others'
    watchdogs notice instead of everyone waiting for a process that will never come."""
    if not joined():
        return
    # parallel loads JAX: only for a run of several processes.
    from ..parallel import abandon_processes, stop_processes

    if code == 0:
        stop_processes()
        return
    abandon_processes()
    os._exit(code)
