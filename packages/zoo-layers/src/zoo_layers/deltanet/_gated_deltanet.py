"""``GatedDeltaNet``: the linear-attention token mixer of Qwen3.5 and Qwen3-Next.

``x`` is projected to queries, keys and values (one fused projection), which pass through a
short causal depthwise convolution and ``silu``; a per-head decay ``g = -exp(A_log) *
softplus(a + dt_bias)`` and write strength ``beta = sigmoid(b)`` come from two narrow
projections. The recurrence itself is ``zoo_attention.linear.gated_delta_rule`` (queries and
keys L2-normalised there); each head's output is RMS-normalised and gated by ``silu(z)``, then
projected back. The convolution lives here, not in the contract: see the zoo-attention README.

Attribute names follow transformers' ``Qwen3_5GatedDeltaNet`` (``in_proj_qkv``, ``in_proj_z``,
``in_proj_b``, ``in_proj_a``, ``out_proj``), so LoRA adapters on them are PEFT adapters.
"""

from __future__ import annotations

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from zoo_attention import linear

from .._linear import Linear
from .._logical import EMBED, HEADS, with_names
from ._conv import causal_conv, conv_history
from ._gated_norm import GatedRMSNorm


class GatedDeltaNet(eqx.Module):
    """Gated DeltaNet token mixing over ``[B, T, D]``.

    Attributes:
        in_proj_qkv: ``[2*K*Dk + N*Dv, D]``: queries (``K`` heads of ``Dk``), keys, values
            (``N`` heads of ``Dv``), in that order.
        in_proj_z: ``[N*Dv, D]``, the output gate; in_proj_b, in_proj_a: ``[N, D]``.
        conv_weight: ``[2*K*Dk + N*Dv, W]``, the depthwise filters.
        dt_bias, a_log: ``[N]``: ``g = -exp(a_log) * softplus(a + dt_bias)``.
        norm: the gated RMSNorm of each head's output (``[Dv]``).
        out_proj: ``[D, N*Dv]``.
        implementation: the gated-delta-rule kernel's name (``None``: the contract's order).
    """

    in_proj_qkv: Linear
    in_proj_z: Linear
    in_proj_b: Linear
    in_proj_a: Linear
    conv_weight: Float[Array, "C W"]
    dt_bias: Float[Array, " N"]
    a_log: Float[Array, " N"]
    norm: GatedRMSNorm
    out_proj: Linear
    num_qk_heads: int = eqx.field(static=True)
    num_heads: int = eqx.field(static=True)
    key_dim: int = eqx.field(static=True)
    value_dim: int = eqx.field(static=True)
    implementation: str | None = eqx.field(static=True, default=None)

    def __init__(
        self,
        dim: int,
        num_qk_heads: int,
        num_heads: int,
        key_dim: int,
        value_dim: int,
        *,
        conv_width: int = 4,
        norm_eps: float = 1e-6,
        init_std: float | None = None,
        out_init_std: float | None = None,
        dtype: str = "float32",
        implementation: str | None = None,
        key: PRNGKeyArray,
    ) -> None:
        if min(num_qk_heads, num_heads, key_dim, value_dim) <= 0 or num_heads % num_qk_heads:
            raise ValueError(
                f"a gated DeltaNet needs positive head counts and widths, and value heads "
                f"({num_heads}) a multiple of query/key heads ({num_qk_heads})."
            )
        if conv_width < 1:
            raise ValueError(f"`conv_width` must be >= 1, got {conv_width}.")
        k_qkv, k_z, k_b, k_a, k_conv, k_decay, k_out = jax.random.split(key, 7)
        channels = 2 * num_qk_heads * key_dim + num_heads * value_dim

        def projection(out: int, k: PRNGKeyArray) -> Linear:
            return Linear(dim, out, init_std=init_std, dtype=dtype, axes=(HEADS, EMBED), key=k)

        self.in_proj_qkv = projection(channels, k_qkv)
        self.in_proj_z = projection(num_heads * value_dim, k_z)
        self.in_proj_b = projection(num_heads, k_b)
        self.in_proj_a = projection(num_heads, k_a)
        self.conv_weight = conv_width**-0.5 * jax.random.normal(
            k_conv, (channels, conv_width), dtype
        )
        self.dt_bias = jnp.ones((num_heads,), dtype)
        # transformers' initialisation: A uniform in [0.01, 16], stored as its log.
        self.a_log = jnp.log(jax.random.uniform(k_decay, (num_heads,), dtype, 0.01, 16.0))
        self.norm = GatedRMSNorm(value_dim, eps=norm_eps, dtype=dtype)
        self.out_proj = Linear(
            num_heads * value_dim,
            dim,
            init_std=init_std if out_init_std is None else out_init_std,
            dtype=dtype,
            axes=(EMBED, HEADS),
            key=k_out,
        )
        self.num_qk_heads = num_qk_heads
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim
        self.implementation = implementation

    @property
    def conv_width(self) -> int:
        """``W``, the convolution's taps."""
        return self.conv_weight.shape[-1]

    @property
    def conv_channels(self) -> int:
        """Channels of the convolution: the fused query, key and value width."""
        return self.conv_weight.shape[-2]

    def logical_axes(self) -> GatedDeltaNet:
        """This layer with its arrays replaced by their logical names."""
        named = with_names(self, conv_weight=(HEADS, None), dt_bias=(None,), a_log=(None,))
        parts = (self.in_proj_qkv, self.in_proj_z, self.in_proj_b, self.in_proj_a, self.out_proj)
        named = eqx.tree_at(
            lambda m: (m.in_proj_qkv, m.in_proj_z, m.in_proj_b, m.in_proj_a, m.out_proj),
            named,
            tuple(p.logical_axes() for p in parts),
        )
        return eqx.tree_at(lambda m: m.norm, named, self.norm.logical_axes())

    def _rule_inputs(
        self, x: Array, mixed: Array
    ) -> tuple[Array, Array, Array, Array, Array, Array]:
        """Queries, keys, values (from the convolved projection ``mixed``), decays, betas and
        the gate ``z``, shaped for the contract."""
        b, t, _ = x.shape
        width_qk = self.num_qk_heads * self.key_dim
        q, k, v = jnp.split(mixed, [width_qk, 2 * width_qk], axis=-1)
        q = q.reshape(b, t, self.num_qk_heads, self.key_dim)
        k = k.reshape(b, t, self.num_qk_heads, self.key_dim)
        v = v.reshape(b, t, self.num_heads, self.value_dim)
        z = self.in_proj_z(x).reshape(b, t, self.num_heads, self.value_dim)
        beta = jax.nn.sigmoid(self.in_proj_b(x))
        a = self.in_proj_a(x).astype(jnp.float32) + self.dt_bias.astype(jnp.float32)
        g = -jnp.exp(self.a_log.astype(jnp.float32)) * jax.nn.softplus(a)
        return q, k, v, g, beta, z

    def _out(self, core: Array, z: Array) -> Array:
        b, t = core.shape[:2]
        return self.out_proj(self.norm(core, z).reshape(b, t, self.num_heads * self.value_dim))

    def __call__(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"] | None = None,
        segment_ids: Int[Array, "B T"] | None = None,
    ) -> Float[Array, "B T D"]:
        """The mixer over a whole sequence; ``segment_ids`` keep packed documents apart (the
        convolution and the state both restart at each document). ``positions`` are unused:
        the recurrence is ordered by the sequence itself."""
        mixed = causal_conv(self.in_proj_qkv(x), self.conv_weight, segment_ids)
        q, k, v, g, beta, z = self._rule_inputs(x, mixed)
        core, _ = linear.gated_delta_rule(
            q,
            k,
            v,
            g,
            beta,
            normalize_qk=True,
            segment_ids=segment_ids,
            implementation=self.implementation,
        )
        return self._out(core, z)

    def decode(
        self,
        x: Float[Array, "B t D"],
        conv_state: Float[Array, "B W1 C"],
        state: Float[Array, "B N Dk Dv"],
        mask: Bool[Array, "B t"] | None = None,
    ) -> tuple[Float[Array, "B t D"], Float[Array, "B W1 C"], Float[Array, "B N Dk Dv"]]:
        """``t`` new tokens after ``conv_state`` (the last ``W - 1`` convolution inputs) and
        ``state`` (the recurrence's): the output and both states after them. ``mask``
        (``False`` at left padding) zeroes those tokens' inputs, so they change no state."""
        if mask is not None:
            x = x * mask[..., None].astype(x.dtype)
        projected = self.in_proj_qkv(x)
        mixed = causal_conv(projected, self.conv_weight, history=conv_state)
        q, k, v, g, beta, z = self._rule_inputs(x, mixed)
        core, new_state = linear.gated_delta_rule(
            q,
            k,
            v,
            g,
            beta,
            normalize_qk=True,
            initial_state=state,
            implementation=self.implementation,
        )
        return self._out(core, z), conv_history(projected, conv_state), new_state
