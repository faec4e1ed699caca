"""References for tests and benchmarks, not for models: they compute what the fast layers
compute, the slow and obvious way."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._linear import dense
from ._mlp import activation_fn
from .moe import MoE, route


def dense_moe(moe: MoE, x: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
    """``moe(x)[0]`` the dense way: every expert on every token, weighted by the router (zero
    weight for the experts a token did not choose)."""
    lead, dim = x.shape[:-1], x.shape[-1]
    flat = x.reshape(-1, dim)
    logits = dense(flat.astype(jnp.float32), moe.router.weight.astype(jnp.float32))
    weights, experts = route(logits, moe.top_k, normalize=moe.normalize)
    one_hot = jax.nn.one_hot(experts, moe.num_experts, dtype=jnp.float32)
    combine = jnp.einsum("nk,nke->ne", weights, one_hot)
    act = activation_fn(moe.activation)
    gate, up, down = (w.astype(x.dtype) for w in (moe.gate_proj, moe.up_proj, moe.down_proj))
    h = act(jnp.einsum("nd,edi->eni", flat, gate)) * jnp.einsum("nd,edi->eni", flat, up)
    out = jnp.einsum("eni,eid->end", h, down).astype(jnp.float32)
    return jnp.einsum("ne,end->nd", combine, out).astype(x.dtype).reshape(*lead, dim)
