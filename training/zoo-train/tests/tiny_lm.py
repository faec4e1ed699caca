"""A tiny attention language model and data helpers for the tests (not part of the package)."""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp

import zoo_attention
from zoo_data import PackedLoader
from zoo_data.testing import random_docs as random_docs


class TinyLM(eqx.Module):
    """Embedding + learned positions, one causal attention block (zoo_attention), MLP, unembed."""

    embed: jax.Array
    pos: jax.Array
    wqkv: jax.Array
    wo: jax.Array
    norm: jax.Array
    w1: jax.Array
    b1: jax.Array
    w2: jax.Array
    unembed: jax.Array
    num_heads: int = eqx.field(static=True)

    def __init__(
        self, vocab: int = 64, dim: int = 32, heads: int = 2, max_len: int = 64, *, key: jax.Array
    ):
        ks = jax.random.split(key, 6)
        s = dim**-0.5
        self.embed = jax.random.normal(ks[0], (vocab, dim)) * 0.5
        self.pos = jax.random.normal(ks[1], (max_len, dim)) * 0.1
        self.wqkv = jax.random.normal(ks[2], (dim, 3 * dim)) * s
        self.wo = jax.random.normal(ks[3], (dim, dim)) * s
        self.norm = jnp.ones((dim,))
        self.w1 = jax.random.normal(ks[4], (dim, 2 * dim)) * s
        self.b1 = jnp.zeros((2 * dim,))
        self.w2 = jax.random.normal(ks[5], (2 * dim, dim)) * (2 * dim) ** -0.5
        self.unembed = jax.random.normal(ks[0], (dim, vocab)) * s
        self.num_heads = heads

    def __call__(self, input_ids: jax.Array, *, positions=None, segment_ids=None) -> jax.Array:
        B, T = input_ids.shape
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(T), (B, T))
        x = self.embed[input_ids] + self.pos[positions]
        h = x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-6) * self.norm
        D = x.shape[-1]
        q, k, v = jnp.split(h @ self.wqkv, 3, axis=-1)
        shape = (B, T, self.num_heads, D // self.num_heads)
        a = zoo_attention.dot_product_attention(
            q.reshape(shape),
            k.reshape(shape),
            v.reshape(shape),
            is_causal=True,
            segment_ids=segment_ids,
        )
        x = x + a.reshape(B, T, D) @ self.wo
        x = x + jax.nn.gelu(x @ self.w1 + self.b1) @ self.w2
        return x @ self.unembed


def make_model(seed: int = 0, **kwargs: int) -> TinyLM:
    """A ``TinyLM`` initialised under one jit (eager init would compile every op)."""
    return eqx.filter_jit(lambda k: TinyLM(**kwargs, key=k))(jax.random.key(seed))


def loaders(seed: int = 0, seq_len: int = 16, vocab: int = 64) -> tuple[PackedLoader, PackedLoader]:
    """A train and a validation loader over random documents."""
    train = PackedLoader(
        random_docs(seed, vocab=vocab), seq_len=seq_len, seed=seed, pad_id=vocab - 1
    )
    val = PackedLoader(
        random_docs(seed + 1000, n=8, vocab=vocab), seq_len=seq_len, shuffle=False, pad_id=vocab - 1
    )
    return train, val
