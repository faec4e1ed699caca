"""Torn and unreadable steps: found before Orbax lists the directory, and moved aside.

Orbax parses every step's small JSON files (its commit record, ``metrics/``) whenever it lists
the directory, so one torn file anywhere would stop it listing any step. A writer moves such a
step aside first; unreadable steps newer than the one restored are moved aside too, so the run
can save those steps again. Nothing is ever deleted: steps go to ``<directory>-unreadable/``.
"""

from __future__ import annotations

import json
import pathlib
import shutil
import time

from .._errors import NoUsableCheckpointError
from ._reports import brief

# The JSON files of a step that Orbax parses to list steps (its commit record, the metrics that
# rank them). A torn ``meta/`` or array is found when that step is restored.
_JSON_PIECES = ("_CHECKPOINT_METADATA", "metrics/metrics")


def step_dirs(directory: pathlib.Path) -> list[pathlib.Path]:
    """The committed step directories under ``directory``."""
    if not directory.is_dir():
        return []
    return [p for p in directory.iterdir() if p.name.isdigit() and p.is_dir()]


def torn_steps(directory: pathlib.Path) -> dict[int, str]:
    """``{step: reason}`` for the committed steps under ``directory`` with a JSON piece that
    cannot be read or parsed (absent pieces are fine: unevaluated steps have no metrics)."""
    torn: dict[int, str] = {}
    for step_dir in step_dirs(directory):
        for piece in _JSON_PIECES:
            path = step_dir / piece
            try:
                json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                continue
            except (OSError, ValueError) as e:  # JSONDecodeError and UnicodeDecodeError included
                torn[int(step_dir.name)] = f"{piece}: {brief(e)}"
                break
    return torn


def _eval_loss(step_dir: pathlib.Path) -> float | None:
    try:
        return float(json.loads((step_dir / "metrics/metrics").read_text())["eval_loss"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def unkept_steps(directory: pathlib.Path, keep: int) -> list[int]:
    """Committed steps that rotation should have deleted: neither among the ``keep`` newest
    nor the one with the lowest eval loss. After a successful rotation there are none, so a
    failed write that leaves one behind was the deletion of it."""
    dirs = sorted(step_dirs(directory), key=lambda p: int(p.name))
    kept = {int(p.name) for p in dirs[-keep:]}
    losses = [(loss, int(p.name)) for p in dirs if (loss := _eval_loss(p)) is not None]
    if losses:
        kept.add(min(losses)[1])
    return [int(p.name) for p in dirs if int(p.name) not in kept]


def refuse_if_all_torn(directory: pathlib.Path, torn: dict[int, str]) -> None:
    """Raise :class:`NoUsableCheckpointError` when every step of ``directory`` is torn."""
    if torn and len(torn) == len(step_dirs(directory)):
        raise NoUsableCheckpointError(
            f"None of the checkpoints {sorted(torn)} in {directory} can be read "
            f"({'; '.join(f'{s}: {r}' for s, r in sorted(torn.items()))}); move them "
            "away or pick another output directory (they are never overwritten)."
        )


def move_aside(directory: pathlib.Path, step: int) -> tuple[pathlib.Path, pathlib.Path] | None:
    """Move step ``step`` to ``<directory>-unreadable/<step>-<time>``; ``(from, to)``, or
    ``None`` if it is gone."""
    src = directory / str(step)
    if not src.exists():
        return None
    aside = directory.with_name(directory.name + "-unreadable")
    aside.mkdir(exist_ok=True)
    dst = aside / f"{step}-{time.strftime('%Y%m%d-%H%M%S')}"
    shutil.move(str(src), str(dst))
    return src, dst
