"""References for tests and benchmarks, not for models: they compute what the fast layers
compute, the slow and obvious way."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._linear import dense
from ._mlp import activation_fn
from .moe import MoE, clamped_swiglu, route


def dense_moe(moe: MoE, x: Float[Array, "*B D"]) -> Float[Array, "*B D"]:
    """``moe(x)[0]`` the dense way: every expert on every token, weighted by the router (zero
    weight for the experts a token did not choose), with the layer's biases, activation and
    shared experts (gated where the layer gates them)."""
    lead, dim = x.shape[:-1], x.shape[-1]
    flat = x.reshape(-1, dim)
    bias = None if moe.router.bias is None else moe.router.bias.astype(jnp.float32)
    logits = dense(flat.astype(jnp.float32), moe.router.weight.astype(jnp.float32), bias)
    weights, experts = route(
        logits,
        moe.top_k,
        normalize=moe.normalize,
        scoring=moe.scoring,
        correction_bias=moe.correction_bias,
        groups=moe.groups,
        group_top_k=moe.group_top_k,
        scale=moe.routed_scale,
    )
    one_hot = jax.nn.one_hot(experts, moe.num_experts, dtype=jnp.float32)
    combine = jnp.einsum("nk,nke->ne", weights, one_hot)
    gate, up, down = (w.astype(x.dtype) for w in (moe.gate_proj, moe.up_proj, moe.down_proj))
    g = jnp.einsum("nd,edi->eni", flat, gate)
    u = jnp.einsum("nd,edi->eni", flat, up)
    if moe.gate_bias is not None and moe.up_bias is not None:
        g, u = g + moe.gate_bias[:, None].astype(g.dtype), u + moe.up_bias[:, None].astype(u.dtype)
    if moe.swiglu_limit is None:
        h = activation_fn(moe.activation)(g) * u
    else:
        h = clamped_swiglu(g, u, moe.swiglu_limit, moe.swiglu_alpha)
    out = jnp.einsum("eni,eid->end", h, down).astype(jnp.float32)
    if moe.down_bias is not None:
        out = out + moe.down_bias[:, None].astype(jnp.float32)
    y = jnp.einsum("ne,end->nd", combine, out).astype(x.dtype)
    if moe.shared is not None:
        shared = moe.shared(flat)
        if moe.shared_gate is not None:
            shared = shared * jax.nn.sigmoid(moe.shared_gate(flat))
        y = y + shared
    return y.reshape(*lead, dim)
