"""Several processes, one run: starting ``jax.distributed`` and agreeing before training.

Every process runs the same command with its own ``--process-id`` (or ``ZOO_PROCESS_ID``);
process 0 hosts JAX's coordination service at ``--coordinator HOST:PORT``. On TPU pods, SLURM
and Open MPI, JAX's own cluster detection fills these in. After start-up a watchdog
(``_watchdog.py``) notices a process that dies, and :func:`agree_settings` refuses processes
started with different settings.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Mapping
from typing import Any

import jax
from jax._src import distributed
from jax.experimental import multihost_utils

from ._output import label_output, restore_output
from ._watchdog import Watchdog, peer_timeout_s

ENV_COORDINATOR = "ZOO_COORDINATOR"
ENV_NUM_PROCESSES = "ZOO_NUM_PROCESSES"
ENV_PROCESS_ID = "ZOO_PROCESS_ID"
#: Seconds every process may take to reach the coordinator and join (``ZOO_START_TIMEOUT_S``).
ENV_START_TIMEOUT = "ZOO_START_TIMEOUT_S"
START_TIMEOUT_S = 90.0
#: Exit status of a process that stops because another one was lost.
EXIT_PEER_LOST = 4

_watchdog: Watchdog | None = None


class StartError(RuntimeError):
    """The processes could not start together (one sentence saying why and what to do)."""


@dataclasses.dataclass(frozen=True)
class ProcessConfig:
    """How this process joins a multi-process run (all ``None``: a single process, unless JAX
    detects a cluster).

    Attributes:
        coordinator: ``HOST:PORT`` of process 0's coordination service.
        num_processes: how many processes run the job.
        process_id: this process's index, ``0 … num_processes - 1``.
    """

    coordinator: str | None = None
    num_processes: int | None = None
    process_id: int | None = None

    @classmethod
    def from_sources(
        cls, flags: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None
    ) -> ProcessConfig:
        """Command-line values, else the ``ZOO_COORDINATOR`` / ``ZOO_NUM_PROCESSES`` /
        ``ZOO_PROCESS_ID`` environment variables."""
        flags = flags or {}
        env = os.environ if env is None else env

        def pick(flag: str, var: str, kind: type) -> Any:
            value = flags.get(flag)
            if value is None and env.get(var, "").strip():
                text = env[var].strip()
                try:
                    value = kind(text)
                except ValueError:
                    raise ValueError(f"{var}={text!r} must be an integer.") from None
            return value

        return cls(
            coordinator=pick("coordinator", ENV_COORDINATOR, str),
            num_processes=pick("num_processes", ENV_NUM_PROCESSES, int),
            process_id=pick("process_id", ENV_PROCESS_ID, int),
        )

    @property
    def given(self) -> bool:
        """Whether any of the three was given."""
        return any(v is not None for v in (self.coordinator, self.num_processes, self.process_id))

    def check(self) -> None:
        """Raise ``ValueError`` (one sentence) for an incomplete or inconsistent setting."""
        missing = [
            flag
            for flag, value in (
                ("--coordinator", self.coordinator),
                ("--num-processes", self.num_processes),
                ("--process-id", self.process_id),
            )
            if value is None
        ]
        if missing:
            raise ValueError(
                f"a multi-process run needs --coordinator, --num-processes and --process-id "
                f"(or {ENV_COORDINATOR}, {ENV_NUM_PROCESSES}, {ENV_PROCESS_ID}); "
                f"{', '.join(missing)} missing."
            )
        assert self.num_processes is not None and self.process_id is not None
        if self.num_processes < 1:
            raise ValueError(f"--num-processes must be at least 1, got {self.num_processes}.")
        if not 0 <= self.process_id < self.num_processes:
            raise ValueError(
                f"--process-id {self.process_id} is outside 0…{self.num_processes - 1} for "
                f"--num-processes {self.num_processes}; number the processes from 0."
            )
        host, sep, port = (self.coordinator or "").rpartition(":")
        if not sep or not host or not port.isdigit():
            raise ValueError(
                f"--coordinator must be HOST:PORT (process 0's address and a free port), got "
                f"{self.coordinator!r}."
            )


def start_timeout_s() -> float:
    """How long start-up may take (``ZOO_START_TIMEOUT_S``, default 90 s)."""
    return float(os.environ.get(ENV_START_TIMEOUT, START_TIMEOUT_S))


def _cluster_detected() -> bool:
    """Whether JAX's own cluster detection (TPU pods, SLURM, Open MPI) applies here."""
    try:
        # A private module of JAX, guarded: a later release may move it.
        from jax._src import clusters
    except ImportError:  # pragma: no cover - a future jax without this module
        return False
    for env in clusters.ClusterEnv._cluster_types:
        if getattr(env, "opt_in_only_method", False):
            continue
        try:
            if env.is_env_present():
                return True
        except Exception:  # a detector that cannot look is not a cluster
            continue
    return False


