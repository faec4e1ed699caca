"""TensorBoard event files under ``OUT/tensorboard/``, written with tensorboardX (no
TensorFlow)."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

from ._tracker import RunStart

TENSORBOARD_DIR = "tensorboard"
# Seconds between flushes of tensorboardX's writer: what TensorBoard shows lags this much.
_FLUSH_SECS = 10
# The metrics the HParams dashboard shows beside each run's settings.
_HPARAM_METRICS = ("train/loss", "eval/loss")


class TensorBoardTracker:
    """Scalars, the settings as hyperparameters, the kernels and the sample as text, the loss
    curve as an image, into ``directory`` (a TensorBoard run: ``tensorboard --logdir`` a folder
    above it).

    On resume from step ``s`` the writer starts with a purge at ``s + 1``: TensorBoard hides
    what an interrupted call wrote past the checkpoint, as ``metrics.jsonl`` drops it.
    """

    name = "tensorboard"

    def __init__(self, directory: str | pathlib.Path) -> None:
        self.directory = pathlib.Path(directory)
        self._writer: Any = None

    def start(self, run: RunStart) -> None:
        # Imported here, in the trackers' thread: tensorboardX takes a while (it imports torch
        # when torch is installed).
        from tensorboardX import SummaryWriter
        from tensorboardX.summary import hparams

        self._writer = SummaryWriter(
            str(self.directory),
            purge_step=run.step + 1 if run.resumed else run.step,
            flush_secs=_FLUSH_SECS,
        )
        if run.settings:
            experiment, session, _ = hparams(dict(run.settings), dict.fromkeys(_HPARAM_METRICS))
            self._writer.file_writer.add_summary(experiment)
            self._writer.file_writer.add_summary(session)
        if run.kernels:
            self._writer.add_text("run/attention", run.kernel_table(), run.step)

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        from tensorboardX.proto.summary_pb2 import Summary

        # One event for all of a record's values, not one per value: a fraction of the CPU
        # (tensorboardX checksums each event in Python).
        summary = Summary(value=[Summary.Value(tag=t, simple_value=v) for t, v in values.items()])
        self._writer.file_writer.add_summary(summary, step)

    def text(self, tag: str, text: str, step: int) -> None:
        # TensorBoard renders text as Markdown: a code block keeps a sample as it was written.
        self._writer.add_text(tag, "```\n" + text + "\n```", step)

    def image(self, tag: str, path: pathlib.Path, step: int) -> None:
        import numpy as np
        from PIL import Image

        with Image.open(path) as picture:
            pixels = np.asarray(picture.convert("RGB"))
        self._writer.add_image(tag, pixels, step, dataformats="HWC")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
