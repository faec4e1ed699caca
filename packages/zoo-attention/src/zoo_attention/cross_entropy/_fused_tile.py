"""One tile of ``fused_xla``: a few tokens' logits against the whole vocabulary, forward and
backward. The loop over tiles and the custom VJP are in ``_fused_vjp``."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._logits import spec_logits
from ._spec import CrossEntropySpec


def _is_target(logits: jax.Array, targets: jax.Array) -> jax.Array:
    # A comparison with an iota, not a gather: it partitions like the logits when the
    # vocabulary is sharded, and a target that is not a vocabulary id (-100) matches nothing.
    vocab = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1)
    return vocab == targets[:, None]


def tile_forward(
    hidden: jax.Array, head: jax.Array, targets: jax.Array, spec: CrossEntropySpec
) -> tuple[jax.Array, jax.Array]:
    """``(ce, log_z)`` float32 ``[n]`` of the tile's tokens ``hidden [n, D]`` (``head`` already
    in ``hidden``'s dtype), whether or not they count."""
    logits = spec_logits(hidden, head, spec)
    log_z = jax.nn.logsumexp(logits, axis=-1)
    target_logit = jnp.sum(jnp.where(_is_target(logits, targets), logits, 0.0), axis=-1)
    return log_z - target_logit, log_z


def tile_backward(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    counts: jax.Array,
    log_z: jax.Array,
    g_ce: jax.Array,
    g_log_z: jax.Array,
    spec: CrossEntropySpec,
) -> tuple[jax.Array, jax.Array]:
    """The tile's gradients: ``(d hidden [n, D], d head)`` in float32, the head's in its
    layout (``[D, V]`` or ``[V, D]``), from the logits recomputed.

    ``d logits = softmax · (g_ce + g_log_z) − onehot(target) · g_ce``, over the temperature
    ``t`` and times the soft cap's derivative ``1 − (t · logits / c)²``, and zero for the
    tokens that do not count.
    """
    logits = spec_logits(hidden, head, spec)
    probs = jnp.exp(logits - log_z[:, None])
    d = probs * (g_ce + g_log_z)[:, None] - jnp.where(
        _is_target(logits, targets), g_ce[:, None], 0.0
    )
    t, cap = spec.temperature, spec.soft_cap
    if t != 1.0:
        d = d / t
    if cap is not None:
        d = d * (1.0 - jnp.square(logits * (t / cap)))
    # In the computation's dtype for the two products, as autodiff of the plain path does.
    d = jnp.where(counts[:, None], d, 0.0).astype(hidden.dtype)
    f32 = jnp.float32
    if spec.head_layout == "dv":  # head [D, V]
        d_hidden = jax.lax.dot_general(
            d, head, (((1,), (1,)), ((), ())), preferred_element_type=f32
        )
        d_head = jax.lax.dot_general(
            hidden, d, (((0,), (0,)), ((), ())), preferred_element_type=f32
        )
    else:  # head [V, D]
        d_hidden = jax.lax.dot_general(
            d, head, (((1,), (0,)), ((), ())), preferred_element_type=f32
        )
        d_head = jax.lax.dot_general(
            d, hidden, (((0,), (0,)), ((), ())), preferred_element_type=f32
        )
    return d_hidden, d_head
