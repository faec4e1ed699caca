"""Log-probabilities of the sides of packed pairs: per token, then summed per side.

In a row of pairs, segment ``2k - 1`` is the chosen side of the row's ``k``-th pair and segment
``2k`` its rejected side (:mod:`zoo_data.store._reader`); the attention contract keeps
segments apart and positions restart in each, so a side's log-probability is the same however
many pairs share its row.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PyTree

from .._loss import model_token_losses
from .._precision import cast_floating


def side_sums(
    values: Float[Array, "B T"], segment_ids: Int[Array, "B T"]
) -> tuple[Float[Array, "B K"], Float[Array, "B K"]]:
    """``values`` summed over each side of each pair of each row: ``(chosen, rejected)``, each
    ``[B, (T + 1) // 2]`` (slot ``k`` is the row's ``k+1``-th pair; 0 where there is none)."""
    t = values.shape[1]
    per_segment = jax.vmap(lambda v, s: jax.ops.segment_sum(v, s, num_segments=t + 2))(
        values, segment_ids
    )
    k = (t + 1) // 2
    return per_segment[:, 1 : 2 * k : 2], per_segment[:, 2 : 2 * k + 1 : 2]


def token_logps(
    model: PyTree, batch: dict[str, Array], compute_dtype: jnp.dtype | None = None
) -> Float[Array, "B T"]:
    """Each target's log-probability under ``model`` times its loss weight, float32 ``[B, T]``
    (0 off the responses), through the fused cross-entropy contract for a zoo model. No dropout key is passed: the policy and its reference are compared
    as the deterministic models they are (TRL turns dropout off for the same reason)."""
    if compute_dtype is not None:
        model = cast_floating(model, compute_dtype)
    ce, _, _ = model_token_losses(
        model, batch, positions=batch["positions"], segment_ids=batch["segment_ids"]
    )
    return -ce * batch["loss_mask"].astype(jnp.float32)
