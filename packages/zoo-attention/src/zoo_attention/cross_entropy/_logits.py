"""``logits``: the reference kernel. The whole ``[N, V]`` float32 logits, then cross entropy.

What a language model's loss computed before the contract: one matmul to float32 logits, the
soft cap, then each token's log normaliser and cross entropy in float32, every platform. Its
memory is the logits (kept for the backward pass), so the fused kernels are preferred.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._kernel import CrossEntropyKernel
from ._spec import CrossEntropySpec, HeadLayout


def token_losses(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    """Per-token cross entropy and ``log Z`` of ``logits [..., V]`` in float32 (``[...]``
    each), for integer ``targets [...]``.

    The gradient with respect to ``logits`` is ``softmax · (g_ce + g_logz) − onehot · g_ce``,
    computed in one elementwise pass (plain autodiff scatters into a zeroed ``[B, T, V]``
    array and adds it, two more passes over the largest activation of a language model).
    """
    return _token_losses(logits.astype(jnp.float32), targets)


@jax.custom_vjp
def _token_losses(logits: jax.Array, targets: jax.Array) -> tuple[jax.Array, jax.Array]:
    log_z = jax.nn.logsumexp(logits, axis=-1)
    target_logit = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    return log_z - target_logit, log_z


def _token_losses_fwd(
    logits: jax.Array, targets: jax.Array
) -> tuple[tuple[jax.Array, jax.Array], tuple]:
    ce, log_z = _token_losses(logits, targets)
    return (ce, log_z), (logits, targets, log_z)


def _token_losses_bwd(
    residuals: tuple, cotangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, None]:
    logits, targets, log_z = residuals
    g_ce, g_log_z = cotangents
    probs = jnp.exp(logits - log_z[..., None])
    vocab = jax.lax.broadcasted_iota(targets.dtype, logits.shape, logits.ndim - 1)
    target_term = jnp.where(vocab == targets[..., None], g_ce[..., None], 0.0)
    return probs * (g_ce + g_log_z)[..., None] - target_term, None


_token_losses.defvjp(_token_losses_fwd, _token_losses_bwd)


def head_logits(
    hidden: jax.Array,
    head: jax.Array,
    *,
    head_layout: HeadLayout,
    soft_cap: float | None,
    temperature: float = 1.0,
) -> jax.Array:
    """``cap(hidden @ head) / temperature``: float32 logits ``[..., V]`` of ``hidden [..., D]``
    for either layout of the head (cast to ``hidden``'s dtype; the contraction is expressed on
    the head as laid out, never on a transposed copy)."""
    w = head.astype(hidden.dtype)
    contract = 0 if head_layout == "dv" else 1
    logits = jax.lax.dot_general(
        hidden, w, (((hidden.ndim - 1,), (contract,)), ((), ())), preferred_element_type=jnp.float32
    )
    if soft_cap is not None:
        logits = soft_cap * jnp.tanh(logits / soft_cap)
    return logits if temperature == 1.0 else logits / temperature


def spec_logits(hidden: jax.Array, head: jax.Array, spec: CrossEntropySpec) -> jax.Array:
    """:func:`head_logits` with the layout, soft cap and temperature of ``spec``."""
    return head_logits(
        hidden,
        head,
        head_layout=spec.head_layout,
        soft_cap=spec.soft_cap,
        temperature=spec.temperature,
    )


class LogitsKernel(CrossEntropyKernel):
    """The reference: ``[N, V]`` float32 logits, then cross entropy; every feature, shape and
    platform."""

    name = "logits"
    priority = 0

    def check(self, spec: CrossEntropySpec) -> str | None:
        return None

    def __call__(
        self,
        hidden: jax.Array,
        head: jax.Array,
        targets: jax.Array,
        loss_mask: jax.Array | None,
        spec: CrossEntropySpec,
    ) -> tuple[jax.Array, jax.Array]:
        logits = spec_logits(hidden, head, spec)
        if loss_mask is None:
            return token_losses(logits, targets)
        # A token that does not count may carry any target (-100, say): read a valid one.
        ce, log_z = token_losses(logits, jnp.where(loss_mask, targets, 0))
        return jnp.where(loss_mask, ce, 0.0), jnp.where(loss_mask, log_z, 0.0)


KERNEL = LogitsKernel()
