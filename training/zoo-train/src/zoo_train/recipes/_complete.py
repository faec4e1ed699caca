"""A finished run asked again for the steps it already took: found before anything is built, so
the command says so and leaves every file of the run as it was."""

from __future__ import annotations

import json
import pathlib
from typing import Any

from ..settings import RunSettings, flat
from ._export_record import read_export

# Settings that do not change what a finished run computed: how it was shown, saved, tracked
# and laid out, and where its files are named from. A difference in any other setting goes the
# usual way (refused as another run, or an extension).
_FREE = frozenset(
    {
        "out",
        "data_cache",
        "stop_at",
        "save_every",
        "eval_every",
        "eval_batches",
        "log_every",
        "keep",
        "progress",
        "profile",
        "trackers",
        "sample_tokens",
        "prompt",
        "temperature",
        "attention.implementation",
        "attention.require",
        "overwrite",
        "export_hf",  # checked on its own: the export must already hold the last step
    }
)
_FREE_TABLES = ("mesh.", "wandb.")


def _compared(settings: dict[str, Any], *, epochs: bool) -> dict[str, Any]:
    """The settings that make the run what it is (``epochs``: the steps follow from them)."""
    free = _FREE | ({"steps"} if epochs else set())
    return {k: v for k, v in settings.items() if k not in free and not k.startswith(_FREE_TABLES)}


def _last_settings(out: pathlib.Path) -> dict[str, Any] | None:
    """The settings recorded by the run's last start (or resume) record."""
    from ..loop import METRICS_FILE, read_metrics

    starts = [r for r in read_metrics(out / METRICS_FILE) if r.get("event") in ("start", "resume")]
    settings = starts[-1].get("settings") if starts else None
    return settings if isinstance(settings, dict) else None


def complete_step(s: RunSettings) -> int | None:
    """The step at which the run in ``s.out`` is complete, when it is and ``s`` asks it for no
    more (the same settings and steps, no export it lacks); else ``None`` (train as usual)."""
    from .._run_directory import checkpoint_steps, read_metas

    out = pathlib.Path(s.out)
    committed = checkpoint_steps(out)
    saved = _last_settings(out)
    if not committed or saved is None:
        return None
    step = committed[-1]
    epochs = s.epochs is not None
    if saved.get("steps") != step or (not epochs and s.steps != step):
        return None
    now = json.loads(json.dumps(flat(s), default=str))  # as the record holds it
    if _compared(now, epochs=epochs) != _compared(saved, epochs=epochs):
        return None
    export = getattr(s, "export_hf", None)
    if export is not None:  # only when that export already holds the last step
        record = read_export(out)
        if record is None or record.step != step or record.path != pathlib.Path(export).resolve():
            return None
        if not (record.path / "config.json").is_file():
            return None
    metas = read_metas(out)  # the newest checkpoint must be readable to be the run's end
    identity = (metas.get(step) or {}).get("identity") or {}
    if (identity.get("config") or {}).get("steps") != step:
        return None
    return step


def say_complete(out: pathlib.Path, step: int, s: RunSettings) -> None:
    """The line for a run complete at ``step``: nothing to do, and how to extend it."""
    from ._steps import say

    say(
        f"zoo: the run in {out} was already complete at step {step}; nothing to train (raise "
        f"--{'epochs' if s.epochs is not None else 'steps'} to extend it)."
    )
