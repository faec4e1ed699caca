"""``Trackers``: a run's records handed to its trackers from one background thread."""

from __future__ import annotations

import contextlib
import logging
import pathlib
import queue
import threading
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import Any

from ._record_calls import Call, RecordFeed
from ._tracker import Tracker

logger = logging.getLogger("zoo_train")

#: How long :meth:`Trackers.close` waits for the trackers to finish writing.
CLOSE_TIMEOUT_S = 60.0
_MAX_QUEUED = 10_000


def _sentence(err: BaseException) -> str:
    text = " ".join(str(err).split()) or "no message"
    return f"{type(err).__name__}: {text[:300]}"


class Trackers:
    """Sends a run's records to ``trackers`` from one background thread.

    :meth:`record` is the loop's ``on_record`` watcher (``train(..., on_record=t.record)``): it
    only queues the record, so the loop never waits for a tracker. The thread turns each record
    into tracker calls (see :mod:`._records`). A tracker whose call raises (no network, a bad
    key, a full disk) is reported once, as a warning on the ``zoo_train`` logger, and switched
    off; the others go on. With no trackers nothing is started and every call is free.

    Use as a context manager, or call :meth:`close` at the end: it waits up to
    ``close_timeout`` seconds for the trackers to write what is queued, then leaves them.
    """

    def __init__(
        self, trackers: Sequence[Tracker] = (), *, close_timeout: float = CLOSE_TIMEOUT_S
    ) -> None:
        self._live = list(trackers)
        self._close_timeout = close_timeout
        self._feed = RecordFeed()
        self._queue: queue.Queue[tuple[str, Any] | None] = queue.Queue(_MAX_QUEUED)
        self._dropping = False
        self._thread: threading.Thread | None = None
        if self._live:
            self._thread = threading.Thread(target=self._work, name="zoo-trackers", daemon=True)
            self._thread.start()

    def record(self, record: Mapping[str, Any]) -> None:
        """Queue a metrics record (a dict as ``metrics.jsonl`` holds it)."""
        self._put(("record", dict(record)))

    def text(self, tag: str, text: str, step: int) -> None:
        """Queue a text at ``step`` (e.g. the final sample)."""
        self._put(("call", (("text", (tag, text, step)), step)))

    def image(self, tag: str, path: str | pathlib.Path, step: int) -> None:
        """Queue an image file at ``step`` (e.g. the loss curve)."""
        self._put(("call", (("image", (tag, pathlib.Path(path), step)), step)))

    def close(self) -> None:
        """Let the trackers write what is queued and close them; waits ``close_timeout``
        seconds at most (what is still unwritten then is lost, with a warning)."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        with contextlib.suppress(queue.Full):
            self._queue.put(None, timeout=self._close_timeout)
        thread.join(self._close_timeout)
        if thread.is_alive():
            names = ", ".join(t.name for t in self._live)
            logger.warning(
                "the %s tracker did not finish writing within %.0f s; what it had not written "
                "is lost.",
                names,
                self._close_timeout,
            )

    def __enter__(self) -> Trackers:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _put(self, item: tuple[str, Any]) -> None:
        if self._thread is None:
            return
        try:
            self._queue.put_nowait(item)
            self._dropping = False
        except queue.Full:  # a tracker that hangs must not hold the loop, nor fill the memory
            if not self._dropping:
                logger.warning("the trackers fall behind; records are dropped until they catch up.")
            self._dropping = True

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                calls = self._calls(*item)
            except Exception as err:  # a malformed record of a caller's: the thread goes on
                logger.warning(
                    "a record the trackers cannot read was left out (%s).", _sentence(err)
                )
                continue
            for method, args in calls:
                for tracker in list(self._live):
                    self._call(tracker, method, args)
        for tracker in list(self._live):
            self._call(tracker, "close", ())

    def _calls(self, kind: str, payload: Any) -> list[Call]:
        if kind == "record":
            return self._feed.calls(payload)
        (method, args), step = payload
        return self._feed.call(method, args, step)

    def _call(self, tracker: Tracker, method: str, args: tuple[Any, ...]) -> None:
        try:
            getattr(tracker, method)(*args)
        except Exception as err:  # whatever a backend raises, training goes on
            self._live.remove(tracker)
            logger.warning(
                "the %s tracker failed (%s); it is switched off and training goes on without it.",
                tracker.name,
                _sentence(err),
            )
            if method != "close":
                with contextlib.suppress(Exception):
                    tracker.close()
