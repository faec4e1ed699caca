"""Mixed precision: float32 master weights, a compute dtype for the forward pass."""

from __future__ import annotations

import jax
import jax.numpy as jnp
from jaxtyping import PyTree


def resolve_compute_dtype(name: str, platform: str | None = None) -> jnp.dtype:
    """``"auto"`` → bfloat16 on TPU/GPU (where it is faster), float32 on CPU.

    ``platform`` is the target's (a mesh's devices'); default JAX's default backend.
    """
    if name == "auto":
        platform = jax.default_backend() if platform is None else platform
        return jnp.dtype(jnp.bfloat16 if platform in ("tpu", "gpu") else jnp.float32)
    if name not in ("float32", "bfloat16"):
        raise ValueError(f"compute dtype must be 'auto', 'float32' or 'bfloat16', got {name!r}.")
    return jnp.dtype(name)


def cast_floating(tree: PyTree, dtype: jnp.dtype) -> PyTree:
    """Cast every floating array leaf to ``dtype`` (gradients flow back through the cast)."""

    def cast(x: object) -> object:
        if isinstance(x, jax.Array) and jnp.issubdtype(x.dtype, jnp.floating) and x.dtype != dtype:
            return x.astype(dtype)
        return x

    return jax.tree.map(cast, tree)