def _wait_for_coordinator(address: str, deadline: float, process_id: int) -> None:
    host, _, port = address.rpartition(":")
    while True:
        try:
            with socket.create_connection((host, int(port)), timeout=2.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                raise StartError(
                    f"process {process_id} cannot reach the coordinator {address} (process 0) "
                    f"after {start_timeout_s():.0f} s; start process 0 with the same "
                    "--coordinator, or fix the address."
                ) from None
            time.sleep(0.5)


def _initialize(**kwargs: Any) -> None:
    """``jax.distributed.initialize`` with a deadline that ends in a sentence, not an abort."""
    timeout = start_timeout_s()
    done = threading.Event()

    def watch() -> None:
        # JAX aborts the process (a fatal log with a stack) when its own start-up deadline
        # passes; say what happened a moment before it does.
        if not done.wait(timeout):
            n = kwargs.get("num_processes") or "all"
            _die(
                f"not all {n} processes joined the run within {timeout:.0f} s; start every "
                "process with the same --coordinator and --num-processes.",
                EXIT_PEER_LOST,
            )

    threading.Thread(target=watch, name="zoo-start-watch", daemon=True).start()
    jax.distributed.initialize(
        initialization_timeout=int(timeout) + 10,
        # JAX's own heartbeat is the backstop; the watchdog notices a lost process first.
        heartbeat_timeout_seconds=int(peer_timeout_s() * 3) + 10,
        **kwargs,
    )
    done.set()


def _die(message: str, code: int) -> None:
    print(f"zoo: error: {message}", file=sys.stderr, flush=True)
    restore_output()
    os._exit(code)


def start_processes(config: ProcessConfig) -> bool:
    """Join the multi-process run ``config`` describes (or that JAX detects); start the
    watchdog. Returns whether this is a multi-process run. A no-op for a single process.

    Raises:
        ValueError: an incomplete or inconsistent ``config``.
        StartError: the coordinator cannot be reached.
    """
    global _watchdog
    if jax.distributed.is_initialized():
        return jax.process_count() > 1
    if config.given:
        config.check()
        assert config.process_id is not None and config.coordinator is not None
        if config.process_id != 0:
            deadline = time.monotonic() + start_timeout_s()
            _wait_for_coordinator(config.coordinator, deadline, config.process_id)
        _initialize(
            coordinator_address=config.coordinator,
            num_processes=config.num_processes,
            process_id=config.process_id,
        )
    elif _cluster_detected():
        _initialize()
    else:
        return False
    if jax.process_count() > 1:
        label_output(process_label(), fatal_exit=EXIT_PEER_LOST)
        _watchdog = Watchdog(on_lost=lambda message: _die(message, EXIT_PEER_LOST))
        _watchdog.start()
    return jax.process_count() > 1


def stop_processes() -> None:
    """Stop the watchdog and leave the run (every process, at the end)."""
    _stop_watchdog()
    if jax.distributed.is_initialized():
        jax.distributed.shutdown()
    restore_output()


def _stop_watchdog() -> None:
    global _watchdog
    if _watchdog is not None:
        _watchdog.stop()
        _watchdog = None


def await_verdict() -> None:
    """After an error in a multi-process run: give the watchdog the time it needs to tell
    whether another process is gone (it then ends this process with that sentence).

    A collective whose peer died may fail at once ("connection reset") or hang; either way the
    missing process is named by the watchdog, within its timeout.
    """
    if _watchdog is not None:
        _watchdog.join(peer_timeout_s() + 5)


def abandon_processes() -> None:
    """Stop the watchdog and flush output, without waiting for the other processes (a process
    that fails alone exits at once: the others' watchdogs notice it is gone)."""
    _stop_watchdog()
    if jax.process_index() == 0 and jax.process_count() > 1:
        # The coordination service leaves with process 0: give the others a moment to report
        # the same error (when they all failed together) before it goes.
        time.sleep(2.0)
    restore_output()


def process_label() -> str:
    """``"[1/4] "`` in a multi-process run (every line a process prints starts with it: see
    ``_output.py``), else ``""``."""
    if not jax.distributed.is_initialized() or jax.process_count() == 1:
        return ""
    return f"[{jax.process_index()}/{jax.process_count()}] "


def is_primary() -> bool:
    """Whether this process writes the run's files and output (process 0)."""
    return jax.process_index() == 0


def key_value_store() -> Any:
    return distributed.global_state.client


def agree_settings(settings: Mapping[str, Any], *, timeout_s: float | None = None) -> None:
    """Refuse to go on unless every process was started with the same ``settings``.

    Each process publishes its settings and compares every other process's with process 0's,
    so all of them stop with the same sentence, naming the first setting that differs.

    Raises:
        ValueError: ``"process 1's lr (0.02) differs from process 0's (0.01); …"``.
    """
    if not jax.distributed.is_initialized() or jax.process_count() == 1:
        return
    client = key_value_store()
    client.key_value_set(
        f"zoo/settings/{jax.process_index()}", json.dumps(settings, sort_keys=True, default=str)
    )
    wait_ms = int(1000 * (start_timeout_s() if timeout_s is None else timeout_s))
    every = [
        json.loads(client.blocking_key_value_get(f"zoo/settings/{i}", wait_ms))
        for i in range(jax.process_count())
    ]
    for i, theirs in enumerate(every[1:], start=1):
        for key in sorted(set(every[0]) | set(theirs)):
            if every[0].get(key) != theirs.get(key):
                # Every process finds the same difference; they leave together, so none is
                # ended by process 0 (the coordinator) leaving first.
                with contextlib.suppress(Exception):  # one that cannot wait still reports it
                    client.wait_at_barrier("zoo/settings-refused", wait_ms)
                raise ValueError(
                    f"process {i}'s {key} ({theirs.get(key)!r}) differs from process 0's "
                    f"({every[0].get(key)!r}); start every process with the same settings."
                )


def barrier(name: str) -> None:
    """Wait until every process of the run reaches this point (nothing with one process)."""
    if jax.process_count() > 1:
        multihost_utils.sync_global_devices(name)
