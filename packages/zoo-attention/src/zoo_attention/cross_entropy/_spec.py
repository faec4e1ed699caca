"""The static description of one fused linear cross-entropy call, and the argument checks that
build it."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Literal

import jax.numpy as jnp
from jax.sharding import AxisType

from .._partition import current_partition_axes
from .._target import active_mesh, platform_and_kind

#: How the head is laid out: ``"dv"`` a ``[D, V]`` matrix (``logits = hidden @ head``), ``"vd"``
#: a ``[V, D]`` one (a tied embedding table, or a PyTorch-layout ``Linear`` weight:
#: ``logits = hidden @ head.T``).
HeadLayout = Literal["dv", "vd"]
HEAD_LAYOUTS: tuple[HeadLayout, ...] = ("dv", "vd")


@dataclasses.dataclass(frozen=True)
class CrossEntropySpec:
    """Static description of a ``linear_cross_entropy`` call on ``tokens`` rows.

    Attributes:
        tokens: the number of tokens ``N`` (the leading dimensions of ``hidden`` flattened).
        dim: the hidden width ``D``.
        vocab: the vocabulary size ``V``.
        head_layout: ``"dv"`` (head ``[D, V]``) or ``"vd"`` (head ``[V, D]``).
        dtype: ``hidden``'s dtype (the computation's: the head is cast to it).
        head_dtype: the head's dtype as given.
        masked: whether a loss mask was given.
        soft_cap: ``c`` of the final logit soft cap ``c * tanh(logits / c)``, or ``None``.
        temperature: the logits are divided by it after the soft cap (1: not at all).
        platform, device_kind: the target (see :func:`zoo_attention.find_target`).
        token_shards: how many devices share the tokens (the active mesh's axes that
            :func:`zoo_attention.partition_axes` names for the batch and the sequence); 1
            without a mesh. A kernel sizes its tiles per device from it.
    """

    tokens: int
    dim: int
    vocab: int
    head_layout: HeadLayout
    dtype: str
    head_dtype: str
    masked: bool
    soft_cap: float | None
    platform: str
    device_kind: str | None = None
    token_shards: int = 1
    temperature: float = 1.0


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _is_array(x: Any) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype")


def _check_arrays(
    hidden: Any, head: Any, targets: Any, loss_mask: Any, head_layout: Any
) -> tuple[int, int]:
    """``(dim, vocab)`` after checking every argument; raises ``ValueError`` naming it."""
    for name, x in (("hidden", hidden), ("head", head), ("targets", targets)):
        if not _is_array(x):
            raise ValueError(f"`{name}` must be an array, got {type(x).__name__}.")
    if head_layout not in HEAD_LAYOUTS:
        raise ValueError(
            f"`head_layout` must be 'dv' (head [D, V]) or 'vd' (head [V, D], a tied "
            f"embedding), got {head_layout!r}."
        )
    if hidden.ndim < 2:
        raise ValueError(
            f"`hidden` must be [..., D] with at least one token dimension, got shape "
            f"{_shape(hidden)}."
        )
    if head.ndim != 2:
        raise ValueError(f"`head` must be a matrix [D, V] or [V, D], got shape {_shape(head)}.")
    dim = int(hidden.shape[-1])
    head_dim, vocab = (head.shape[0], head.shape[1]) if head_layout == "dv" else head.shape[::-1]
    if int(head_dim) != dim:
        want = "[D, V]" if head_layout == "dv" else "[V, D]"
        raise ValueError(
            f"`head` {_shape(head)} is not {want} for hidden width D={dim} (hidden "
            f"{_shape(hidden)}, head_layout={head_layout!r}); pass the other head_layout if "
            "the head is transposed."
        )
    for name, x in (("hidden", hidden), ("head", head)):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise ValueError(
                f"`{name}` must have a floating dtype, got {x.dtype} with shape {_shape(x)}; "
                "cast it to float32 or bfloat16."
            )
    lead = _shape(hidden)[:-1]
    if _shape(targets) != lead or not jnp.issubdtype(targets.dtype, jnp.integer):
        raise ValueError(
            f"`targets` must be integers of shape {lead} (hidden's leading dimensions), got "
            f"{targets.dtype} {_shape(targets)}."
        )
    if loss_mask is not None and (not _is_array(loss_mask) or _shape(loss_mask) != lead):
        got = _shape(loss_mask) if _is_array(loss_mask) else type(loss_mask).__name__
        raise ValueError(f"`loss_mask` must have shape {lead} (targets' shape), got {got}.")
    if min(*_shape(hidden), *_shape(head)) == 0:
        raise ValueError(f"empty dimension in `hidden` {_shape(hidden)} or `head` {_shape(head)}.")
    return dim, int(vocab)


def _check_soft_cap(soft_cap: Any) -> float | None:
    if soft_cap is None:
        return None
    if isinstance(soft_cap, bool) or not isinstance(soft_cap, (int, float)):
        raise ValueError(f"`soft_cap` must be a positive number or None, got {soft_cap!r}.")
    if not math.isfinite(soft_cap) or soft_cap <= 0:
        raise ValueError(f"`soft_cap` must be a positive finite number, got {soft_cap!r}.")
    return float(soft_cap)


def _check_temperature(temperature: Any) -> float:
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
        raise ValueError(f"`temperature` must be a positive number, got {temperature!r}.")
    if not math.isfinite(temperature) or temperature <= 0:
        raise ValueError(f"`temperature` must be a positive finite number, got {temperature!r}.")
    return float(temperature)


def check_loss_arguments(weights: Any, targets: Any, z_loss: Any) -> float:
    """Check the summed loss's own arguments (``weights`` of ``targets``' shape, numbers or
    bool, or ``None``; ``z_loss`` a finite number ``>= 0``); returns ``z_loss`` as a float."""
    if weights is not None:
        lead = _shape(targets)
        if not _is_array(weights) or _shape(weights) != lead:
            got = _shape(weights) if _is_array(weights) else type(weights).__name__
            raise ValueError(f"`weights` must have shape {lead} (targets' shape), got {got}.")
        if not (
            jnp.issubdtype(weights.dtype, jnp.number) or jnp.issubdtype(weights.dtype, jnp.bool_)
        ):
            raise ValueError(f"`weights` must be numbers or bool, got {weights.dtype}.")
    if isinstance(z_loss, bool) or not isinstance(z_loss, (int, float)):
        raise ValueError(f"`z_loss` must be a number >= 0 (a Python float), got {z_loss!r}.")
    if not math.isfinite(z_loss) or z_loss < 0:
        raise ValueError(f"`z_loss` must be a finite number >= 0, got {z_loss!r}.")
    return float(z_loss)


def _token_shards() -> int:
    """Devices sharing the tokens: the active mesh's free axes named for the batch and the
    sequence by :func:`zoo_attention.partition_axes`."""
    mesh = active_mesh()
    if mesh is None:
        return 1
    wanted = current_partition_axes()
    names = (*(wanted.batch or ()), *(wanted.sequence or ()))
    sizes = {
        name: size
        for name, size, kind in zip(mesh.axis_names, mesh.axis_sizes, mesh.axis_types, strict=True)
        if kind != AxisType.Manual
    }
    return math.prod(sizes.get(name, 1) for name in set(names))


def make_spec(
    hidden: Any,
    head: Any,
    targets: Any,
    loss_mask: Any = None,
    *,
    head_layout: HeadLayout = "dv",
    soft_cap: float | None = None,
    temperature: float = 1.0,
    platform: str | None = None,
    device_kind: str | None = None,
) -> CrossEntropySpec:
    """Validate the arguments of ``linear_cross_entropy`` and describe the call.

    ``platform`` and ``device_kind`` default to the call's target (:func:`find_target`).
    Raises ``ValueError`` naming the argument and the shapes for anything the contract rejects.
    """
    dim, vocab = _check_arrays(hidden, head, targets, loss_mask, head_layout)
    cap = _check_soft_cap(soft_cap)
    temperature = _check_temperature(temperature)
    platform, device_kind = platform_and_kind(platform, device_kind, hidden, head)
    return CrossEntropySpec(
        tokens=math.prod(_shape(hidden)[:-1]),
        dim=dim,
        vocab=vocab,
        head_layout=head_layout,
        dtype=jnp.dtype(hidden.dtype).name,
        head_dtype=jnp.dtype(head.dtype).name,
        masked=loss_mask is not None,
        soft_cap=cap,
        platform=platform,
        device_kind=device_kind,
        token_shards=_token_shards(),
        temperature=temperature,
    )
