"""Mixed precision: float32 master weights, a compute dtype for the forward pass.

The parameter policy: fine-tuning keeps float32 master weights whatever dtype a checkpoint is
stored in (a bfloat16 checkpoint is upcast on load, and exported in bfloat16 again); the
forward pass runs in the compute dtype. ``model_config.param_dtype`` overrides the parameters'
dtype; the optimizer state then follows the parameters' dtype.
"""

from __future__ import annotations

import dataclasses
from typing import Any

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


def cast_model(model: Any, dtype: str) -> Any:
    """A zoo model with its floating parameters, and its config's ``param_dtype``, in ``dtype``
    (e.g. to export float32 master weights in the dtype the checkpoint came in)."""
    cast = cast_floating(model, jnp.dtype(dtype))
    config = getattr(cast, "config", None)
    if config is None or config.param_dtype == dtype:
        return cast
    return dataclasses.replace(cast, config=config.replace(param_dtype=dtype))
