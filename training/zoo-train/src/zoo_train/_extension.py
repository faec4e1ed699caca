"""Resuming a run with a new total of steps: what may change, and how it is recorded.

Raising ``steps`` continues the same run: the model, data, seed and batch stay, and only the
learning-rate schedule is recomputed from the new total (its warm-up, derived from the total,
moves with it). Every other difference makes it a different run.
"""

from __future__ import annotations

from typing import Any

# Identity keys that follow the total number of steps.
SCHEDULE_KEYS = ("config.steps", "config.optimizer.warmup_steps")


def differences(saved: Any, now: Any, prefix: str = "") -> list[tuple[str, Any, Any]]:
    """``(dotted key, saved value, current value)`` for every leaf that differs."""
    if isinstance(saved, dict) and isinstance(now, dict):
        out = []
        for key in sorted(set(saved) | set(now)):
            out += differences(saved.get(key), now.get(key), f"{prefix}{key}.")
        return out
    return [] if saved == now else [(prefix[:-1], saved, now)]


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
        if key not in SCHEDULE_KEYS
    ]
