"""``tokamax``: tokamax's Mosaic TPU linear softmax cross entropy behind the fused linear
cross-entropy contract.

tokamax's kernels (0.0.17's ``pallas_mosaic_tpu_kernel``: the forward and the backward
``pallas_call``) tile tokens, hidden width and vocabulary in VMEM and never write the logits to
HBM. The forward gives each token's loss and ``log Z``, the contract's two outputs. The custom
VJP here calls tokamax's backward with the cotangent ``g_ce + g_log_z`` (its ``(softmax -
onehot) * dout``) and adds ``g_log_z``'s share of the target column (``d log Z = d ce + d
logit[target]``: one head column per token); it returns each gradient in its input's dtype
(tokamax's op returns float32 ones for bfloat16 inputs, which JAX's own VJP of the op refuses).
What tokamax does not have, the check refuses, and the contract falls back, naming the reason:
a ``[V, D]`` head (tokamax takes ``[D, V]``; transposing a tied embedding table would copy the
whole head), a final logit soft cap, a temperature, TPUs before v5. tokamax reads the TPU's
parameters (its VMEM) when the kernel is traced, so it runs on a TPU, or compiles for one from
any host (libtpu's compile-only devices), never in interpret mode on a CPU.
"""

from __future__ import annotations

import re

import jax
import jax.numpy as jnp
from tokamax._src.ops.linear_softmax_cross_entropy_loss import (
    pallas_mosaic_tpu_kernel as tokamax_kernel,
)

from zoo_attention.cross_entropy import CrossEntropyKernel, CrossEntropySpec

SUPPORTED_DTYPES = ("float32", "bfloat16")
#: tokamax's Mosaic kernel needs a TPU of this generation or newer.
MIN_GENERATION = 5


def tpu_generation(device_kind: str | None) -> int | None:
    """``5`` for ``"TPU v5 lite"`` / ``"TPU v5p"``, ``6`` for ``"TPU v6 lite"``; ``None`` when
    the kind names no generation."""
    found = re.search(r"v(\d+)", device_kind or "")
    return int(found.group(1)) if found else None


def _platform_reason(spec: CrossEntropySpec) -> str | None:
    if spec.platform != "tpu":
        return f"needs a TPU (the target is {spec.platform!r})"
    generation = tpu_generation(spec.device_kind)
    if generation is not None and generation < MIN_GENERATION:
        return (
            f"tokamax's Mosaic kernel needs TPU v{MIN_GENERATION} or newer, not {spec.device_kind}"
        )
    return None


class TokamaxCrossEntropyKernel(CrossEntropyKernel):
    """tokamax's ``mosaic_tpu`` linear softmax cross entropy, forward and backward."""

    name = "tokamax"
    priority = 100
    # A Mosaic call cannot be partitioned by XLA: the contract runs it under shard_map.
    partitionable = False

    @property
    def platforms(self) -> tuple[str, ...]:
        return ("tpu",)

    def check(self, spec: CrossEntropySpec) -> str | None:
        reason = _platform_reason(spec)
        if reason is not None:
            return reason
        if spec.head_layout != "dv":
            return (
                "tokamax takes the head as [D, V]; a [V, D] head (a tied embedding or a Linear "
                "weight) would need a transposed copy of the whole head"
            )
        if spec.soft_cap is not None:
            return "tokamax has no final logit soft cap"
        if spec.temperature != 1.0:
            return "tokamax has no temperature"
        if spec.dtype not in SUPPORTED_DTYPES:
            return f"dtype {spec.dtype} is not supported (float32 or bfloat16)"
        if spec.dim % 8:
            return f"tokamax needs a hidden width that is a multiple of 8, not {spec.dim}"
        return None

    def __call__(
        self,
        hidden: jax.Array,
        head: jax.Array,
        targets: jax.Array,
        loss_mask: jax.Array | None,
        spec: CrossEntropySpec,
    ) -> tuple[jax.Array, jax.Array]:
        w = head.astype(hidden.dtype)
        # A token that does not count may carry any target: give tokamax a valid one.
        t = targets if loss_mask is None else jnp.where(loss_mask, targets, 0)
        ce, log_z = tokamax_cross_entropy(hidden, t, w)
        if loss_mask is None:
            return ce, log_z
        return jnp.where(loss_mask, ce, 0.0), jnp.where(loss_mask, log_z, 0.0)


def _blocks(x: jax.Array, w: jax.Array, *, backward: bool) -> dict[str, int]:
    """tokamax's own block sizes for ``x [B, H]`` and ``w [H, V]`` (from the target TPU's
    VMEM, read from the active mesh or the device)."""
    choose = (
        tokamax_kernel.get_heuristic_bwd_config
        if backward
        else tokamax_kernel.get_heuristic_fwd_config
    )
    config = choose(x.shape[0], x.shape[1], w.shape[1], dtype=x.dtype)
    return {
        "b_block_size": config.b_block_size,
        "h_block_size": config.h_block_size,
        "v_block_size": config.v_block_size,
    }


@jax.custom_vjp
def tokamax_cross_entropy(
    x: jax.Array, labels: jax.Array, w: jax.Array
) -> tuple[jax.Array, jax.Array]:
    """``(ce, log_z)`` float32 ``[B]`` of ``x [B, H]`` against ``w [H, V]`` (``x``'s dtype)
    through tokamax's Mosaic forward kernel."""
    ce, log_z = tokamax_kernel.linear_softmax_cross_entropy_loss_fwd_pallas_mosaic_tpu(
        x, labels, w, reduction="none", **_blocks(x, w, backward=False)
    )
    return ce.astype(jnp.float32), log_z.astype(jnp.float32)


def _forward(
    x: jax.Array, labels: jax.Array, w: jax.Array
) -> tuple[tuple[jax.Array, jax.Array], tuple[jax.Array, ...]]:
    ce, log_z = tokamax_cross_entropy(x, labels, w)
    return (ce, log_z), (x, labels, w, log_z)


def _backward(
    residuals: tuple[jax.Array, ...], cotangents: tuple[jax.Array, jax.Array]
) -> tuple[jax.Array, None, jax.Array]:
    x, labels, w, log_z = residuals
    g_ce, g_log_z = (g.astype(jnp.float32) for g in cotangents)
    # tokamax's backward: (softmax - onehot) * dout. With dout = g_ce + g_log_z, log Z's share
    # lacks only its onehot term: g_log_z times the target's column.
    dx, dw = tokamax_kernel.linear_softmax_cross_entropy_loss_bwd_pallas_mosaic_tpu(
        g_ce + g_log_z, log_z, x, labels, w, reduction="none", **_blocks(x, w, backward=True)
    )
    column = jnp.take(w, labels, axis=1).T.astype(jnp.float32)  # [B, H]
    dx = dx.astype(jnp.float32) + g_log_z[:, None] * column
    share = (g_log_z[:, None] * x.astype(jnp.float32)).T  # [H, B]
    dw = dw.astype(jnp.float32).at[:, labels].add(share)
    return dx.astype(x.dtype), None, dw.astype(w.dtype)


tokamax_cross_entropy.defvjp(_forward, _backward)


CROSS_ENTROPY_KERNEL = TokamaxCrossEntropyKernel()
