"""TensorBoard event files under ``OUT/tensorboard/``, written with tensorboardX (no
TensorFlow, and no torch: see ``_tensorboardx``)."""

from __future__ import annotations

import itertools
import os
import pathlib
import time
from collections.abc import Mapping
from typing import Any

from ._tensorboardx import tensorboardx
from ._tracker import RunStart

TENSORBOARD_DIR = "tensorboard"
# Seconds between flushes (each an fsync): how far TensorBoard may lag a running job.
_FLUSH_SECS = 5.0
# The metrics the HParams dashboard shows beside each run's settings.
_HPARAM_METRICS = ("train/loss", "eval/loss")
# Event files are named by the second they were opened in: the process id and a count keep two
# writers of one second from opening (and emptying) the same file.
_OPENED = itertools.count()


class TensorBoardTracker:
    """Scalars, the settings as hyperparameters, the kernels and the sample as text, the loss
    curve as an image, into ``directory`` (a TensorBoard run: ``tensorboard --logdir`` a folder
    above it).

    Events are written in the caller's thread (the trackers' thread), one event per record, and
    flushed every few seconds, so a failed write (a full disk) is raised here. On resume from
    step ``s`` the file starts with a purge at ``s + 1``: TensorBoard hides what an interrupted
    call wrote past the checkpoint, as ``metrics.jsonl`` drops it.
    """

    name = "tensorboard"

    def __init__(self, directory: str | pathlib.Path) -> None:
        self.directory = pathlib.Path(directory)
        self._file: Any = None
        self._flushed = 0.0

    def start(self, run: RunStart) -> None:
        # Imported here, in the trackers' thread. Its synchronous writer, not SummaryWriter,
        # whose own thread would hide a failed write.
        tbx = tensorboardx()
        self.directory.mkdir(parents=True, exist_ok=True)
        suffix = f".{os.getpid()}.{next(_OPENED)}"
        self._file = tbx.EventsWriter(str(self.directory / "events"), filename_suffix=suffix)
        purge = run.step + 1 if run.resumed else run.step
        self._write(purge, session_log=tbx.SessionLog(status=tbx.SessionLog.START))
        if run.settings:
            metrics = dict.fromkeys(_HPARAM_METRICS)
            experiment, session, _ = tbx.hparams(dict(run.settings), metrics)
            self._write(run.step, summary=experiment)
            self._write(run.step, summary=session)
        if run.kernels:
            self._write(run.step, summary=tbx.text("run/attention", run.kernel_table()))

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        Summary = tensorboardx().Summary
        summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values.items()])
        self._write(step, summary=summary)

    def text(self, tag: str, text: str, step: int) -> None:
        # TensorBoard renders text as Markdown: a code block keeps a sample as it was written.
        self._write(step, summary=tensorboardx().text(tag, "```\n" + text + "\n```"))

    def image(self, tag: str, path: pathlib.Path, step: int) -> None:
        # PIL: only when a TensorBoard tracker writes an image.
        from PIL import Image

        Summary = tensorboardx().Summary

        with Image.open(path) as picture:  # the size only; the PNG goes in as it is
            (width, height), channels = picture.size, len(picture.getbands())
        encoded = Summary.Image(
            height=height, width=width, colorspace=channels, encoded_image_string=path.read_bytes()
        )
        self._write(step, summary=Summary(value=[Summary.Value(tag=tag, image=encoded)]))

    def close(self) -> None:
        if self._file is not None:
            file, self._file = self._file, None
            file.close()

    def _write(self, step: int, **content: Any) -> None:
        self._file.write_event(tensorboardx().Event(wall_time=time.time(), step=step, **content))
        if time.monotonic() >= self._flushed + _FLUSH_SECS:
            self._file.flush()
            self._flushed = time.monotonic()
