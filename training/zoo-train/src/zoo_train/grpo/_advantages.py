"""Advantages of sampled completions: each reward relative to its group's, on the host.

Rewards arrive on the host from Python reward functions, one row per completion, the
``num_generations`` completions of a prompt consecutive. A function may return ``None`` for a
completion it does not apply to (NaN here): it is left out of that function's mean, and a
completion no function scored is left out of its group's statistics and gets advantage 0,
as TRL does.
"""

from __future__ import annotations

import warnings

import numpy as np
from jaxtyping import Float

from ..settings import SCALINGS


def combined_rewards(
    per_function: Float[np.ndarray, "N F"], weights: Float[np.ndarray, " F"]
) -> Float[np.ndarray, " N"]:
    """Each completion's reward: the weighted sum of its functions' rewards, NaN entries left
    out; NaN where no function scored it (inf or NaN also where weights so large overflow)."""
    per_function = np.asarray(per_function, np.float64)
    scored = ~np.isnan(per_function)
    with np.errstate(over="ignore", invalid="ignore"):  # an overflow is the caller's to refuse
        total = np.nansum(per_function * np.asarray(weights, np.float64)[None, :], axis=1)
    return np.where(scored.any(axis=1), total, np.nan)


def _nanstd(x: np.ndarray, axis: int | None) -> np.ndarray:
    """Standard deviation ignoring NaN, with Bessel's correction (NaN below two values)."""
    count = np.sum(~np.isnan(x), axis=axis, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a group no function scored: NaN
        mean = np.nanmean(x, axis=axis, keepdims=True)
        var = np.nanmean((x - mean) ** 2, axis=axis, keepdims=True)
        var = np.where(count > 1, var * count / np.maximum(count - 1, 1), np.nan)
    return np.sqrt(var)


def group_advantages(
    rewards: Float[np.ndarray, " N"], num_generations: int, scale_rewards: str = "group"
) -> tuple[Float[np.ndarray, " N"], Float[np.ndarray, " N"]]:
    """``(advantages, group_std)``, float32 ``[N]``: each reward minus its group's mean,
    divided by the group's (or the batch's) standard deviation plus ``1e-4`` unless
    ``scale_rewards="none"``; 0 where the reward is NaN. ``group_std`` is the deviation each
    completion was scaled by (for ``frac_reward_zero_std``).

    Args:
        rewards: ``[N]`` with ``N`` a multiple of ``num_generations``; a group's completions
            are consecutive.
        num_generations: completions per group.
        scale_rewards: ``"group"``, ``"batch"`` or ``"none"``.
    """
    if scale_rewards not in SCALINGS:
        raise ValueError(f"scale_rewards must be one of {SCALINGS}, got {scale_rewards!r}.")
    r = np.asarray(rewards, np.float64)
    if r.ndim != 1 or r.shape[0] % num_generations:
        raise ValueError(
            f"rewards must be [N] with N a multiple of num_generations={num_generations}, got "
            f"shape {r.shape}."
        )
    groups = r.reshape(-1, num_generations)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a group no function scored: NaN
        mean = np.nanmean(groups, axis=1, keepdims=True)
    if scale_rewards == "batch":
        std = np.broadcast_to(_nanstd(r, None).reshape(1, 1), groups.shape)
    else:
        std = np.broadcast_to(_nanstd(groups, 1), groups.shape)
    advantages = groups - mean
    if scale_rewards != "none":
        advantages = advantages / (std + 1e-4)
    advantages = np.nan_to_num(advantages, nan=0.0).reshape(-1)
    return advantages.astype(np.float32), np.asarray(std, np.float32).reshape(-1)
