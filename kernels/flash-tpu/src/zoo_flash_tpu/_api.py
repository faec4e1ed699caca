"""``flash_attention``: the functional entry point (the registered kernel calls it too)."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

import jax
import jax.numpy as jnp
from jax.experimental.pallas import tpu as pltpu

from ._config import FlashConfig
from ._policy import BlockSizes, choose_block_sizes, generation_for, heads_per_step
from ._vjp import flash_attention_vjp

INTERPRET_VAR = "ZOO_FLASH_TPU_INTERPRET"
SUPPORTED_DTYPES = ("float32", "bfloat16")
MAX_HEAD_DIM = 256


def interpret_requested() -> bool:
    """Whether ``ZOO_FLASH_TPU_INTERPRET=1`` asks for Pallas TPU interpret mode."""
    return os.environ.get(INTERPRET_VAR, "").strip().lower() in ("1", "true", "yes")


def default_interpret_params() -> pltpu.InterpretParams:
    """Interpret mode as the tests use it: uninitialised memory poisoned with NaNs."""
    return pltpu.InterpretParams(uninitialized_memory="nan")


def interpret_params_here() -> Any:
    """The interpret mode for a call traced here.

    Pallas TPU interpret mode (:func:`default_interpret_params`) on one device. Inside a
    ``shard_map`` over several devices it deadlocks in jax 0.10 (its callbacks copy to CPU
    device 0 from inside the running multi-device computation), so there the generic
    interpret mode (``True``) runs the same kernel bodies instead.
    """
    mesh = jax.sharding.get_abstract_mesh()
    if not mesh.empty and mesh.size > 1:
        return True
    return default_interpret_params()


def _device_kind() -> str | None:
    if jax.default_backend() != "tpu":
        return None
    return jax.devices()[0].device_kind


def make_config(
    query: jax.Array | jax.ShapeDtypeStruct,
    key: jax.Array | jax.ShapeDtypeStruct,
    *,
    scale: float,
    is_causal: bool,
    has_segments: bool,
    local_window: tuple[int, int] | None,
    logits_soft_cap: float | None,
    block_sizes: BlockSizes | None = None,
    device_kind: str | None = None,
    interpret: Any = None,
    vmem_limit_bytes: int | None = None,
    value_head_dim: int | None = None,
    has_sinks: bool = False,
) -> FlashConfig:
    """The static configuration of one call, with block sizes from the policy table.

    ``device_kind`` picks the table row (``None``: the current TPU, or the interpret-mode
    row off TPU); ``interpret`` is ``None`` (Mosaic), ``pltpu.InterpretParams`` (Pallas TPU
    interpret mode) or ``True`` (generic interpret mode); ``vmem_limit_bytes`` replaces the
    row's scoped VMEM limit. Only the shapes and dtype of ``query`` and ``key`` are read;
    ``value_head_dim`` (contract 1.3) is the values' head dim when it differs from the
    queries' (the blocks are then planned for the wider of the two), ``has_sinks`` adds the
    sink logits.
    """
    b, t, n, h = query.shape
    _, s, k, _ = key.shape
    if value_head_dim == h:
        value_head_dim = None
    hv = h if value_head_dim is None else value_head_dim
    dtype = jnp.dtype(query.dtype)
    if dtype.name not in SUPPORTED_DTYPES:
        raise ValueError(
            f"flash_tpu supports float32 and bfloat16, got {dtype.name}; cast the inputs."
        )
    if max(h, hv) > MAX_HEAD_DIM:
        raise ValueError(f"flash_tpu supports head dims <= {MAX_HEAD_DIM}, got {h} and {hv}.")
    if vmem_limit_bytes is not None and (
        not isinstance(vmem_limit_bytes, int) or vmem_limit_bytes <= 0
    ):
        raise ValueError(f"vmem_limit_bytes must be a positive int, got {vmem_limit_bytes!r}.")
    if interpret is None and device_kind is None:
        device_kind = _device_kind()
    # No device kind: the interpret row (small blocks) in interpret mode, else the logged
    # conservative row; never the interpret row for a Mosaic compile.
    generation = generation_for(device_kind, interpret=interpret is not None)
    heads = heads_per_step(n // k)
    blocks = choose_block_sizes(
        generation,
        q_len=t,
        kv_len=s,
        head_dim=max(h, hv),
        itemsize=dtype.itemsize,
        heads=heads,
        override=block_sizes,
    )
    return FlashConfig(
        batch=b,
        q_len=t,
        kv_len=s,
        num_heads=n,
        num_kv_heads=k,
        head_dim=h,
        dtype=dtype.name,
        scale=float(scale),
        causal=is_causal,
        window=local_window,
        soft_cap=logits_soft_cap,
        has_segments=has_segments,
        blocks=blocks,
        vmem_limit_bytes=vmem_limit_bytes or generation.vmem_limit_bytes,
        interpret=interpret,
        heads_per_step=heads,
        value_head_dim=value_head_dim,
        has_sinks=has_sinks,
    )


def flash_attention(
    query: jax.Array,
    key: jax.Array,
    value: jax.Array,
    *,
    scale: float | None = None,
    is_causal: bool = False,
    segment_ids: tuple[jax.Array, jax.Array] | None = None,
    local_window: tuple[int, int] | None = None,
    logits_soft_cap: float | None = None,
    block_sizes: BlockSizes | None = None,
    device_kind: str | None = None,
    interpret: Any = None,
    vmem_limit_bytes: int | None = None,
    query_offset: int = 0,
    sinks: jax.Array | None = None,
) -> jax.Array:
    """Flash attention on TPU (or in Pallas TPU interpret mode), differentiable.

    Most code calls ``zoo_attention.dot_product_attention(..., implementation="flash_tpu")``;
    this entry point adds the kernel's own knobs.

    Args:
        query: ``[B, T, N, H]`` float32 or bfloat16.
        key: ``[B, S, K, H]``, ``N % K == 0``.
        value: ``[B, S, K, Hv]``; ``Hv`` may differ from ``H`` (multi-head latent attention).
        scale: logits multiplier, default ``1 / sqrt(H)``.
        is_causal: query ``i`` sees keys ``j <= i``.
        segment_ids: ``(q_ids [B, T], kv_ids [B, S])`` integers; equal ids attend.
        local_window: ``(left, right)``: query ``i`` sees keys in ``[i - left, i + right]``.
        logits_soft_cap: ``c`` for ``c * tanh(logits / c)``.
        block_sizes: override the policy's block sizes.
        device_kind: the TPU generation to plan for (``"TPU v5 lite"``…); default the
            current device. Set it when compiling ahead of time for another generation.
        interpret: ``pltpu.InterpretParams`` to run in Pallas TPU interpret mode, or ``True``
            for generic interpret mode (any backend).
        vmem_limit_bytes: the scoped VMEM limit every Mosaic kernel of the call gets; default
            the generation's (``Generation.vmem_limit_bytes``). Blocks are still planned for
            the generation's budget: a limit below what they need fails to compile.
        query_offset: the position of query row 0 for the causal and window rules (keys
            start at 0), a Python int: the grid is planned from it before tracing.
        sinks: ``[N]`` sink logits, one per query head, each a term of its rows' softmax
            denominator and of nothing else (gpt-oss); differentiable.

    Returns:
        ``[B, T, N, Hv]`` in ``query.dtype``; rows that see no key are zeros.
    """
    if query.ndim != 4 or key.ndim != 4 or value.ndim != 4 or value.shape[:3] != key.shape[:3]:
        raise ValueError(
            f"query must be [B, T, N, H], key [B, S, K, H] and value [B, S, K, Hv], got "
            f"{query.shape}, {key.shape}, {value.shape}."
        )
    if sinks is not None and tuple(sinks.shape) != (query.shape[2],):
        raise ValueError(
            f"sinks must be [N] = ({query.shape[2]},), one per query head, got {sinks.shape}."
        )
    n, h = query.shape[2], query.shape[3]
    if key.shape[2] == 0 or n % key.shape[2]:
        raise ValueError(
            f"query heads N={n} must be a multiple of key/value heads K={key.shape[2]}."
        )
    if local_window is not None:
        if len(local_window) != 2 or min(local_window) < 0:
            raise ValueError(
                f"local_window must be a pair (left, right) >= 0, got {local_window!r}."
            )
        local_window = (int(local_window[0]), int(local_window[1]))
    cfg = make_config(
        query,
        key,
        scale=h**-0.5 if scale is None else scale,
        is_causal=is_causal,
        has_segments=segment_ids is not None,
        local_window=local_window,
        logits_soft_cap=logits_soft_cap,
        block_sizes=block_sizes,
        device_kind=device_kind,
        interpret=interpret,
        vmem_limit_bytes=vmem_limit_bytes,
        value_head_dim=value.shape[3],
        has_sinks=sinks is not None,
    )
    if isinstance(query_offset, bool) or not isinstance(query_offset, int) or query_offset < 0:
        raise ValueError(
            f"query_offset must be a non-negative Python int (flash_tpu plans its grid from "
            f"it before tracing), got {query_offset!r}."
        )
    cfg = dataclasses.replace(cfg, q_offset=query_offset)
    q_ids = kv_ids = None
    if segment_ids is not None:
        q_ids = jnp.asarray(segment_ids[0], jnp.int32)
        kv_ids = jnp.asarray(segment_ids[1], jnp.int32)
    with jax.named_scope("zoo_flash_tpu.flash_attention"):
        return flash_attention_vjp(query, key, value, sinks, q_ids, kv_ids, cfg)
