"""The static description of one attention call, and the argument checks that build it.

An :class:`AttentionSpec` is what a kernel's ``check`` sees: shapes, dtype, platform and the
features asked for, all static and hashable, so it can be computed before any tracing and used
as a cache or ``jit`` static key.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from ._target import platform_and_kind

Window = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class AttentionSpec:
    """Static description of a ``dot_product_attention`` call.

    Shapes follow the contract layout: query ``[batch, q_len, num_heads, head_dim]``, key
    ``[batch, kv_len, num_kv_heads, head_dim]`` and value ``[batch, kv_len, num_kv_heads,
    value_head_dim]``. ``platform`` and ``device_kind`` describe
    the target (see :func:`zoo_attention.find_target`): the active mesh's devices when there is
    one, which is not the host's when compiling for a TPU from a CPU. ``has_query_offset``
    (contract 1.2): the queries are a block of a longer sequence, query row ``i`` sits at
    position ``query_offset + i`` for the causal and window rules (the kernel receives the
    offset as a traced int32 scalar); set only when the mask depends on positions.

    Contract 1.3: ``has_sinks``, one learned logit per query head joins each row's softmax
    denominator (gpt-oss); ``value_head_dim``, the values' head dim when it differs from the
    queries' and keys' (multi-head latent attention: 192 for q/k, 128 for v), ``None`` when it
    is the same (so a call without it has the spec it had under 1.2).
    """

    batch: int
    q_len: int
    kv_len: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    dtype: str
    platform: str
    scale: float
    is_causal: bool = False
    has_segment_ids: bool = False
    local_window: Window | None = None
    logits_soft_cap: float | None = None
    device_kind: str | None = None
    has_query_offset: bool = False
    has_sinks: bool = False
    value_head_dim: int | None = None

    @property
    def v_head_dim(self) -> int:
        """The values' (and the output's) head dim, resolved."""
        return self.head_dim if self.value_head_dim is None else self.value_head_dim

    @property
    def group_size(self) -> int:
        """Query heads per key/value head (1 for MHA, ``num_heads`` for MQA)."""
        return self.num_heads // self.num_kv_heads

    @property
    def features(self) -> tuple[str, ...]:
        """Names of the optional contract features this call uses."""
        used = []
        if self.is_causal:
            used.append("causal")
        if self.has_segment_ids:
            used.append("segment_ids")
        if self.local_window is not None:
            used.append("local_window")
        if self.logits_soft_cap is not None:
            used.append("logits_soft_cap")
        if self.has_query_offset:
            used.append("query_offset")
        if self.has_sinks:
            used.append("sinks")
        if self.value_head_dim is not None:
            used.append("value_head_dim")
        return tuple(used)

    @property
    def uses_positions(self) -> bool:
        """Whether the mask depends on positions (causal or windowed): only then does a query
        offset change the result."""
        return self.is_causal or self.local_window is not None


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _check_floating(name: str, x: Any) -> None:
    if not hasattr(x, "shape") or not hasattr(x, "dtype"):
        raise ValueError(f"`{name}` must be an array, got {type(x).__name__}.")
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise ValueError(
            f"`{name}` must have a floating dtype, got {x.dtype} with shape {_shape(x)}; "
            "cast it to float32 or bfloat16."
        )


def _normalise_window(local_window_size: int | tuple[int, int] | None) -> Window | None:
    if local_window_size is None:
        return None
    if isinstance(local_window_size, int | jnp.integer) and not isinstance(local_window_size, bool):
        left = right = int(local_window_size)
    elif isinstance(local_window_size, tuple | list) and len(local_window_size) == 2:
        left, right = (int(v) for v in local_window_size)
    else:
        raise ValueError(
            "`local_window_size` must be an int w or a pair (left, right), "
            f"got {local_window_size!r}."
        )
    if left < 0 or right < 0:
        raise ValueError(
            f"`local_window_size` must be non-negative, got (left={left}, right={right})."
        )
    return (left, right)


def _normalise_segment_ids(
    segment_ids: Any, batch: int, q_len: int, kv_len: int
) -> tuple[jax.Array, jax.Array] | None:
    if segment_ids is None:
        return None
    if isinstance(segment_ids, tuple | list):
        if len(segment_ids) != 2:
            raise ValueError(
                "`segment_ids` must be one int array [B, T] or a pair (q_ids [B, T], kv_ids [B, S]), "
                f"got a sequence of {len(segment_ids)}."
            )
        q_ids, kv_ids = segment_ids
    else:
        if q_len != kv_len:
            raise ValueError(
                f"`segment_ids` as one array needs q_len == kv_len, got T={q_len}, S={kv_len}; "
                "pass a pair (q_ids [B, T], kv_ids [B, S])."
            )
        q_ids = kv_ids = segment_ids
    for label, ids, length in (("q", q_ids, q_len), ("kv", kv_ids, kv_len)):
        if not hasattr(ids, "shape") or not jnp.issubdtype(ids.dtype, jnp.integer):
            dtype = getattr(ids, "dtype", type(ids).__name__)
            raise ValueError(f"`segment_ids` ({label}) must be an integer array, got {dtype}.")
        if _shape(ids) != (batch, length):
            raise ValueError(
                f"`segment_ids` ({label}) must have shape {(batch, length)}, got {_shape(ids)}."
            )
    return jnp.asarray(q_ids, jnp.int32), jnp.asarray(kv_ids, jnp.int32)


def _check_sinks(sinks: Any, num_heads: int) -> None:
    if sinks is None:
        return
    if not hasattr(sinks, "shape") or not hasattr(sinks, "dtype"):
        raise ValueError(
            f"`sinks` must be a floating array [N] (one logit per query head), got "
            f"{type(sinks).__name__}."
        )
    if _shape(sinks) != (num_heads,) or not jnp.issubdtype(sinks.dtype, jnp.floating):
        raise ValueError(
            f"`sinks` must be a floating array of shape ({num_heads},), one logit per query "
            f"head, got {sinks.dtype} with shape {_shape(sinks)}."
        )


def normalise_query_offset(query_offset: Any) -> jax.Array | int | None:
    """``query_offset`` checked: a Python int stays one (a kernel that plans before tracing
    needs it static), an integer scalar array becomes int32 (``None`` stays ``None``).

    Raises:
        ValueError: not a non-negative int nor an integer scalar array.
    """
    if query_offset is None:
        return None
    if isinstance(query_offset, bool):
        raise ValueError(f"`query_offset` must be an int or an int scalar, got {query_offset!r}.")
    if isinstance(query_offset, int):
        if query_offset < 0:
            raise ValueError(f"`query_offset` must be non-negative, got {query_offset}.")
        return query_offset
    if (
        not hasattr(query_offset, "shape")
        or _shape(query_offset) != ()
        or not jnp.issubdtype(query_offset.dtype, jnp.integer)
    ):
        shape = getattr(query_offset, "shape", type(query_offset).__name__)
        raise ValueError(f"`query_offset` must be an int or an int scalar array, got {shape}.")
    return jnp.asarray(query_offset, jnp.int32)


def make_spec(
    query: Any,
    key: Any,
    value: Any,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    segment_ids: Any = None,
    local_window_size: int | tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    platform: str | None = None,
    device_kind: str | None = None,
    query_offset: Any = None,
    sinks: Any = None,
) -> tuple[AttentionSpec, tuple[jax.Array, jax.Array] | None]:
    """Validate the arguments of ``dot_product_attention`` and describe the call.

    ``platform`` and ``device_kind`` default to the call's target (:func:`find_target`).
    ``query_offset`` (an int or int scalar array, or ``None``) only marks the spec
    (``has_query_offset``) when the mask depends on positions; check it with
    :func:`normalise_query_offset`. ``sinks`` (contract 1.3), a floating ``[N]`` array or
    ``None``, marks ``has_sinks``.

    Returns the spec and the segment ids normalised to a pair of int32 arrays (or ``None``).
    Raises ``ValueError`` naming the argument and the shapes for anything the contract rejects.
    """
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_floating(name, x)
        if x.ndim != 4:
            raise ValueError(
                f"`{name}` must have rank 4 [batch, length, heads, head_dim], "
                f"got rank {x.ndim} with shape {_shape(x)}."
            )
    b, t, n, h = _shape(query)
    bk, s, k, hk = _shape(key)
    hv = _shape(value)[3]
    if _shape(value)[:3] != _shape(key)[:3] or hv == 0:
        raise ValueError(
            f"`value` must be [B, S, K, Hv] with the batch, length and heads of `key` "
            f"{_shape(key)}, got {_shape(value)}."
        )
    if bk != b:
        raise ValueError(
            f"`key` batch {bk} differs from `query` batch {b} (query {_shape(query)}, key {_shape(key)})."
        )
    if hk != h:
        raise ValueError(
            f"`key`/`value` head_dim {hk} differs from `query` head_dim {h} "
            f"(query {_shape(query)}, key {_shape(key)})."
        )
    if n % k != 0:
        raise ValueError(
            f"`query` heads N={n} must be a multiple of `key`/`value` heads K={k} "
            f"(query {_shape(query)}, key {_shape(key)})."
        )
    if min(b, t, s, n, h) == 0:
        raise ValueError(f"empty dimension in `query` {_shape(query)} or `key` {_shape(key)}.")
    if query.dtype != key.dtype or query.dtype != value.dtype:
        raise ValueError(
            f"`query`, `key` and `value` must share one dtype, got {query.dtype}, {key.dtype}, {value.dtype}."
        )
    if scale is None:
        scale = 1.0 / math.sqrt(h)
    elif not (isinstance(scale, int | float) and math.isfinite(scale)):
        raise ValueError(f"`scale` must be a finite Python number, got {scale!r}.")
    if logits_soft_cap is not None:
        if not isinstance(logits_soft_cap, int | float) or not logits_soft_cap > 0:
            raise ValueError(f"`logits_soft_cap` must be a number > 0, got {logits_soft_cap!r}.")
        logits_soft_cap = float(logits_soft_cap)
    if not isinstance(is_causal, bool):
        raise ValueError(f"`is_causal` must be a bool, got {is_causal!r}.")
    window = _normalise_window(local_window_size)
    ids = _normalise_segment_ids(segment_ids, b, t, s)
    _check_sinks(sinks, n)
    platform, device_kind = platform_and_kind(platform, device_kind, query, key, value)
    spec = AttentionSpec(
        batch=b,
        q_len=t,
        kv_len=s,
        num_heads=n,
        num_kv_heads=k,
        head_dim=h,
        dtype=jnp.dtype(query.dtype).name,
        platform=platform,
        scale=float(scale),
        is_causal=is_causal,
        has_segment_ids=ids is not None,
        local_window=window,
        logits_soft_cap=logits_soft_cap,
        device_kind=device_kind,
        has_query_offset=query_offset is not None and (is_causal or window is not None),
        has_sinks=sinks is not None,
        value_head_dim=None if hv == h else hv,
    )
    return spec, ids
