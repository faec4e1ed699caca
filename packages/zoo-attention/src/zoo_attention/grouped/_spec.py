"""The static description of one grouped-matmul call, and the argument checks that build it."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp

from .._target import platform_and_kind


@dataclasses.dataclass(frozen=True)
class GroupedMatmulSpec:
    """Static description of a ``grouped_matmul`` call: ``lhs [m, k]``, ``rhs [groups, k, n]``.

    ``dtype`` is ``lhs``'s (the computation's); ``platform`` and ``device_kind`` describe the
    target (see :func:`zoo_attention.find_target`): the active mesh's devices when there is
    one, which is not the host's when compiling for a TPU from a CPU.
    """

    m: int
    k: int
    n: int
    groups: int
    dtype: str
    platform: str
    device_kind: str | None = None


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(int(d) for d in x.shape)


def _check_arrays(lhs: Any, rhs: Any, group_sizes: Any) -> None:
    for name, x in (("lhs", lhs), ("rhs", rhs), ("group_sizes", group_sizes)):
        if not hasattr(x, "shape") or not hasattr(x, "dtype"):
            raise ValueError(f"`{name}` must be an array, got {type(x).__name__}.")
    if lhs.ndim != 2 or rhs.ndim != 3 or lhs.shape[1] != rhs.shape[1]:
        raise ValueError(
            f"grouped_matmul needs lhs [M, K] and rhs [G, K, N], got {_shape(lhs)} and "
            f"{_shape(rhs)}."
        )
    for name, x in (("lhs", lhs), ("rhs", rhs)):
        if not jnp.issubdtype(x.dtype, jnp.floating):
            raise ValueError(
                f"`{name}` must have a floating dtype, got {x.dtype} with shape {_shape(x)}; "
                "cast it to float32 or bfloat16."
            )
    if _shape(group_sizes) != (rhs.shape[0],) or not jnp.issubdtype(group_sizes.dtype, jnp.integer):
        raise ValueError(
            f"`group_sizes` must be integers [{rhs.shape[0]}] (one per group of rhs), got "
            f"{group_sizes.dtype} {_shape(group_sizes)}."
        )
    if min(*_shape(lhs), *_shape(rhs)) == 0:
        raise ValueError(f"empty dimension in `lhs` {_shape(lhs)} or `rhs` {_shape(rhs)}.")


def make_spec(
    lhs: Any,
    rhs: Any,
    group_sizes: Any,
    *,
    platform: str | None = None,
    device_kind: str | None = None,
) -> GroupedMatmulSpec:
    """Validate the arguments of ``grouped_matmul`` and describe the call.

    ``platform`` and ``device_kind`` default to the call's target (:func:`find_target`).
    Raises ``ValueError`` naming the argument and the shapes for anything the contract rejects.
    """
    _check_arrays(lhs, rhs, group_sizes)
    platform, device_kind = platform_and_kind(platform, device_kind, lhs, rhs)
    (m, k), (g, _, n) = _shape(lhs), _shape(rhs)
    return GroupedMatmulSpec(
        m=m,
        k=k,
        n=n,
        groups=g,
        dtype=jnp.dtype(lhs.dtype).name,
        platform=platform,
        device_kind=device_kind,
    )
