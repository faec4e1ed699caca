"""``Attention``: multi-head / grouped-query / multi-query self-attention.

The score computation always goes through ``zoo_attention.dot_product_attention``; the layer
only knows the contract's arguments, and the kernel is chosen by ``implementation`` (a name, or
``None`` for the contract's resolution order).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, Protocol

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float, Int, PRNGKeyArray

import zoo_attention

from ._linear import Linear
from ._logical import EMBED, HEAD_DIM, HEADS, KV_HEADS
from ._norm import RMSNorm
from ._rope import RopeScaling, Rotary

QKNorm = Literal["head", "projection"]


def _rotary(
    head_dim: int, rotary_dim: int | None, theta: float | None, scaling: RopeScaling | None
) -> Rotary | None:
    """The rotary embedding of the first ``rotary_dim`` features of each head (``None``: all
    ``head_dim``), or ``None`` without rotary positions (``theta=None``)."""
    rotary_dim = head_dim if rotary_dim is None else rotary_dim
    if not 0 < rotary_dim <= head_dim:
        raise ValueError(f"`rotary_dim` must be in [1, {head_dim}], got {rotary_dim}.")
    return None if theta is None else Rotary(rotary_dim, theta=theta, scaling=scaling)


def _qk_norm_kind(qk_norm: bool | str | None) -> QKNorm | None:
    if qk_norm in (None, False, "none"):
        return None
    if qk_norm is True:
        return "head"
    if qk_norm not in ("head", "projection"):
        raise ValueError(f"`qk_norm` must be False, True, 'head' or 'projection', got {qk_norm!r}.")
    return qk_norm


class Attention(eqx.Module):
    """Causal self-attention over ``[B, T, D]``.

    Attributes:
        q_proj, k_proj, v_proj, o_proj: the projections (``[N*H, D]``, ``[K*H, D]``, ``[K*H, D]``,
            ``[D, N*H]`` weights).
        q_norm, k_norm: optional RMSNorm of queries and keys before rotary: over each head
            (``[H]`` weights; Qwen3, Gemma 3) or over the whole projection (``[N*H]`` and
            ``[K*H]`` weights; OLMo 2).
        rotary: rotary embedding, or ``None`` (positions added elsewhere, as in GPT-2); it
            rotates the first ``rotary.head_dim`` features of each head (all of them unless the
            rotation is partial, as Qwen3.5's quarter of each head).
        num_heads, num_kv_heads, head_dim: ``N``, ``K``, ``H``; ``N % K == 0``.
        scale: logit scale (``None``: ``1/sqrt(H)``).
        window: sliding window ``W`` as in Hugging Face: a query sees itself and the ``W - 1``
            keys before it; ``None`` for global attention.
        soft_cap: attention logit soft cap, or ``None``.
        implementation: kernel name passed to the contract, or ``None``.
        sinks: ``[N]`` learned sink logits (gpt-oss): one more term of each head's softmax
            denominator (the contract's ``sinks=``), or ``None``.
        output_gate: the query projection also gives each head a gate ``[H]`` (stored after
            the head's query, ``q_proj`` then ``[N*2H, D]``) and the attention output is
            multiplied by its sigmoid before ``o_proj`` (Qwen3.5's gated attention).
    """

    q_proj: Linear
    k_proj: Linear
    v_proj: Linear
    o_proj: Linear
    q_norm: RMSNorm | None
    k_norm: RMSNorm | None
    rotary: Rotary | None
    num_heads: int = eqx.field(static=True)
    num_kv_heads: int = eqx.field(static=True)
    head_dim: int = eqx.field(static=True)
    scale: float | None = eqx.field(static=True)
    window: int | None = eqx.field(static=True)
    soft_cap: float | None = eqx.field(static=True)
    implementation: str | None = eqx.field(static=True)
    qk_norm: QKNorm | None = eqx.field(static=True, default=None)
    output_gate: bool = eqx.field(static=True, default=False)
    sinks: Float[Array, " N"] | None = None

    def __init__(
        self,
        dim: int,
        num_heads: int,
        *,
        num_kv_heads: int | None = None,
        head_dim: int | None = None,
        qkv_bias: bool = False,
        out_bias: bool = False,
        qk_norm: bool | QKNorm | None = False,
        qk_norm_eps: float = 1e-6,
        qk_norm_unit_offset: bool = False,
        rope_theta: float | None = 10000.0,
        rope_scaling: RopeScaling | None = None,
        scale: float | None = None,
        window: int | None = None,
        soft_cap: float | None = None,
        implementation: str | None = None,
        init_std: float | None = None,
        out_init_std: float | None = None,
        dtype: str = "float32",
        sinks: bool = False,
        output_gate: bool = False,
        rotary_dim: int | None = None,
        key: PRNGKeyArray,
    ) -> None:
        """``rope_theta=None`` disables rotary embeddings. ``qk_norm``: ``False`` (none),
        ``True`` or ``"head"`` (RMSNorm over each head's ``H`` features), ``"projection"``
        (over all ``N*H`` query and ``K*H`` key features); ``qk_norm_unit_offset`` scales those
        norms by ``1 + weight`` (Gemma). ``sinks``: a learned sink logit per query head,
        initialised to 0. ``rotary_dim``: rotate only the first that many features of each head
        (``None``: all); ``output_gate``: see the class attributes."""
        num_kv_heads, head_dim = _head_shape(dim, num_heads, num_kv_heads, head_dim)
        if window is not None and window < 1:
            raise ValueError(f"`window` must be >= 1 or None, got {window!r}.")
        if soft_cap is not None and not soft_cap > 0:
            raise ValueError(f"`soft_cap` must be > 0 or None, got {soft_cap!r}.")
        kq, kk, kv, ko = jax.random.split(key, 4)
        # Projections to heads are [heads * head_dim, embed]: sharding the fused out dimension
        # over a mesh axis that divides the head count keeps whole heads on each device.
        q_axes, kv_axes = (HEADS, EMBED), (KV_HEADS, EMBED)

        def projection(out_features: int, axes: tuple[str, str], k: PRNGKeyArray) -> Linear:
            return Linear(
                dim,
                out_features,
                use_bias=qkv_bias,
                init_std=init_std,
                dtype=dtype,
                axes=axes,
                key=k,
            )

        self.q_proj = projection(num_heads * head_dim * (2 if output_gate else 1), q_axes, kq)
        self.k_proj = projection(num_kv_heads * head_dim, kv_axes, kk)
        self.v_proj = projection(num_kv_heads * head_dim, kv_axes, kv)
        self.o_proj = Linear(
            num_heads * head_dim,
            dim,
            use_bias=out_bias,
            init_std=init_std if out_init_std is None else out_init_std,
            dtype=dtype,
            axes=(EMBED, HEADS),
            key=ko,
        )
        kind = _qk_norm_kind(qk_norm)

        def norm(size: int, axis: str) -> RMSNorm:
            return RMSNorm(
                size, eps=qk_norm_eps, unit_offset=qk_norm_unit_offset, dtype=dtype, axis=axis
            )

        self.q_norm = self.k_norm = None
        if kind == "projection":
            # Named like the projection's output so the norm shards with it.
            self.q_norm = norm(num_heads * head_dim, HEADS)
            self.k_norm = norm(num_kv_heads * head_dim, KV_HEADS)
        elif kind == "head":
            self.q_norm, self.k_norm = norm(head_dim, HEAD_DIM), norm(head_dim, HEAD_DIM)
        self.qk_norm = kind
        self.rotary = _rotary(head_dim, rotary_dim, rope_theta, rope_scaling)
        self.output_gate = output_gate
        self.num_heads, self.num_kv_heads, self.head_dim = num_heads, num_kv_heads, head_dim
        self.scale = None if scale is None else float(scale)
        self.window = window
        self.soft_cap = None if soft_cap is None else float(soft_cap)
        self.implementation = implementation
        self.sinks = jnp.zeros((num_heads,), dtype) if sinks else None

    def _project(
        self, x: Float[Array, "B T D"], positions: Int[Array, "B T"]
    ) -> tuple[Array, Array, Array, Array | None]:
        """Queries, keys and values as the contract takes them, and the output gate's logits
        ``[B, T, N*H]`` (``None`` without one)."""
        b, t, _ = x.shape
        q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        gate = None
        if self.output_gate:
            both = q.reshape(b, t, self.num_heads, 2, self.head_dim)
            q = both[:, :, :, 0].reshape(b, t, self.num_heads * self.head_dim)
            gate = both[:, :, :, 1].reshape(b, t, self.num_heads * self.head_dim)
        whole = self.qk_norm == "projection"
        if whole and self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        q = q.reshape(b, t, self.num_heads, self.head_dim)
        k = k.reshape(b, t, self.num_kv_heads, self.head_dim)
        v = v.reshape(b, t, self.num_kv_heads, self.head_dim)
        if not whole and self.q_norm is not None and self.k_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if self.rotary is not None:
            q, k = self._rotate(q, positions), self._rotate(k, positions)
        return q, k, v, gate

    def _rotate(self, x: Array, positions: Array) -> Array:
        assert self.rotary is not None
        width = self.rotary.head_dim
        if width == self.head_dim:
            return self.rotary(x, positions)
        turned = self.rotary(x[..., :width], positions)
        return jnp.concatenate([turned, x[..., width:]], axis=-1)

    def _attend(self, q: Array, k: Array, v: Array, **mask: Any) -> Array:
        return contract_attention(self, q, k, v, sinks=self.sinks, **mask)

    def _out(self, o: Float[Array, "B T N H"], gate: Array | None = None) -> Float[Array, "B T D"]:
        b, t = o.shape[:2]
        o = o.reshape(b, t, self.num_heads * self.head_dim)
        if gate is not None:
            o = o * jax.nn.sigmoid(gate)
        return self.o_proj(o)

    def __call__(
        self,
        x: Float[Array, "B T D"],
        positions: Int[Array, "B T"],
        segment_ids: Int[Array, "B T"] | None = None,
    ) -> Float[Array, "B T D"]:
        """Causal attention over the sequence; ``segment_ids`` keep packed documents apart.

        ``positions`` feed the rotary embedding only; the causal mask and the window act on
        the sequence index, so packed documents need ``segment_ids`` (and positions that
        restart per document, for rotary models).
        """
        q, k, v, gate = self._project(x, positions)
        o = self._attend(
            q, k, v, is_causal=True, segment_ids=segment_ids, local_window_size=back(self.window)
        )
        return self._out(o, gate)

    def decode(
        self,
        x: Float[Array, "B t D"],
        positions: Int[Array, "B t"],
        cache_key: Float[Array, "B S K H"],
        cache_value: Float[Array, "B S K H"],
        slot_positions: Int[Array, "B S"],
        slot_valid: Bool[Array, "B S"],
        start: Int[Array, ""],
    ) -> tuple[Float[Array, "B t D"], Float[Array, "B t K H"], Float[Array, "B t K H"]]:
        """Attention of ``t`` new tokens, written at slots ``[start, start + t)``, over the cache.

        ``slot_positions``/``slot_valid`` already describe the cache after the write. Returns
        the output and the new keys and values (the caller stores them).
        """
        q, k_new, v_new, gate = self._project(x, positions)
        k_all = write_slots(cache_key, k_new, start).astype(q.dtype)
        v_all = write_slots(cache_value, v_new, start).astype(q.dtype)
        o = attend_cached(
            self._attend, q, k_all, v_all, positions, slot_positions, slot_valid, start, self.window
        )
        return self._out(o, gate), k_new, v_new


class _ContractArguments(Protocol):
    scale: float | None
    soft_cap: float | None
    implementation: str | None


def contract_attention(
    layer: _ContractArguments,
    q: Array,
    k: Array,
    v: Array,
    *,
    is_causal: bool = False,
    segment_ids: Array | tuple[Array, Array] | None = None,
    local_window_size: int | tuple[int, int] | None = None,
    sinks: Array | None = None,
) -> Array:
    """The attention contract's call with ``layer``'s scale, soft cap and kernel (the mask
    arguments' defaults are the contract's)."""
    return zoo_attention.dot_product_attention(
        q,
        k,
        v,
        scale=layer.scale,
        is_causal=is_causal,
        segment_ids=segment_ids,
        local_window_size=local_window_size,
        logits_soft_cap=layer.soft_cap,
        sinks=sinks,
        implementation=layer.implementation,
    )


def back(window: int | None) -> tuple[int, int] | None:
    """A layer's window ``W`` (a query sees itself and ``W - 1`` keys before it) as the
    contract's ``(left, right)``."""
    return None if window is None else (window - 1, 0)


def write_slots(cache: Array, new: Array, start: Array) -> Array:
    """``cache [B, S, ...]`` with ``new [B, t, ...]`` written at slots ``[start, start + t)``."""
    zero = jnp.zeros((), jnp.int32)
    at = (zero, start) + (zero,) * (cache.ndim - 2)
    return jax.lax.dynamic_update_slice(cache, new.astype(cache.dtype), at)


def attend_cached(
    attend: Callable[..., Array],
    q: Float[Array, "B t N H"],
    k_all: Float[Array, "B S K H"],
    v_all: Float[Array, "B S K Hv"],
    positions: Int[Array, "B t"],
    slot_positions: Int[Array, "B S"],
    slot_valid: Bool[Array, "B S"],
    start: Int[Array, ""],
    window: int | None,
) -> Float[Array, "B t N Hv"]:
    """Causal (windowed) attention of ``t`` new queries, written at slots ``[start, start + t)``,
    over every valid slot of a cache, through ``attend(q, k, v, *, segment_ids=,
    local_window_size=)`` (the contract's call with the layer's other arguments)."""
    b, t = q.shape[:2]
    s = k_all.shape[1]
    q_ids = jnp.ones((b, t), jnp.int32)
    if t == 1:
        # One query: causality and the window are just a per-slot mask, expressed as
        # segment ids (the query has id 1, a visible slot id 1, any other slot id 0).
        q_pos = positions[:, :1]
        seen = slot_valid & (slot_positions <= q_pos)
        if window is not None:
            seen = seen & (slot_positions > q_pos - window)
        return attend(q, k_all, v_all, segment_ids=(q_ids, seen.astype(jnp.int32)))
    # Several queries: the contract's masks are top-left aligned on indices, so present
    # the keys as a view of L = d + t slots starting d slots before the first query (query
    # i sits at view index i + d, d static) and express "causal, within the window" as the
    # band [i + d - left, i + d]. Slots before slot 0 are padding; empty slots are masked
    # by segment ids. A windowed layer only needs the last W - 1 slots before each query.
    if window is None:
        d = s - t
        band = (s, d)
    else:
        d = min(window - 1, s - t)
        band = (window - 1 - d, d)
    view = d + t

    def window_of(a: Array) -> Array:
        padded = jnp.pad(a, ((0, 0), (d, 0)) + ((0, 0),) * (a.ndim - 2))
        return jax.lax.dynamic_slice_in_dim(padded, start, view, axis=1)

    return attend(
        q,
        window_of(k_all),
        window_of(v_all),
        segment_ids=(q_ids, window_of(slot_valid).astype(jnp.int32)),
        local_window_size=band,
    )


def _head_shape(
    dim: int, num_heads: int, num_kv_heads: int | None, head_dim: int | None
) -> tuple[int, int]:
    """``(num_kv_heads, head_dim)`` with their defaults (as many key/value heads as query
    heads; ``dim / num_heads``), checked."""
    num_kv_heads = num_heads if num_kv_heads is None else num_kv_heads
    if num_heads <= 0 or num_kv_heads <= 0 or num_heads % num_kv_heads:
        raise ValueError(
            f"`num_heads` ({num_heads}) must be a positive multiple of `num_kv_heads` ({num_kv_heads})."
        )
    if head_dim is None:
        if dim % num_heads:
            raise ValueError(
                f"`dim` ({dim}) is not divisible by `num_heads` ({num_heads}); pass `head_dim`."
            )
        head_dim = dim // num_heads
    return num_kv_heads, head_dim
