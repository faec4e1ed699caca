"""``recurrent``: the gated delta rule token by token, in float32 under ``lax.scan``; the
definition every other kernel is checked against.

For each value head, with ``S`` the ``[Dk, Dv]`` state (``initial_state``, else zeros)::

    S = exp(g_t) * S                       # decay; S = 0 instead where a document starts
    S = S + beta_t * k_t (v_t - S^T k_t)^T  # the delta rule: write the correction only
    o_t = S^T q_t

with ``q_t`` (scaled) and ``k_t`` as :func:`prepare_qk` gives them. Autodiff keeps every
step's state, so memory grows with ``T * Dk * Dv``: a reference for short sequences, opt-in only.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._kernel import LinearAttentionKernel
from ._prepare import document_starts, prepare_qk
from ._spec import LinearAttentionSpec


def recurrence(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    g: jax.Array,
    beta: jax.Array,
    starts: jax.Array,
    state: jax.Array,
) -> tuple[jax.Array, jax.Array]:
    """The rule over float32 ``q, k [B, T, N, Dk]``, ``v [B, T, N, Dv]``, ``g, beta [B, T,
    N]``, bool ``starts [B, T]`` and ``state [B, N, Dk, Dv]``: ``(out [B, T, N, Dv], final
    state)``."""

    def step(s: jax.Array, x: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        q_t, k_t, v_t, g_t, b_t, start = x
        decay = jnp.where(start[:, None], 0.0, jnp.exp(g_t))
        s = s * decay[..., None, None]
        read = jnp.einsum("bnkv,bnk->bnv", s, k_t)
        s = s + jnp.einsum("bnk,bnv->bnkv", k_t, b_t[..., None] * (v_t - read))
        return s, jnp.einsum("bnkv,bnk->bnv", s, q_t)

    xs = tuple(jnp.moveaxis(a, 1, 0) for a in (q, k, v, g, beta, starts))
    final, out = jax.lax.scan(step, state, xs)
    return jnp.moveaxis(out, 0, 1), final


class RecurrentKernel(LinearAttentionKernel):
    """The token-by-token recurrence; any shape, any floating dtype, any platform."""

    name = "recurrent"
    priority = 0

    @property
    def platforms(self) -> tuple[str, ...]:
        # Opt-in everywhere: in no platform's default order (listings say so).
        return ()

    def check(self, spec: LinearAttentionSpec) -> str | None:
        return None

    def __call__(
        self,
        query: jax.Array,
        key: jax.Array,
        value: jax.Array,
        log_decay: jax.Array,
        beta: jax.Array,
        segment_ids: jax.Array | None,
        initial_state: jax.Array | None,
        spec: LinearAttentionSpec,
    ) -> tuple[jax.Array, jax.Array]:
        q, k = prepare_qk(query, key, spec)
        b, n, dk, dv = spec.batch, spec.num_heads, spec.key_dim, spec.value_dim
        state = jnp.zeros((b, n, dk, dv), jnp.float32) if initial_state is None else initial_state
        out, final = recurrence(
            q,
            k,
            value.astype(jnp.float32),
            log_decay.astype(jnp.float32),
            beta.astype(jnp.float32),
            document_starts(segment_ids, b, spec.seq_len),
            state.astype(jnp.float32),
        )
        return out.astype(value.dtype), final


KERNEL = RecurrentKernel()
