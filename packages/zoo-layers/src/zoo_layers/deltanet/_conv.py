"""The short causal depthwise convolution in front of a gated DeltaNet's recurrence.

Each channel is filtered over its last ``W`` inputs (Qwen3.5: ``W = 4``), then ``silu``:
``out_t = silu(sum_j weight[:, j] * x[t - (W - 1) + j])``, the layout of ``torch.nn.Conv1d``
with ``groups = channels`` and ``padding = W - 1``. Packed documents do not see each other: a
tap that reaches into the previous document reads zero, as the first token of a sequence does.
For generation the last ``W - 1`` inputs are the convolution's state.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int


def causal_conv(
    x: Float[Array, "B T C"],
    weight: Float[Array, "C W"],
    segment_ids: Int[Array, "B T"] | None = None,
    history: Float[Array, "B W1 C"] | None = None,
) -> Float[Array, "B T C"]:
    """``silu`` of the causal depthwise convolution of ``x`` with ``weight`` (in ``x``'s
    dtype, accumulated in float32). ``history``: the ``W - 1`` inputs before ``x`` (zeros when
    ``None``); ``segment_ids``: taps never cross a change of id (not combined with history)."""
    b, t, c = x.shape
    width = weight.shape[-1]
    before = jnp.zeros((b, width - 1, c), x.dtype) if history is None else history.astype(x.dtype)
    full = jnp.concatenate([before, x], axis=1).astype(jnp.float32)
    w = weight.astype(jnp.float32)
    acc = jnp.zeros((b, t, c), jnp.float32)
    for j in range(width):
        lag = width - 1 - j  # tap j reads the input `lag` tokens back
        tap = full[:, j : j + t]
        if segment_ids is not None and lag:
            back = jnp.pad(segment_ids, ((0, 0), (lag, 0)), constant_values=-1)[:, :t]
            tap = jnp.where((back == segment_ids)[..., None], tap, 0.0)
        acc = acc + tap * w[:, j]
    return jax.nn.silu(acc).astype(x.dtype)


def conv_history(
    x: Float[Array, "B T C"], history: Float[Array, "B W1 C"]
) -> Float[Array, "B W1 C"]:
    """The convolution's state after ``x``: the last ``W - 1`` inputs of ``history`` then
    ``x``."""
    keep = history.shape[1]
    if keep == 0:
        return history
    return jnp.concatenate([history, x.astype(history.dtype)], axis=1)[:, -keep:]
