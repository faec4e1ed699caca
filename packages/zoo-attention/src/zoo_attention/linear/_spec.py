"""The static description of one gated-delta-rule call, and the argument checks that build it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp

from .._target import platform_and_kind


@dataclasses.dataclass(frozen=True)
class LinearAttentionSpec:
    """Static description of a ``gated_delta_rule`` call.

    Shapes follow the contract layout: query and key ``[batch, seq_len, num_qk_heads,
    key_dim]``, value ``[batch, seq_len, num_heads, value_dim]``, the decay and beta ``[batch,
    seq_len, num_heads]``, the state ``[batch, num_heads, key_dim, value_dim]``. ``dtype`` is
    the inputs' (and the output's); the recurrence runs in float32. ``platform`` and
    ``device_kind`` describe the target (see :func:`zoo_attention.find_target`).
    """

    batch: int
    seq_len: int
    num_heads: int
    num_qk_heads: int
    key_dim: int
    value_dim: int
    dtype: str
    platform: str
    scale: float
    normalize_qk: bool = False
    has_segment_ids: bool = False
    has_initial_state: bool = False
    device_kind: str | None = None

    @property
    def group_size(self) -> int:
        """Value heads per query/key head (1 when every value head has its own)."""
        return self.num_heads // self.num_qk_heads

    @property
    def features(self) -> tuple[str, ...]:
        """Names of the optional contract features this call uses."""
        used = []
        if self.normalize_qk:
            used.append("normalize_qk")
        if self.has_segment_ids:
            used.append("segment_ids")
        if self.has_initial_state:
            used.append("initial_state")
        return tuple(used)


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


def _check_shapes(query: Any, key: Any, value: Any, log_decay: Any, beta: Any) -> None:
    for name, x in (("query", query), ("key", key), ("value", value)):
        _check_floating(name, x)
        if x.ndim != 4:
            raise ValueError(
                f"`{name}` must be [batch, seq_len, heads, head_dim], got shape {_shape(x)}."
            )
    if _shape(key) != _shape(query):
        raise ValueError(
            f"`key` must have the shape of `query` {_shape(query)}, got {_shape(key)}."
        )
    b, t, k, _ = _shape(query)
    if _shape(value)[:2] != (b, t):
        raise ValueError(
            f"`value` must start with the batch and length of `query` ({b}, {t}), got "
            f"{_shape(value)}."
        )
    n = _shape(value)[2]
    if n % k:
        raise ValueError(
            f"`value`'s heads ({n}) must be a multiple of the query/key heads ({k}): each "
            "query/key head serves a group of value heads."
        )
    if len({query.dtype, key.dtype, value.dtype}) != 1:
        raise ValueError(
            f"`query`, `key` and `value` must share one dtype, got {query.dtype}, {key.dtype} "
            f"and {value.dtype}."
        )
    for name, x in (("log_decay", log_decay), ("beta", beta)):
        _check_floating(name, x)
        if _shape(x) != (b, t, n):
            raise ValueError(
                f"`{name}` must have shape {(b, t, n)} (batch, seq_len, value heads), got "
                f"{_shape(x)}."
            )
    if min(*_shape(query), *_shape(value)) == 0:
        raise ValueError(f"empty dimension in `query` {_shape(query)} or `value` {_shape(value)}.")


def _check_segment_ids(segment_ids: Any, batch: int, seq_len: int) -> jax.Array | None:
    if segment_ids is None:
        return None
    if not hasattr(segment_ids, "shape") or not jnp.issubdtype(segment_ids.dtype, jnp.integer):
        dtype = getattr(segment_ids, "dtype", type(segment_ids).__name__)
        raise ValueError(f"`segment_ids` must be an integer array [batch, seq_len], got {dtype}.")
    if _shape(segment_ids) != (batch, seq_len):
        raise ValueError(
            f"`segment_ids` must have shape {(batch, seq_len)}, got {_shape(segment_ids)}."
        )
    return jnp.asarray(segment_ids, jnp.int32)


def _check_state(initial_state: Any, shape: tuple[int, ...]) -> jax.Array | None:
    if initial_state is None:
        return None
    _check_floating("initial_state", initial_state)
    if _shape(initial_state) != shape:
        raise ValueError(
            f"`initial_state` must have shape {shape} (batch, value heads, key_dim, value_dim), "
            f"got {_shape(initial_state)}."
        )
    return jnp.asarray(initial_state, jnp.float32)


def _check_scale(scale: Any, key_dim: int) -> float:
    if scale is None:
        return key_dim**-0.5
    if isinstance(scale, bool) or not isinstance(scale, int | float):
        raise ValueError(f"`scale` must be a positive number or None, got {scale!r}.")
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"`scale` must be a positive finite number, got {scale!r}.")
    return float(scale)


def make_spec(
    query: Any,
    key: Any,
    value: Any,
    log_decay: Any,
    beta: Any,
    *,
    scale: float | None = None,
    normalize_qk: bool = False,
    segment_ids: Any = None,
    initial_state: Any = None,
    platform: str | None = None,
    device_kind: str | None = None,
) -> tuple[LinearAttentionSpec, jax.Array | None, jax.Array | None]:
    """Validate the arguments of ``gated_delta_rule`` and describe the call.

    Returns the spec, the segment ids as int32 (or ``None``) and the initial state as float32
    (or ``None``). ``platform`` and ``device_kind`` default to the call's target
    (:func:`zoo_attention.find_target`). Raises ``ValueError`` naming the argument and the shapes
    for anything the contract rejects.
    """
    _check_shapes(query, key, value, log_decay, beta)
    b, t, k, dk = _shape(query)
    n, dv = _shape(value)[2:]
    if not isinstance(normalize_qk, bool):
        raise ValueError(f"`normalize_qk` must be True or False, got {normalize_qk!r}.")
    ids = _check_segment_ids(segment_ids, b, t)
    state = _check_state(initial_state, (b, n, dk, dv))
    platform, device_kind = platform_and_kind(platform, device_kind, query, value)
    spec = LinearAttentionSpec(
        batch=b,
        seq_len=t,
        num_heads=n,
        num_qk_heads=k,
        key_dim=dk,
        value_dim=dv,
        dtype=jnp.dtype(value.dtype).name,
        platform=platform,
        scale=_check_scale(scale, dk),
        normalize_qk=normalize_qk,
        has_segment_ids=ids is not None,
        has_initial_state=state is not None,
        device_kind=device_kind,
    )
    return spec, ids, state
