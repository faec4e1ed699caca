"""What a tracker is: the few calls a run's records become, whatever the backend."""

from __future__ import annotations

import dataclasses
import pathlib
from collections.abc import Mapping
from typing import Any, Protocol


@dataclasses.dataclass(frozen=True)
class RunStart:
    """A run starting or resuming, as a tracker is told once before anything else.

    Attributes:
        step: the step it starts from (0, or the checkpoint it resumes).
        resumed: whether it resumes a checkpoint (what was tracked past ``step`` is redone).
        settings: the run's settings by dotted key (``optimizer.lr``), values a string, number
            or bool: the hyperparameters.
        kernels: the resolved attention kernels (``kernel``, ``version``, ``source``,
            ``fallback_reason`` each).
    """

    step: int
    resumed: bool
    settings: Mapping[str, str | int | float | bool]
    kernels: tuple[Mapping[str, Any], ...] = ()

    def kernel_table(self) -> str:
        """The kernels as a Markdown table (one row each)."""
        rows = ["| kernel | version | chosen by | fallback reason |", "|---|---|---|---|"]
        for k in self.kernels:
            cells = (k.get("kernel"), k.get("version"), k.get("source"), k.get("fallback_reason"))
            rows.append("| " + " | ".join("—" if c is None else str(c) for c in cells) + " |")
        return "\n".join(rows)


class Tracker(Protocol):
    """A place a run's metrics are sent: TensorBoard event files, a W&B run, or your own.

    Calls come from one thread, in order: :meth:`start` first, :meth:`close` last. A method
    that raises switches the tracker off for the rest of the run (see
    :class:`~zoo_train.tracking.Trackers`).
    """

    name: str

    def start(self, run: RunStart) -> None:
        """Open the backend for ``run`` (settings as hyperparameters, the kernels as text)."""
        ...

    def scalars(self, step: int, values: Mapping[str, float]) -> None:
        """Values at ``step`` by tag (``train/loss``, ``eval/loss``, ...)."""
        ...

    def text(self, tag: str, text: str, step: int) -> None:
        """A text (e.g. the final sample) at ``step``."""
        ...

    def image(self, tag: str, path: pathlib.Path, step: int) -> None:
        """An image file (e.g. the loss curve) at ``step``."""
        ...

    def close(self) -> None:
        """Write what is pending and let go of the backend."""
        ...
