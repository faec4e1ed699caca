"""``LatentAttention``: multi-head latent attention (DeepSeek-V2/V3, Kimi-K2, GLM-4.5).

Queries come through an optional low-rank bottleneck (``q_a_proj``, its norm, ``q_b_proj``);
keys and values through a shared compressed latent (``kv_a_proj``: the latent of
``kv_lora_rank`` features and one rotary key part shared by every head; its norm; ``kv_b_proj``
expands the latent to each head's key part without position and its value). Each head's query
and key are ``[nope | rope]`` (``H = nope_dim + rope_dim``), its value ``v_dim`` wide: the
contract's attention with a value head dim of its own (contract 1.3). A decoding cache holds
the latent and the rotary key part, ``kv_lora_rank + rope_dim`` numbers a token, not the
expanded keys and values.
"""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

from ._attention import attend_cached, back, contract_attention, write_slots
from ._linear import Linear
from ._logical import EMBED, HEADS
from ._norm import RMSNorm
from ._rope import RopeScaling, Rotary


class LatentAttention(eqx.Module):
    """Causal multi-head latent self-attention over ``[B, T, D]``.

    Attributes:
        q_proj: ``[N*H, D]`` when there is no query bottleneck (``q_lora_rank=None``), else
            ``None``.
        q_a_proj, q_a_norm, q_b_proj: the query bottleneck ``[Rq, D]``, its RMSNorm, ``[N*H, Rq]``.
        kv_a_proj: ``[R + rope_dim, D]``: the latent and the shared rotary key part.
        kv_a_norm: RMSNorm of the latent.
        kv_b_proj: ``[N*(nope_dim + v_dim), R]``: each head's key part without position and its
            value, from the latent.
        o_proj: ``[D, N*v_dim]``.
        rotary: rotary embedding of the ``rope_dim`` parts (interleaved pairs for DeepSeek).
        num_heads, nope_dim, rope_dim, v_dim, kv_lora_rank: ``N``, the head parts, ``R``.
        scale, window, soft_cap, implementation: as :class:`zoo_layers.Attention`.
    """

    q_proj: Linear | None
    q_a_proj: Linear | None
    q_a_norm: RMSNorm | None
    q_b_proj: Linear | None
    kv_a_proj: Linear
    kv_a_norm: RMSNorm
    kv_b_proj: Linear
    o_proj: Linear
    rotary: Rotary
    num_heads: int = eqx.field(static=True)
    nope_dim: int = eqx.field(static=True)
    rope_dim: int = eqx.field(static=True)
    v_dim: int = eqx.field(static=True)
    kv_lora_rank: int = eqx.field(static=True)
    scale: float | None = eqx.field(static=True)
    window: int | None = eqx.field(static=True)
    soft_cap: float | None = eqx.field(static=True)
    implementation: str | None = eqx.field(static=True)

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        nope_dim: int,
        rope_dim: int,
        v_dim: int,
        kv_lora_rank: int,
        q_lora_rank: int | None = None,
        bias: bool = False,
        norm_eps: float = 1e-6,
        rope_theta: float = 10000.0,
        rope_scaling: RopeScaling | None = None,
        rope_interleaved: bool = False,
        scale: float | None = None,
        window: int | None = None,
        soft_cap: float | None = None,
        implementation: str | None = None,
        init_std: float | None = None,
        out_init_std: float | None = None,
        dtype: str = "float32",
        key: PRNGKeyArray,
    ) -> None:
        """``bias``: biases on ``q_a_proj`` (or ``q_proj``'s absence of one), ``kv_a_proj`` and
        ``o_proj`` (DeepSeek's ``attention_bias``); ``norm_eps``: the latents' RMSNorms'."""
        for name, value in (
            ("num_heads", num_heads),
            ("nope_dim", nope_dim),
            ("rope_dim", rope_dim),
            ("v_dim", v_dim),
            ("kv_lora_rank", kv_lora_rank),
        ):
            if not isinstance(value, int) or value <= 0:
                raise ValueError(f"`{name}` must be a positive int, got {value!r}.")
        if q_lora_rank is not None and q_lora_rank <= 0:
            raise ValueError(f"`q_lora_rank` must be a positive int or None, got {q_lora_rank!r}.")
        if window is not None and window < 1:
            raise ValueError(f"`window` must be >= 1 or None, got {window!r}.")
        kq, kqa, kqb, kva, kvb, ko = jax.random.split(key, 6)
        head = nope_dim + rope_dim

        def linear(i: int, o: int, axes: tuple, k: PRNGKeyArray, b: bool = False) -> Linear:
            return Linear(i, o, use_bias=b, init_std=init_std, dtype=dtype, axes=axes, key=k)

        if q_lora_rank is None:
            self.q_proj = linear(dim, num_heads * head, (HEADS, EMBED), kq)
            self.q_a_proj = self.q_a_norm = self.q_b_proj = None
        else:
            self.q_proj = None
            self.q_a_proj = linear(dim, q_lora_rank, (None, EMBED), kqa, bias)
            self.q_a_norm = RMSNorm(q_lora_rank, eps=norm_eps, dtype=dtype, axis=None)
            self.q_b_proj = linear(q_lora_rank, num_heads * head, (HEADS, None), kqb)
        self.kv_a_proj = linear(dim, kv_lora_rank + rope_dim, (None, EMBED), kva, bias)
        self.kv_a_norm = RMSNorm(kv_lora_rank, eps=norm_eps, dtype=dtype, axis=None)
        self.kv_b_proj = linear(kv_lora_rank, num_heads * (nope_dim + v_dim), (HEADS, None), kvb)
        self.o_proj = Linear(
            num_heads * v_dim,
            dim,
            use_bias=bias,
            init_std=init_std if out_init_std is None else out_init_std,
            dtype=dtype,
            axes=(EMBED, HEADS),
            key=ko,
        )
        self.rotary = Rotary(
            rope_dim, theta=rope_theta, scaling=rope_scaling, interleaved=rope_interleaved
        )
        self.num_heads = num_heads
        self.nope_dim = nope_dim
        self.rope_dim = rope_dim
        self.v_dim = v_dim
        self.kv_lora_rank = kv_lora_rank
        self.scale = None if scale is None else float(scale)
        self.window = window
        self.soft_cap = None if soft_cap is None else float(soft_cap)
        self.implementation = implementation

    @property
    def head_dim(self) -> int:
        """The queries' and keys' head dim, ``nope_dim + rope_dim``."""
        return self.nope_dim + self.rope_dim

    def _queries(self, x: Float[Array, "B T D"], positions: Int[Array, "B T"]) -> Array:
        b, t, _ = x.shape
        if self.q_proj is not None:
            q = self.q_proj(x)
        else:
            assert self.q_a_proj is not None and self.q_a_norm is not None
            assert self.q_b_proj is not None
            q = self.q_b_proj(self.q_a_norm(self.q_a_proj(x)))
        q = q.reshape(b, t, self.num_heads, self.head_dim)
        q_pass, q_rot = q[..., : self.nope_dim], q[..., self.nope_dim :]
        return jnp.concatenate([q_pass, self.rotary(q_rot, positions)], axis=-1)

    def latent(
        self, x: Float[Array, "B T D"], positions: Int[Array, "B T"]
    ) -> tuple[Float[Array, "B T 1 R"], Float[Array, "B T 1 r"]]:
        """What a cache keeps of each token: the normed latent ``[B, T, 1, R]`` and the rotated
        key part every head shares ``[B, T, 1, rope_dim]``."""
        b, t, _ = x.shape
        compressed = self.kv_a_proj(x)
        c, k_rot = compressed[..., : self.kv_lora_rank], compressed[..., self.kv_lora_rank :]
        c = self.kv_a_norm(c).reshape(b, t, 1, self.kv_lora_rank)
        k_rot = self.rotary(k_rot.reshape(b, t, 1, self.rope_dim), positions)
        return c, k_rot

    def _expand(self, c: Array, k_rot: Array) -> tuple[Array, Array]:
        """Keys ``[B, S, N, H]`` and values ``[B, S, N, v_dim]`` from latents and rotary parts."""
        b, s = c.shape[:2]
        kv = self.kv_b_proj(c[:, :, 0]).reshape(b, s, self.num_heads, self.nope_dim + self.v_dim)
        k_nope, v = kv[..., : self.nope_dim], kv[..., self.nope_dim :]
        k_rot = jnp.broadcast_to(k_rot, (b, s, self.num_heads, self.rope_dim))
        return jnp.concatenate([k_nope, k_rot.astype(k_nope.dtype)], axis=-1), v

    def _attend(self, q: Array, k: Array, v: Array, **mask: Any) -> Array:
        return contract_attention(self, q, k, v, **mask)

    def _out(self, o: Float[Array, "B T N Hv"]) -> Float[Array, "B T D"]:
        b, t = o.shape[:2]
        return self.o_proj(o.reshape(b, t, self.num_heads * self.v_dim))

    def __call__(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
    ) -> Float[Array, "B T D"]:
        """Causal attention over the sequence; ``segment_ids`` keep packed documents apart."""
        q = self._queries(x, positions)
        k, v = self._expand(*self.latent(x, positions))
        o = self._attend(
            q, k, v, is_causal=True, segment_ids=segment_ids, local_window_size=back(self.window)
        )
        return self._out(o)

    def decode(
        self,
        x: Float[Array, "B t D"],
        positions: Int[Array, "B t"],
        cache_latent: Float[Array, "B S 1 R"],
        cache_rope: Float[Array, "B S 1 r"],
        slot_positions: Int[Array, "B S"],
        slot_valid: Bool[Array, "B S"],
        start: Int[Array, ""],
    ) -> tuple[Float[Array, "B t D"], Float[Array, "B t 1 R"], Float[Array, "B t 1 r"]]:
        """Attention of ``t`` new tokens, written at slots ``[start, start + t)``, over a cache of
        latents (a :class:`zoo_layers.KVCache` whose ``key`` holds the latents and ``value``
        the rotary key parts). Returns the output and the new tokens' latents and rotary parts
        (the caller stores them)."""
        q = self._queries(x, positions)
        c_new, r_new = self.latent(x, positions)
        c_all = write_slots(cache_latent, c_new, start).astype(q.dtype)
        r_all = write_slots(cache_rope, r_new, start).astype(q.dtype)
        k_all, v_all = self._expand(c_all, r_all)
        o = attend_cached(
            self._attend, q, k_all, v_all, positions, slot_positions, slot_valid, start, self.window
        )
        return self._out(o), c_new, r_new
