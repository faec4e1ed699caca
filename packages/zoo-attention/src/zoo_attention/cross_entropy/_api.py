"""``linear_cross_entropy``: the one call a language model's loss makes on its output head."""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from .._partition import current_partition_axes, free_axes, spec_entry
from .._target import active_mesh, input_mesh
from ._kernel import CrossEntropyKernel
from ._registry import get_kernel, resolve
from ._spec import CrossEntropySpec, HeadLayout, make_spec


def scope_name(kernel: str, version: str) -> str:
    """The ``jax.named_scope`` a cross-entropy kernel call runs in, visible in profiles and
    HLO metadata (``zoo_attention.cross_entropy.fused_xla-1.3.0``)."""
    return f"zoo_attention.cross_entropy.{kernel}-{version}"


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
    mesh = None if kernel.partitionable else active_mesh() or input_mesh(hidden, head)
    if mesh is None:
        return kernel(hidden, head, targets, mask, spec)
    free = free_axes(mesh)
    if math.prod(free.values()) == 1:
        return kernel(hidden, head, targets, mask, spec)
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
