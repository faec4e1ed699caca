"""What a folder of TensorBoard event files shows, read back as TensorBoard reads it, so a
replay can tell whether the run's events are already there."""

from __future__ import annotations

import math
import pathlib
import struct
from collections.abc import Iterator, Mapping

import numpy as np

from ..loop import METRICS_FILE, read_metrics
from ._record_calls import scalars_of
from ._tensorboardx import tensorboardx

#: ``(tag, step)`` to value.
Scalars = dict[tuple[str, int], float]


def event_files(directory: pathlib.Path) -> list[pathlib.Path]:
    """The event files of ``directory`` in the order TensorBoard reads them (by name)."""
    return sorted(directory.glob("events.out.tfevents.*"))


def _records(path: pathlib.Path) -> Iterator[bytes]:
    """The records of a TFRecord file (a length, its checksum, the data, its checksum); a torn
    last record ends the file, as TensorBoard's reader stops there."""
    data = path.read_bytes()
    at = 0
    while at + 12 <= len(data):
        (length,) = struct.unpack("<Q", data[at : at + 8])
        end = at + 12 + length + 4
        if end > len(data):
            return
        yield data[at + 12 : at + 12 + length]
        at = end


def shown_scalars(directory: pathlib.Path) -> Scalars:
    """Every scalar TensorBoard shows from ``directory``: the last value written for each tag
    and step, with what a session start at step ``s`` purges (values at ``s`` and later written
    before it) left out."""
    Event, SessionLog = tensorboardx().Event, tensorboardx().SessionLog

    shown: Scalars = {}
    for path in event_files(directory):
        for record in _records(path):
            event = Event.FromString(record)
            if event.HasField("session_log") and event.session_log.status == SessionLog.START:
                shown = {k: v for k, v in shown.items() if k[1] < event.step}
                continue
            for value in event.summary.value:
                if value.WhichOneof("value") == "simple_value":
                    shown[(value.tag, int(event.step))] = value.simple_value
    return shown


def run_scalars(run: pathlib.Path) -> Scalars:
    """Every scalar a replay of ``run``'s metrics writes, as float32 (how events hold them)."""
    out: Scalars = {}
    for record in read_metrics(run / METRICS_FILE):
        step = int(record.get("step", 0))
        for tag, value in scalars_of(record).items():
            out[(tag, step)] = float(np.float32(value))
    return out


def same_scalars(a: Mapping[tuple[str, int], float], b: Mapping[tuple[str, int], float]) -> bool:
    """Whether two sets of scalars hold the same tags and steps with the same values (``nan``
    equal to ``nan``)."""
    if a.keys() != b.keys():
        return False
    return all(a[k] == b[k] or (math.isnan(a[k]) and math.isnan(b[k])) for k in a)
