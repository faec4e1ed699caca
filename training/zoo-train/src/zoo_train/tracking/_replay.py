"""A finished run's ``metrics.jsonl`` replayed into trackers."""

from __future__ import annotations

import pathlib
from collections.abc import Sequence

from ..loop import METRICS_FILE, PLOT_FILE, read_metrics
from ._record_calls import Call, RecordFeed
from ._tracker import Tracker


def replay(run: str | pathlib.Path, trackers: Sequence[Tracker]) -> int:
    """Send the records of ``run/metrics.jsonl`` to ``trackers`` as the run sent them while it
    trained (the same tags at the same steps), then its loss curve if there is one; close the
    trackers. Runs in the caller's thread: what a tracker raises is raised.

    Returns:
        The number of records sent.

    Raises:
        FileNotFoundError: ``run`` holds no metrics.
    """
    run = pathlib.Path(run)
    records = read_metrics(run / METRICS_FILE)
    if not records:
        raise FileNotFoundError(f"{run} holds no metrics ({METRICS_FILE}); pass a run directory.")
    feed = RecordFeed()

    def send(calls: list[Call]) -> None:
        for method, args in calls:
            for tracker in trackers:
                getattr(tracker, method)(*args)

    try:
        for record in records:
            send(feed.calls(record))
        if (run / PLOT_FILE).is_file():
            last = max(int(r.get("step", 0)) for r in records)
            send(feed.call("image", ("loss_curve", run / PLOT_FILE, last), last))
    finally:
        for tracker in trackers:
            tracker.close()
    return len(records)
