"""Batches made ahead of time in a background thread, so host data work overlaps the device."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class Prefetcher(Generic[T]):
    """Calls ``produce()`` ``count`` times in a daemon thread, keeping up to ``depth`` results
    ready; :meth:`next` hands them out in order.

    With ``depth=2`` the batch of the next step is on the device (double-buffered) while the
    current step runs, and the one after is being made. An error in ``produce`` is raised by
    the :meth:`next` that would have returned its result.
    """

    def __init__(self, produce: Callable[[], T], count: int, *, depth: int = 2) -> None:
        self._produce = produce
        self._count = count
        self._queue: queue.Queue[T | _Failure] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="zoo-prefetch", daemon=True)
        self._thread.start()

    def _put(self, item: T | _Failure) -> bool:
        while not self._stop.is_set():
            try:
                self._queue.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def _run(self) -> None:
        try:
            for _ in range(self._count):
                if self._stop.is_set() or not self._put(self._produce()):
                    return
        except BaseException as err:  # handed to the consumer, raised there
            self._put(_Failure(err))

    def next(self) -> T:
        """The next result, waiting for it if it is not made yet."""
        while True:
            try:
                item = self._queue.get(timeout=0.1)
                break
            except queue.Empty:
                if not self._thread.is_alive() and self._queue.empty():
                    raise RuntimeError("The batch prefetcher ended early.") from None
        if isinstance(item, _Failure):
            raise item.error
        return item

    def close(self) -> None:
        """Stop making results and wait for the thread (it finishes the one in hand)."""
        self._stop.set()
        self._thread.join(timeout=30)
