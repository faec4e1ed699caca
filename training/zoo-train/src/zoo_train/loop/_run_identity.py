"""What makes a run the same run: its identity, compared when it resumes, and the changes
that are allowed (the mesh it is laid out on, a new total of steps).

Whether a setting is part of the identity, or of the schedule a longer run changes, is declared
with the setting (:func:`~zoo_train.settings.declared_identity`): raising ``steps`` continues the
same run, the model, data, seed and batch staying, and only the learning-rate schedule is
recomputed from the new total (its warm-up, derived from the total, moves with it). Every other
difference makes it a different run."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

from zoo_data import DataSource

from .._errors import CheckpointMismatchError
from ..settings import TrainConfig, declared_identity


def jsonable(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples as lists, the rest as strings)."""
    return json.loads(json.dumps(value, default=str))


def run_identity(
    config: TrainConfig, data: DataSource, run_info: dict[str, Any] | None
) -> dict[str, Any]:
    """The settings that change what is computed, the data, and the caller's facts."""
    return jsonable(
        {"config": config.identity(), "data": data.describe(), "run_info": run_info or {}}
    )


def differences(saved: Any, now: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted key, saved value, current value)`` for every leaf that differs."""
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for key in sorted(set(saved) | set(now)):
            out += differences(saved.get(key), now.get(key), f"{prefix}{key}.")
        return out
    return [] if saved == now else [(prefix[:-1], saved, now)]


def _schedule(key: str) -> bool:
    """Whether the identity key ``config.…`` is a setting of the run's schedule."""
    part, _, path = key.partition(".")
    return part == "config" and declared_identity(TrainConfig, path.split(".")) == "schedule"


def steps_change(saved: dict[str, Any] | None, now: dict[str, Any]) -> dict[str, int] | None:
    """``{"from": old, "to": new}`` when the run identities differ in their total of steps."""
    old = ((saved or {}).get("config") or {}).get("steps")
    new = (now.get("config") or {}).get("steps")
    if old is None or new is None or old == new:
        return None
    return {"from": int(old), "to": int(new)}


def run_changes(saved: dict[str, Any] | None, now: dict[str, Any]) -> list[str]:
    """The differences that make ``now`` a different run than ``saved`` (``"key: a → b"``);
    the total of steps and what follows from it are not among them."""
    return [
        f"{key}: {old!r} → {new!r}"
        for key, old, new in differences(saved, now)
        if not _schedule(key)
    ]


def resume_check(
    identity: dict[str, Any], config: TrainConfig, directory: pathlib.Path
) -> Callable[[dict[str, Any]], None]:
    """The check a checkpoint's metadata must pass to be resumed by this run.

    Raises (when called):
        CheckpointMismatchError: the checkpoints come from a different run, naming up to four
            differences.
    """

    def check(meta: dict[str, Any]) -> None:
        diffs = run_changes(meta.get("identity"), identity)
        if meta.get("step", 0) > config.steps:
            diffs.append(f"steps: checkpoint {meta.get('step')} is past {config.steps}")
        if diffs:
            shown = "; ".join(diffs[:4]) + ("; …" if len(diffs) > 4 else "")
            raise CheckpointMismatchError(
                f"The checkpoints in {directory} come from a different run ({shown}); "
                "resume with the same settings or choose a new output directory."
            )

    return check


def mesh_change(saved: dict[str, Any] | None, now: dict[str, Any]) -> str | None:
    """``"data=1 fsdp=4 tensor=1 (4 devices) → …"`` when the run resumes on another mesh."""
    if not saved:
        return None
    saved = {"processes": 1, **saved}  # recorded before runs of several processes existed
    if all(saved[k] == now[k] for k in ("axes", "devices", "processes")):
        return None

    def show(m: dict[str, Any]) -> str:
        axes = " ".join(f"{k}={v}" for k, v in m["axes"].items())
        n, p = m["devices"], m["processes"]
        where = f"{n} device{'s' if n != 1 else ''}"
        return f"{axes} ({where}{f' in {p} processes' if p != 1 else ''})"

    return f"{show(saved)} → {show(now)}"
