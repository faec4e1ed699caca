"""Where a fine-tuning run exported its model, so that extending the run exports again there
instead of leaving an export older than the run."""

from __future__ import annotations

import dataclasses
import json
import pathlib

#: In the run directory: the last export's directory and the step it holds.
EXPORT_RECORD = "export.json"


@dataclasses.dataclass(frozen=True)
class ExportRecord:
    """The run's last export: its directory (absolute) and the step it holds."""

    path: pathlib.Path
    step: int


def read_export(out: pathlib.Path) -> ExportRecord | None:
    """The export recorded in the run directory ``out`` (``None``: none, or unreadable)."""
    try:
        data = json.loads((out / EXPORT_RECORD).read_text())
        return ExportRecord(pathlib.Path(data["path"]), int(data["step"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def write_export(out: pathlib.Path, target: str | pathlib.Path, step: int) -> None:
    """Record that ``target`` holds step ``step`` of the run in ``out``."""
    record = {"path": str(pathlib.Path(target).resolve()), "step": int(step)}
    (out / EXPORT_RECORD).write_text(json.dumps(record) + "\n")


def is_own_export(out: pathlib.Path, target: str | pathlib.Path) -> bool:
    """Whether ``target`` is where the run in ``out`` exported before (replacing it needs no
    ``--overwrite``)."""
    record = read_export(out)
    return record is not None and record.path == pathlib.Path(target).resolve()
