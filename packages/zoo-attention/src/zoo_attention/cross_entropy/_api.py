"""``linear_cross_entropy``: the one call a language model's loss makes on its output head."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .._partition import current_partition_axes, free_axes, spec_entry
from .._target import active_mesh, input_mesh
from ._kernel import CrossEntropyKernel, sum_losses
from ._registry import get_kernel, resolve
from ._spec import CrossEntropySpec, HeadLayout, check_loss_arguments, make_spec


def scope_name(kernel: str, version: str) -> str:
    """The ``jax.named_scope`` a cross-entropy kernel call runs in, visible in profiles and
    HLO metadata (``zoo_attention.cross_entropy.fused_xla-1.3.0``)."""
    return f"zoo_attention.cross_entropy.{kernel}-{version}"


def _unpartitioned_mesh(kernel: CrossEntropyKernel, hidden: jax.Array, head: jax.Array) -> Any:
    """The mesh a kernel that XLA cannot partition must run under ``shard_map`` on (one with
    free axes of more than one device), or ``None``."""
    if kernel.partitionable:
        return None
    mesh = active_mesh() or input_mesh(hidden, head)
    if mesh is None or math.prod(free_axes(mesh).values()) == 1:
        return None
    return mesh


def _call(
    kernel: CrossEntropyKernel,
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    mask: jax.Array | None,
    spec: CrossEntropySpec,
) -> tuple[jax.Array, jax.Array]:
    """Call ``kernel``; under ``shard_map`` when XLA cannot partition it and a mesh with free
    axes is active: each device its tokens (over the batch and sequence axes of
    :func:`zoo_attention.partition_axes` that divide them) with the whole head."""
    mesh = _unpartitioned_mesh(kernel, hidden, head)
    if mesh is None:
        return kernel(hidden, head, targets, mask, spec)
    free = free_axes(mesh)
    wanted = current_partition_axes()
    axes: list[str] = []
    for axis in (*(wanted.batch or ()), *(wanted.sequence or ())):
        shards = math.prod(free[a] for a in axes)
        if axis in free and axis not in axes and spec.tokens % (shards * free[axis]) == 0:
            axes.append(axis)
    shards = math.prod(free[a] for a in axes)
    local = dataclasses.replace(spec, tokens=spec.tokens // shards, token_shards=1)
    rows = P(spec_entry(tuple(axes)))

    def per_shard(
        h: jax.Array, w: jax.Array, t: jax.Array, m: jax.Array | None
    ) -> tuple[jax.Array, jax.Array]:
        return kernel(h, w, t, m, local)

    # Every free axis is manual inside: one that shards no tokens runs the kernel replicated.
    sharded = jax.shard_map(
        per_shard,
        mesh=mesh,
        in_specs=(rows, P(), rows, None if mask is None else rows),
        out_specs=(rows, rows),
        axis_names=set(free),
        check_vma=False,
    )
    return sharded(hidden, head, targets, mask)


def linear_cross_entropy(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    *,
    loss_mask: jax.Array | None = None,
    head_layout: HeadLayout = "dv",
    soft_cap: float | None = None,
    temperature: float = 1.0,
    implementation: str | None = None,
) -> tuple[jax.Array, jax.Array]:
    """Each token's cross entropy and log normaliser from its hidden state and the output
    head, through the best available kernel; fused kernels never hold the ``[..., V]`` logits.

    With ``logits = cap(hidden @ head) / temperature`` (``head`` cast to ``hidden``'s dtype,
    the product accumulated in float32; ``cap(x) = soft_cap * tanh(x / soft_cap)``, or the
    identity),
    ``log_z = logsumexp(logits)`` and ``ce = log_z - logits[target]``, in float32. A z-loss is
    ``log_z ** 2``; a log-probability is ``-ce``.

    Args:
        hidden: ``[..., D]`` (``[B, T, D]``, ``[N, D]``), floating: the final hidden states
            (after the final norm).
        head: ``[D, V]`` (``head_layout="dv"``) or ``[V, D]`` (``"vd"``: a tied embedding
            table, or a ``Linear`` weight in PyTorch's layout), floating, any ``V``. Never
            copied transposed.
        targets: integers ``[...]`` (``hidden``'s leading shape), in ``[0, V)`` where they
            count.
        loss_mask: ``[...]``, bool or numbers (nonzero: the token counts), or ``None`` (all
            count). A token that does not count gives 0 for both outputs and no gradient, and
            its target is never read (any value, -100 say).
        head_layout: ``"dv"`` or ``"vd"``, as above.
        soft_cap: Gemma's final logit soft cap ``c`` (positive), or ``None``.
        temperature: divides the logits after the soft cap (positive; a sampling
            temperature: GRPO scores completions as they were sampled).
        implementation: a kernel name (``"logits"``, ``"fused_xla"``, ...); ``None`` uses
            ``ZOO_CROSS_ENTROPY`` if set, else the target platform's default order.

    Returns:
        ``(ce, log_z)``, float32 ``[...]`` each, computed under the named scope
        ``zoo_attention.cross_entropy.NAME-VERSION``. Both are differentiable with respect to
        ``hidden`` and ``head``.

    Raises:
        ValueError: a bad argument (naming it and the shapes), an unknown kernel name, or a
            named kernel that cannot serve the call (with its reason).
    """
    spec = make_spec(
        hidden,
        head,
        targets,
        loss_mask,
        head_layout=head_layout,
        soft_cap=soft_cap,
        temperature=temperature,
    )
    resolution = resolve(spec, implementation)
    kernel = get_kernel(resolution.kernel)
    lead = hidden.shape[:-1]
    with jax.named_scope(scope_name(kernel.name, kernel.version)):
        h = hidden.reshape(spec.tokens, spec.dim)
        t = targets.reshape(spec.tokens).astype(jnp.int32)
        m = None if loss_mask is None else loss_mask.reshape(spec.tokens).astype(bool)
        ce, log_z = _call(kernel, h, head, t, m, spec)
        return ce.reshape(lead), log_z.reshape(lead)


def linear_cross_entropy_loss(
    hidden: jax.Array,
    head: jax.Array,
    targets: jax.Array,
    weights: jax.Array | None = None,
    *,
    z_loss: float = 0.0,
    head_layout: HeadLayout = "dv",
    soft_cap: float | None = None,
    temperature: float = 1.0,
    implementation: str | None = None,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """A language model's summed loss, ``Σ w · (ce + z_loss · log_z²)``, from its hidden
    states and output head, through the best available kernel.

    ``ce`` and ``log_z`` are each token's, as :func:`linear_cross_entropy` defines them. With
    the weights and ``z_loss`` known up front, a kernel may compute the gradients in the
    forward pass (``fused_xla`` does: three products with the head per token, the plain
    path's count, where the per-token call's backward pass recomputes the logits for a
    fourth); a kernel without a summed loss of its own is served through its per-token call.

    Args:
        hidden: ``[..., D]``, floating: the final hidden states.
        head: ``[D, V]`` or ``[V, D]`` as ``head_layout`` says (see
            :func:`linear_cross_entropy`).
        targets: integers ``[...]``, in ``[0, V)`` where the weight is nonzero.
        weights: ``[...]`` numbers or bool: each token's weight (the loss mask and any
            scaling; 0: the token does not count and its target is never read), or ``None``
            (all 1). Not differentiated.
        z_loss: the weight of ``log_z²`` (a Python float ``>= 0``).
        head_layout, soft_cap, temperature, implementation: as for
            :func:`linear_cross_entropy`.

    Returns:
        ``(loss_sum, metrics)``: ``loss_sum`` a float32 scalar, differentiable with respect
        to ``hidden`` and ``head``; ``metrics`` float32 scalars ``{"ce": Σ w ce,
        "log_z_squared": Σ w log_z²}``, which carry no gradient (``stop_gradient``: they are
        what the step reports). Computed under the kernel's named scope.

    Raises:
        ValueError: as :func:`linear_cross_entropy`, and for ``weights`` or ``z_loss``.
    """
    z_weight = check_loss_arguments(weights, targets, z_loss)
    spec = make_spec(
        hidden,
        head,
        targets,
        weights,
        head_layout=head_layout,
        soft_cap=soft_cap,
        temperature=temperature,
    )
    resolution = resolve(spec, implementation)
    kernel = get_kernel(resolution.kernel)
    with jax.named_scope(scope_name(kernel.name, kernel.version)):
        h = hidden.reshape(spec.tokens, spec.dim)
        t = targets.reshape(spec.tokens).astype(jnp.int32)
        w = None
        if weights is not None:
            w = jax.lax.stop_gradient(weights.reshape(spec.tokens).astype(jnp.float32))
        if kernel.fuses_loss and _unpartitioned_mesh(kernel, h, head) is None:
            loss, ce_sum, z_sum = kernel.loss(h, head, t, w, spec, z_weight)
        else:
            mask = None if w is None else w != 0
            ce, log_z = _call(kernel, h, head, t, mask, spec)
            loss, ce_sum, z_sum = sum_losses(ce, log_z, w, z_weight)
        metrics = {"ce": ce_sum, "log_z_squared": z_sum}
        return loss, jax.lax.stop_gradient(metrics)
