"""The dtype policy: parameters stored in one dtype, activations computed in another.

Activations carry the compute dtype; each layer casts its (float32) parameters to the dtype of
its input at the point of use, so gradients and optimiser state stay in the parameter dtype.
Norms, softmax and the final logits run in float32 whatever the compute dtype.
"""

from __future__ import annotations

import dataclasses

import jax.numpy as jnp

import zoo_attention

_FLOATS = ("float32", "bfloat16", "float16", "float64")


def default_compute_dtype() -> str:
    """``"bfloat16"`` on accelerators (TPU, GPU), ``"float32"`` on CPU.

    The platform is the target's: the active mesh's when there is one (a TPU step compiled from
    a CPU host computes in bfloat16), else JAX's default backend.
    """
    return "float32" if zoo_attention.find_target().platform == "cpu" else "bfloat16"


def check_float_dtype(name: str, dtype: str) -> str:
    """Return ``dtype`` if it names a floating dtype, else raise ``ValueError`` naming ``name``."""
    if dtype not in _FLOATS:
        raise ValueError(f"`{name}` must be one of {', '.join(_FLOATS)}, got {dtype!r}.")
    return dtype


@dataclasses.dataclass(frozen=True)
class DTypePolicy:
    """Which dtype parameters are stored in and which activations are computed in.

    Attributes:
        param_dtype: dtype of the parameters (``"float32"`` by default).
        compute_dtype: dtype of the activations and matmuls; ``None`` picks
            :func:`default_compute_dtype` for the backend at trace time.
    """

    param_dtype: str = "float32"
    compute_dtype: str | None = None

    def __post_init__(self) -> None:
        check_float_dtype("param_dtype", self.param_dtype)
        if self.compute_dtype is not None:
            check_float_dtype("compute_dtype", self.compute_dtype)

    @property
    def param(self) -> jnp.dtype:
        """The parameter dtype as a numpy dtype."""
        return jnp.dtype(self.param_dtype)

    @property
    def compute(self) -> jnp.dtype:
        """The compute dtype as a numpy dtype (resolved for the current backend)."""
        return jnp.dtype(self.compute_dtype or default_compute_dtype())
