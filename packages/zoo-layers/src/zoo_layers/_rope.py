"""Rotary position embeddings (the "rotate half" layout), with linear and Llama 3 scaling."""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

ScalingKind = Literal["none", "linear", "llama3"]


@dataclasses.dataclass(frozen=True)
class RopeScaling:
    """How the rotary frequencies are rescaled for longer contexts.

    Attributes:
        kind: ``"none"``; ``"linear"`` (every frequency divided by ``factor``); or ``"llama3"``
            (Llama 3.1: low frequencies divided by ``factor``, high ones kept, a smooth ramp
            between, set by ``low_freq_factor``, ``high_freq_factor`` and
            ``original_max_position``).
    """

    kind: ScalingKind = "none"
    factor: float = 1.0
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position: int = 8192

    def __post_init__(self) -> None:
        if self.kind not in ("none", "linear", "llama3"):
            raise ValueError(
                f"rope scaling `kind` must be 'none', 'linear' or 'llama3', got {self.kind!r}."
            )
        if self.kind != "none" and not self.factor > 0:
            raise ValueError(f"rope scaling `factor` must be > 0, got {self.factor!r}.")
        if self.kind == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ValueError(
                "llama3 rope scaling needs `high_freq_factor` > `low_freq_factor`, got "
                f"{self.high_freq_factor} and {self.low_freq_factor}."
            )


def rope_frequencies(head_dim: int, theta: float, scaling: RopeScaling | None = None) -> np.ndarray:
    """Inverse frequencies ``[head_dim // 2]`` as float32, computed as Hugging Face does."""
    if head_dim % 2:
        raise ValueError(f"rotary embeddings need an even `head_dim`, got {head_dim}.")
    exponent = np.arange(0, head_dim, 2, dtype=np.float32) / np.float32(head_dim)
    inv_freq = (1.0 / (np.float32(theta) ** exponent)).astype(np.float32)
    scaling = scaling or RopeScaling()
    if scaling.kind == "linear":
        inv_freq = inv_freq / np.float32(scaling.factor)
    elif scaling.kind == "llama3":
        low_wavelen = scaling.original_max_position / scaling.low_freq_factor
        high_wavelen = scaling.original_max_position / scaling.high_freq_factor
        wavelen = 2 * math.pi / inv_freq
        scaled = np.where(wavelen > low_wavelen, inv_freq / scaling.factor, inv_freq)
        smooth = (scaling.original_max_position / wavelen - scaling.low_freq_factor) / (
            scaling.high_freq_factor - scaling.low_freq_factor
        )
        smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
        medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
        inv_freq = np.where(medium, smoothed, scaled)
    return inv_freq.astype(np.float32)


def rotate_half(x: Float[Array, "*B H"]) -> Float[Array, "*B H"]:
    """``[x1, x2] -> [-x2, x1]`` over the last axis."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    return jnp.concatenate([-x2, x1], axis=-1)


class Rotary(eqx.Module):
    """Applies rotary embeddings to ``[B, T, N, H]`` heads at integer ``positions [B, T]``.

    Angles and their cos/sin are computed in float32, then cast to the input dtype.
    """

    head_dim: int = eqx.field(static=True)
    theta: float = eqx.field(static=True)
    scaling: RopeScaling = eqx.field(static=True)

    def __init__(
        self, head_dim: int, *, theta: float = 10000.0, scaling: RopeScaling | None = None
    ) -> None:
        rope_frequencies(head_dim, theta, scaling)  # validates
        self.head_dim = head_dim
        self.theta = float(theta)
        self.scaling = scaling or RopeScaling()

    def cos_sin(
        self, positions: Int[Array, "B T"]
    ) -> tuple[Float[Array, "B T H"], Float[Array, "B T H"]]:
        """float32 ``cos`` and ``sin`` tables for ``positions``, duplicated over both halves."""
        inv_freq = jnp.asarray(rope_frequencies(self.head_dim, self.theta, self.scaling))
        angles = positions.astype(jnp.float32)[..., None] * inv_freq
        angles = jnp.concatenate([angles, angles], axis=-1)
        return jnp.cos(angles), jnp.sin(angles)

    def __call__(
        self, x: Float[Array, "B T N H"], positions: Int[Array, "B T"]
    ) -> Float[Array, "B T N H"]:
        cos, sin = self.cos_sin(positions)
        cos = cos[:, :, None, :].astype(x.dtype)
        sin = sin[:, :, None, :].astype(x.dtype)
        return x * cos + rotate_half(x) * sin
