"""``chunked_xla``: the gated delta rule chunkwise-parallel in plain XLA (every platform), the
fallback every default order ends with.

The gated DeltaNet paper's form (Yang, Kautz, Hatamizadeh 2024), as transformers'
``torch_chunk_gated_delta_rule`` computes it: the sequence is cut into chunks of ``C`` tokens
(64; a shorter sequence is one chunk). Within a chunk the ``C`` rank-one updates are folded into
one triangular system (the WY / UT representation)::

    L = strict_lower((beta k) k^T * D)        D[i, j] = exp(cum_i - cum_j), cum = cumsum(g)
    u = (I + L)^-1 (beta v)                   the values to write, before the old state
    w = (I + L)^-1 (beta k * exp(cum))        how the old state shows through them

all chunks at once (batched matmuls and triangular solves); then one ``lax.scan`` over the
chunks carries the ``[Dk, Dv]`` state::

    v' = u - w S                              o = (q * exp(cum)) S + ((q k^T) * D) v'
    S  = exp(cum_last) S + (k * exp(cum_last - cum))^T v'

Packed documents mask ``D`` to pairs in one document, the state's reads and writes to the
tokens of the document it belongs to, and its carry to chunks no document starts in.

Memory is linear in ``T``: plain autodiff keeps, per chunk, the ``[C, C]`` matrices and the
incoming state (``T * (3C + Dk) `` floats per head for ``Dk = Dv``), not a state per token.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ._kernel import LinearAttentionKernel
from ._prepare import prepare_qk
from ._spec import LinearAttentionSpec

#: Tokens per chunk (the gated DeltaNet paper's and transformers'). A sequence shorter than
#: this is one chunk of its own length.
CHUNK = 64


def chunk_size(seq_len: int) -> int:
    """The chunk length for a sequence of ``seq_len`` tokens: :data:`CHUNK`, or the sequence
    itself when shorter (a decoding step is one chunk of one token, with no padding)."""
    return min(CHUNK, seq_len)


def _chunks(x: jax.Array, chunk: int) -> jax.Array:
    """``[B, T, N, ...]`` → ``[B, N, T / C, C, ...]``."""
    b, t, n = x.shape[:3]
    x = jnp.moveaxis(x, 2, 1)
    return x.reshape(b, n, t // chunk, chunk, *x.shape[3:])


def segment_masks(segment_ids: jax.Array, chunk: int) -> tuple[jax.Array, jax.Array, jax.Array]:
    """The chunks' document masks, from int ``[B, T]`` ids (``T`` a multiple of ``chunk``):
    ``reads [B, nc, C]`` (the token's document is the one the chunk's incoming state belongs
    to), ``writes [B, nc, C]`` (the token's document is the chunk's last, whose state goes out)
    and ``carry [B, nc]`` (no document starts in the chunk, so the incoming state goes on)."""
    b, t = segment_ids.shape
    s = segment_ids.reshape(b, t // chunk, chunk)
    # The incoming state is the previous token's document: the chunk before's last, and for
    # the first chunk the first token's own (the initial state continues it).
    prev = jnp.concatenate([s[:, :1, 0], s[:, :-1, -1]], axis=1)
    return s == prev[..., None], s == s[..., -1:], prev == s[..., -1]


def chunked_rule(
    q: jax.Array,
    k: jax.Array,
    v: jax.Array,
    g: jax.Array,
    beta: jax.Array,
    segment_ids: jax.Array | None,
    state: jax.Array,
    chunk: int,
) -> tuple[jax.Array, jax.Array]:
    """The chunked rule over float32 ``q`` (scaled), ``k [B, T, N, Dk]``, ``v [B, T, N, Dv]``,
    ``g, beta [B, T, N]``, optional int32 ``segment_ids [B, T]`` and ``state [B, N, Dk, Dv]``,
    ``T`` a multiple of ``chunk``: ``(out [B, T, N, Dv] float32, final state)``."""
    b, t, n, dv = v.shape
    q, k, v = (_chunks(x, chunk) for x in (q, k, v))
    g, beta = (_chunks(x, chunk) for x in (g, beta))
    cum = jnp.cumsum(g, axis=-1)  # [B, N, nc, C]
    index = jnp.arange(chunk)
    lower = index[:, None] >= index[None, :]
    strict = index[:, None] > index[None, :]
    state_decay = jnp.exp(cum[..., -1])  # [B, N, nc]
    reads_decay = jnp.exp(cum)
    writes_decay = jnp.exp(cum[..., -1:] - cum)
    if segment_ids is not None:
        reads, writes, carry = (m[:, None] for m in segment_masks(segment_ids, chunk))
        s = segment_ids.reshape(b, 1, -1, chunk)
        lower = lower & (s[..., :, None] == s[..., None, :])
        state_decay = jnp.where(carry, state_decay, 0.0)
        reads_decay = jnp.where(reads, reads_decay, 0.0)
        writes_decay = jnp.where(writes, writes_decay, 0.0)
    # exp of the masked differences only: above the diagonal they may be positive and large.
    decay = jnp.exp(jnp.where(lower, cum[..., :, None] - cum[..., None, :], -jnp.inf))
    k_beta = k * beta[..., None]
    system = jnp.einsum("...id,...jd->...ij", k_beta, k) * jnp.where(strict, decay, 0.0)
    rhs = jnp.concatenate([v * beta[..., None], k_beta * reads_decay[..., None]], axis=-1)
    solved = jax.lax.linalg.triangular_solve(
        system, rhs, left_side=True, lower=True, unit_diagonal=True
    )
    u, w = solved[..., :dv], solved[..., dv:]
    scores = jnp.einsum("...id,...jd->...ij", q, k) * decay
    q_read = q * reads_decay[..., None]
    k_write = k * writes_decay[..., None]

    def step(s: jax.Array, x: tuple[jax.Array, ...]) -> tuple[jax.Array, jax.Array]:
        u_c, w_c, q_c, scores_c, k_c, decay_c = x
        new = u_c - jnp.einsum("bnck,bnkv->bncv", w_c, s)
        out = jnp.einsum("bnck,bnkv->bncv", q_c, s) + jnp.einsum("bnij,bnjv->bniv", scores_c, new)
        s = decay_c[..., None, None] * s + jnp.einsum("bnck,bncv->bnkv", k_c, new)
        return s, out

    xs = tuple(jnp.moveaxis(x, 2, 0) for x in (u, w, q_read, scores, k_write, state_decay))
    final, out = jax.lax.scan(step, state, xs)  # out [nc, B, N, C, Dv]
    out = jnp.moveaxis(out, 0, 2).reshape(b, n, t, dv)
    return jnp.moveaxis(out, 1, 2), final


def _pad(x: jax.Array, pad: int, mode: str = "constant") -> jax.Array:
    widths = [(0, 0)] * x.ndim
    widths[1] = (0, pad)
    return jnp.pad(x, widths, mode=mode)


class ChunkedXlaKernel(LinearAttentionKernel):
    """The chunkwise-parallel rule in XLA: any shape, any floating dtype, any platform."""

    name = "chunked_xla"
    priority = 0

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
        chunk = chunk_size(spec.seq_len)
        # Padding tokens write nothing (beta = k = 0) and keep the state (g = 0); they continue
        # the last document, so the final state is the last real token's.
        pad = -spec.seq_len % chunk
        v, g, b_ = (x.astype(jnp.float32) for x in (value, log_decay, beta))
        ids = None if segment_ids is None else _pad(segment_ids, pad, "edge")
        out, final = chunked_rule(
            _pad(q, pad),
            _pad(k, pad),
            _pad(v, pad),
            _pad(g, pad),
            _pad(b_, pad),
            ids,
            state.astype(jnp.float32),
            chunk,
        )
        return out[:, : spec.seq_len].astype(value.dtype), final


KERNEL = ChunkedXlaKernel()
