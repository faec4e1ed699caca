"""What makes a run the same run: its identity, compared when it resumes, and the changes
that are allowed (the mesh it is laid out on, a new total of steps)."""

from __future__ import annotations

import json
import pathlib
from collections.abc import Callable
from typing import Any

from zoo_data import DataSource

from .._config import RESUME_SAFE_FIELDS, TrainConfig
from .._errors import CheckpointMismatchError
from .._extension import run_changes


def jsonable(value: Any) -> Any:
    """``value`` as JSON would give it back (tuples as lists, the rest as strings)."""
    return json.loads(json.dumps(value, default=str))


def run_identity(
    config: TrainConfig, data: DataSource, run_info: dict[str, Any] | None
) -> dict[str, Any]:
    """The settings that change what is computed, the data, and the caller's facts."""
    settings = {k: v for k, v in config.to_dict().items() if k not in RESUME_SAFE_FIELDS}
    return jsonable({"config": settings, "data": data.describe(), "run_info": run_info or {}})


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
