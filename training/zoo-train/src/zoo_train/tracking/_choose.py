"""The trackers a run names (``--tracker``, setting ``trackers``), checked and built."""

from __future__ import annotations

import importlib.util
import pathlib
from collections.abc import Sequence

from ._fanout import Trackers
from ._tensorboard import TENSORBOARD_DIR, TensorBoardTracker
from ._tracker import Tracker
from ._wandb import WandbOptions, WandbTracker

#: The tracker names: ``jsonl`` is ``metrics.jsonl``, which the loop always writes.
TRACKERS = ("jsonl", "tensorboard", "wandb")


def tracker_names(names: Sequence[str]) -> tuple[str, ...]:
    """The trackers ``names`` asks for (``"tensorboard,wandb"`` or separate items; repeats
    dropped), ``jsonl`` first.

    Raises:
        ValueError: an unknown name, or ``wandb`` without the ``wandb`` package.
    """
    chosen = ["jsonl"]
    for name in (n.strip().lower() for item in names for n in item.split(",")):
        if not name or name in chosen:
            continue
        if name not in TRACKERS:
            raise ValueError(
                f"unknown tracker {name!r} in `trackers`; choose from {', '.join(TRACKERS)}."
            )
        chosen.append(name)
    if "wandb" in chosen and importlib.util.find_spec("wandb") is None:
        raise ValueError(
            "the wandb tracker needs the wandb package; install zoo-train[wandb] or drop wandb "
            "from `trackers`."
        )
    return tuple(chosen)


def make_trackers(
    names: Sequence[str], out: str | pathlib.Path, *, wandb: WandbOptions | None = None
) -> list[Tracker]:
    """The trackers ``names`` asks for, writing under the run directory ``out``
    (``out/tensorboard/``, ``out/wandb/``)."""
    chosen = tracker_names(names)
    out = pathlib.Path(out)
    trackers: list[Tracker] = []
    if "tensorboard" in chosen:
        trackers.append(TensorBoardTracker(out / TENSORBOARD_DIR))
    if "wandb" in chosen:
        trackers.append(WandbTracker(out, wandb or WandbOptions()))
    return trackers


def open_trackers(
    names: Sequence[str],
    out: str | pathlib.Path,
    *,
    wandb: WandbOptions | None = None,
    enabled: bool = True,
) -> Trackers:
    """:class:`Trackers` over :func:`make_trackers`; none where ``enabled`` is false (the
    processes of a run other than process 0)."""
    return Trackers(make_trackers(names, out, wandb=wandb) if enabled else [])
