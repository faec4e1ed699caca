"""The watchdog: every process of a run notices, within a bound, that another one is gone.

A process killed with ``kill -9`` leaves the others blocked in a collective that will never
complete. JAX's coordination service would abort them eventually, with a fatal log and a stack
trace; this thread says which process is missing, in one sentence, first. Each process bumps a
counter in JAX's key-value store (on process 0's coordination service) every
``period`` seconds and reads everyone else's. A counter that has not moved for
``ZOO_PEER_TIMEOUT_S`` seconds (default 30) names a lost process; a store that does not answer
for as long means the coordinator (process 0) is lost. The bound on noticing is that timeout
plus one period.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import jax
from jax._src import distributed

ENV_PEER_TIMEOUT = "ZOO_PEER_TIMEOUT_S"
PEER_TIMEOUT_S = 30.0


def peer_timeout_s() -> float:
    """Seconds without a sign of life after which a process counts as lost."""
    return float(os.environ.get(ENV_PEER_TIMEOUT, PEER_TIMEOUT_S))


class Watchdog:
    """Heartbeats through JAX's key-value store; calls ``on_lost(sentence)`` once on a loss."""

    def __init__(self, on_lost: Callable[[str], None], *, period: float | None = None) -> None:
        self._client: Any = distributed.global_state.client
        self._me = jax.process_index()
        self._count = jax.process_count()
        self._timeout = peer_timeout_s()
        self._period = period if period is not None else min(2.0, self._timeout / 5)
        self._on_lost = on_lost
        self._stop = threading.Event()
        # Store calls run here, so a coordinator that hangs cannot hang the watchdog.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="zoo-watchdog-rpc")
        self._thread = threading.Thread(target=self._run, name="zoo-watchdog", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self._period * 2)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def join(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the watchdog to find a lost process."""
        self._thread.join(timeout)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        return self._pool.submit(fn, *args).result(timeout=self._period * 2)

    def _key(self, process: int) -> str:
        return f"zoo/alive/{process}"

    def _run(self) -> None:
        beat = 0
        seen: dict[int, tuple[str, float]] = {}
        started = store_ok = time.monotonic()
        while not self._stop.wait(self._period):
            now = time.monotonic()
            beat += 1
            try:
                self._call(self._client.key_value_set, self._key(self._me), str(beat), True)
            except Exception:  # the coordinator does not answer (or answers an error)
                if self._me != 0 and now - store_ok > self._timeout:
                    self._lost(
                        f"the coordinator (process 0) has not answered for {self._timeout:.0f} s; "
                        "stopping. Restart every process with the same command to resume from "
                        "the last checkpoint."
                    )
                    return
                continue
            store_ok = now
            for p in range(self._count):
                if p == self._me:
                    continue
                try:
                    value = self._call(self._client.key_value_try_get, self._key(p))
                except TimeoutError:
                    break
                except Exception:  # not written yet
                    continue
                if p not in seen or seen[p][0] != value:
                    seen[p] = (value, now)
            for p in range(self._count):
                since = seen[p][1] if p in seen else started
                if p != self._me and now - since > self._timeout:
                    self._lost(
                        f"process {p} has given no sign of life for {self._timeout:.0f} s (it "
                        "died or cannot reach the coordinator); stopping. Restart every process "
                        "with the same command to resume from the last checkpoint."
                    )
                    return

    def _lost(self, sentence: str) -> None:
        if not self._stop.is_set():
            self._on_lost(sentence)
