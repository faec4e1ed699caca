"""One tile of ``fused_xla``: a few tokens' logits against the device's share of the
vocabulary (the whole of it off a mesh), the statistics that make their log normaliser, and
the gradients of the hidden states and the head from those logits. The loops over tiles are in
``_fused_vjp`` (per-token results) and ``_fused_loss`` (the summed loss).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._partition import Axes
from ._logits import spec_logits
from ._spec import CrossEntropySpec


def _is_target(logits: jax.Array, targets: jax.Array, offset: jax.Array) -> jax.Array:
    # A comparison with an iota, not a gather: it partitions like the logits when the
    # vocabulary is sharded, and a target that is not a vocabulary id (-100) matches nothing.
    vocab = jax.lax.broadcasted_iota(jnp.int32, logits.shape, 1) + offset
    return vocab == targets[:, None]


def tile_logits(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    offset: jax.Array,
    vocab_axes: Axes,
    spec: CrossEntropySpec,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """``(logits, ce, log_z)`` of the tile's tokens ``hidden [n, D]`` (``head`` already in
    ``hidden``'s dtype, its vocabulary from id ``offset``), whether or not they count: float32
    ``[n, V']`` and ``[n]`` each. Over a sharded vocabulary (``vocab_axes``) the devices'
    maxima, sums and target logits are gathered once and combined."""
    logits = spec_logits(hidden, head, spec)
    top = jnp.max(logits, axis=-1)
    total = jnp.sum(jnp.exp(logits - top[:, None]), axis=-1)
    target = jnp.sum(jnp.where(_is_target(logits, targets, offset), logits, 0.0), axis=-1)
    if vocab_axes:
        # [shards, 3, n]: one collective for the three.
        gathered = jax.lax.all_gather(jnp.stack([top, total, target]), vocab_axes)
        tops = gathered[:, 0]
        top = jnp.max(tops, axis=0)
        total = jnp.sum(gathered[:, 1] * jnp.exp(tops - top), axis=0)
        target = jnp.sum(gathered[:, 2], axis=0)
    log_z = top + jnp.log(total)
    return logits, log_z - target, log_z


def tile_dlogits(
    logits: jax.Array,
    targets: jax.Array,
    offset: jax.Array,
    log_z: jax.Array,
    g_ce: jax.Array,
    g_log_z: jax.Array,
    counts: jax.Array,
    spec: CrossEntropySpec,
) -> jax.Array:
    """The gradient of the tile's logits ``[n, V']`` (float32) for the cotangents ``g_ce`` and
    ``g_log_z`` ``[n]`` of its ``ce`` and ``log_z``.

    ``d logits = softmax · (g_ce + g_log_z) − onehot(target) · g_ce``, over the temperature
    ``t`` and times the soft cap's derivative ``1 − (t · logits / c)²``, and zero for the
    tokens that do not count.
    """
    probs = jnp.exp(logits - log_z[:, None])
    d = probs * (g_ce + g_log_z)[:, None] - jnp.where(
        _is_target(logits, targets, offset), g_ce[:, None], 0.0
    )
    t, cap = spec.temperature, spec.soft_cap
    if t != 1.0:
        d = d / t
    if cap is not None:
        d = d * (1.0 - jnp.square(logits * (t / cap)))
    return jnp.where(counts[:, None], d, 0.0)


def tile_grads(
    d_logits: jax.Array, hidden: jax.Array, head: jax.Array, spec: CrossEntropySpec
) -> tuple[jax.Array, jax.Array]:
    """``(d hidden [n, D], d head)`` in float32, the head's in its layout (``[D, V']`` or
    ``[V', D]``), from the gradient of the tile's logits (over a sharded vocabulary, ``d
    hidden`` is this device's share of the sum)."""
    # In the computation's dtype for the two products, as autodiff of the plain path does.
    d = d_logits.astype(hidden.dtype)
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
