"""A token-wise function applied one chunk of the sequence at a time, each chunk
rematerialised.

A transformer's MLP acts on every token alone, and its hidden activations (``[B, T, hidden]``,
three or four of them in a gated MLP's backward pass) are the largest a layer makes: at
T = 8192 and a Llama-3-8B width, 0.9 GiB a row. Applied under ``lax.scan`` over chunks of the
sequence, each chunk under ``jax.checkpoint``, they exist one chunk at a time, in the forward
pass and in the backward pass alike; what the scan keeps for the backward pass is only its
input, which the layer's own rematerialisation keeps anyway.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

_P = TypeVar("_P")


def chunked_tokens(
    fn: Callable[[_P, Array], Array],
    params: _P,
    x: Float[Array, "B T D"],
    chunk: int,
) -> Float[Array, "B T E"]:
    """``fn(params, x)`` for a function that acts on each token alone, computed over
    ``T // chunk`` chunks of ``chunk`` tokens.

    Args:
        fn: ``fn(params, x_chunk [B, chunk, D]) -> [B, chunk, E]``; token ``t`` of the result
            may depend on token ``t`` of the input only.
        params: a pytree (an Equinox module); its floating arrays enter the scan in float32
            and are cast back to their own dtype inside ``fn``'s call, so their gradients add
            up over the chunks in float32 (bfloat16 weights get the one rounding an unchunked
            call gives them).
        x: the input ``[B, T, D]``; ``T`` a multiple of ``chunk``.
        chunk: tokens of the sequence per chunk.

    Returns:
        ``fn(params, x)``, ``[B, T, E]``.
    """
    b, t = x.shape[:2]
    if chunk <= 0 or t % chunk:
        raise ValueError(
            f"the sequence ({t} tokens) must be a positive multiple of `chunk` ({chunk})."
        )
    arrays, static = eqx.partition(params, eqx.is_inexact_array)
    dtypes = jax.tree.map(lambda a: a.dtype, arrays)
    wide = jax.tree.map(lambda a: a.astype(jnp.float32), arrays)

    @jax.checkpoint
    def one(weights: _P, xc: Array) -> Array:
        narrow = jax.tree.map(lambda a, d: a.astype(d), weights, dtypes)
        return fn(eqx.combine(narrow, static), xc)

    # [B, T, D] -> [n, B, chunk, D]: the chunks along the sequence, the rows (and their
    # sharding) untouched.
    xs = jnp.swapaxes(x.reshape(b, t // chunk, chunk, *x.shape[2:]), 0, 1)
    _, ys = jax.lax.scan(lambda carry, xc: (carry, one(wide, xc)), None, xs)
    return jnp.swapaxes(ys, 0, 1).reshape(b, t, *ys.shape[3:])
